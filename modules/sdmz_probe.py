#!/usr/bin/python
# -*- coding: utf-8 -*-
# Science DMZ Kit: probe TCP ports from a host, telling a firewall's drop from a refusal.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sdmz_probe
short_description: Connect to TCP ports and tell open, refused (reached) and filtered (dropped) apart
description:
  - For each target, a TCP connection from this host. C(open) and C(refused) both prove that
    the path and every ACL on it let the SYN through (a refusal is the destination's own
    RST); C(filtered) means no answer within the timeout, which is what an ACL's drop gives.
  - Changes nothing.
options:
  targets: {description: "[{address, port}] (plus any keys, returned unchanged).", type: list, elements: dict, required: true}
  timeout: {description: Seconds to wait for an answer., type: float, default: 2.0}
  source: {description: Source address to bind (optional)., type: str}
author: Science DMZ Kit
"""

RETURN = r"""
results: {description: "The targets, each with status open|refused|filtered|error and detail.", returned: always, type: list}
"""

import errno
import socket

from ansible.module_utils.basic import AnsibleModule


def probe(address, port, timeout, source=None):
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        if source:
            sock.bind((source, 0))
        sock.connect((address, int(port)))
        return "open", "connected"
    except socket.timeout:
        return "filtered", "no answer in %.1f s" % timeout
    except OSError as exc:
        if exc.errno == errno.ECONNREFUSED:
            return "refused", "the destination answered with a reset"
        if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EACCES, errno.EPERM):
            return "filtered", "%s (an ICMP error or a local rule)" % exc.strerror
        return "error", str(exc)
    finally:
        sock.close()


def main():
    module = AnsibleModule(
        argument_spec=dict(
            targets=dict(type="list", elements="dict", required=True),
            timeout=dict(type="float", default=2.0),
            source=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    results = []
    for target in module.params["targets"]:
        status, detail = probe(str(target["address"]), target["port"], module.params["timeout"], module.params["source"])
        results.append(dict(target, status=status, detail=detail))
    module.exit_json(changed=False, results=results)


if __name__ == "__main__":
    main()
