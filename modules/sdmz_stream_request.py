#!/usr/bin/python
# -*- coding: utf-8 -*-
# Science DMZ Kit: make a gateway's sdmz-proxy hold exactly the declared stream
# requests, through sdmz-streamctl (its authenticated control socket).
from __future__ import annotations

DOCUMENTATION = r"""
module: sdmz_stream_request
short_description: Reconcile sdmz-proxy's stream requests with a declared list
description:
  - Lists the proxy's requests, creates the missing ones, updates what a live
    request can change (rate, buffer, policy, record, allow), recreates a request
    whose channels, addresses or TLS leg changed, and releases requests no longer
    declared.
  - Check mode reports the same plan and changes nothing.
options:
  requests:
    description: Every request this gateway should hold (sdmz-streamctl keys).
    type: list
    elements: dict
    required: true
  sides:
    description: Create and update only requests of these sides (both by default).
    type: list
    elements: str
    default: [producer, consumer]
  release_undeclared:
    description: Release requests the list does not declare.
    type: bool
    default: true
  streamctl:
    description: Path of sdmz-streamctl.
    type: path
    default: /usr/local/bin/sdmz-streamctl
  socket:
    description: The proxy's control socket.
    type: path
    default: /run/sdmz-proxy/control.sock
  key_file:
    description: The shared control key.
    type: path
    default: /etc/sdmz-proxy/control.key
"""

RETURN = r"""
created: {description: Ids created (or recreated), type: list, returned: always}
updated: {description: Ids updated in place, type: list, returned: always}
released: {description: Ids released, type: list, returned: always}
"""

import json
import os
import re

from ansible.module_utils.basic import AnsibleModule

UPDATABLE = ("rate", "buffer", "policy", "record", "allow", "max-conns")
FIXED = ("side", "channels", "listen", "connect", "tls", "tls-peer")
_SCALE = {"": 0, "k": 1, "m": 2, "g": 3}


def _quantity(value, base):
    match = re.fullmatch(r"(\d+)([kKmMgG]?)", str(value))
    if not match:
        return str(value)
    return int(match.group(1)) * base ** _SCALE[match.group(2).lower()]


def normalise(request):
    """The form the proxy lists: rates in bits, sizes in bytes, prefixes sorted."""
    out = {}
    for key, value in request.items():
        if key == "rate":
            out[key] = _quantity(value, 1000)
        elif key in ("buffer", "record"):
            out[key] = _quantity(value, 1024)
        elif key == "allow":
            out[key] = ",".join(sorted(str(value).split(",")))
        elif key in ("channels", "max-conns"):
            out[key] = int(value)
        else:
            out[key] = str(value)
    out.setdefault("tls", "none")  # the proxy lists tls only when a leg uses it
    return out


def streamctl(module, *args):
    p = module.params
    rc, out, err = module.run_command([p["streamctl"], "--socket", p["socket"], "--key-file",
                                       p["key_file"], "--json", *args])
    if rc == 3:
        module.fail_json(msg="sdmz-proxy is unreachable: %s" % err.strip())
    try:
        reply = json.loads(out)
    except ValueError:
        module.fail_json(msg="sdmz-streamctl %s: %s" % (args[0], (err or out).strip()))
    if not reply["ok"]:
        module.fail_json(msg="sdmz-streamctl %s: %s" % (args[0], reply["message"]))
    return reply


def as_args(request):
    return ["%s=%s" % (k, v) for k, v in request.items() if k != "id"]


def plan(current, wanted, sides, release_undeclared):
    create, update, recreate, release = [], [], [], []
    for rid, want in wanted.items():
        have = current.get(rid)
        if want["side"] not in sides:
            continue
        if have is None:
            create.append(rid)
            continue
        if any(have.get(k) != want.get(k) for k in FIXED if k in want or k in have):
            recreate.append(rid)
        elif any(have.get(k) != want[k] for k in UPDATABLE if k in want):
            update.append(rid)
    if release_undeclared:
        release = sorted(set(current) - set(wanted))
    return create, update, recreate, release


def main():
    module = AnsibleModule(
        argument_spec=dict(
            requests=dict(type="list", elements="dict", required=True),
            sides=dict(type="list", elements="str", default=["producer", "consumer"]),
            release_undeclared=dict(type="bool", default=True),
            streamctl=dict(type="path", default="/usr/local/bin/sdmz-streamctl"),
            socket=dict(type="path", default="/run/sdmz-proxy/control.sock"),
            key_file=dict(type="path", default="/etc/sdmz-proxy/control.key"),
        ),
        supports_check_mode=True,
    )
    wanted = {}
    for index, request in enumerate(module.params["requests"]):
        if "id" not in request or "side" not in request:
            module.fail_json(msg="requests[%d]: id and side are required" % index)
        wanted[str(request["id"])] = normalise(request)
    if module.check_mode and not os.path.exists(module.params["socket"]):
        listed = {"items": []}  # not installed yet: everything would be created
    else:
        listed = streamctl(module, "list")
    current = {item["id"]: normalise({k: v for k, v in item.items() if k not in ("kind", "conns")})
               for item in listed["items"]}
    create, update, recreate, release = plan(current, wanted, module.params["sides"],
                                             module.params["release_undeclared"])
    changed = bool(create or update or recreate or release)
    after = {r: current[r] for r in current if r not in release}
    after.update({r: wanted[r] for r in create + update + recreate})

    def listing(requests):
        return "".join("%s %s\n" % (r, json.dumps(requests[r], sort_keys=True)) for r in sorted(requests))

    diff = {"before": listing(current), "after": listing(after)}
    result = dict(changed=changed, created=sorted(create + recreate), updated=sorted(update),
                  released=release, diff=diff)
    if module.check_mode or not changed:
        module.exit_json(**result)
    for rid in release + recreate:
        streamctl(module, "release", "id=%s" % rid)
    for rid in create + recreate:
        streamctl(module, "create", "id=%s" % rid, *as_args(wanted[rid]))
    for rid in update:
        streamctl(module, "update", "id=%s" % rid,
                  *["%s=%s" % (k, wanted[rid][k]) for k in UPDATABLE if k in wanted[rid]])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
