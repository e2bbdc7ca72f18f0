#!/usr/bin/python
# -*- coding: utf-8 -*-
# Science DMZ Kit: the response plan's blocklist file (add an entry, prune expired ones).
from __future__ import annotations

DOCUMENTATION = r"""
---
module: network_device_blocklist
short_description: Add an address to the ACL blocklist with an expiry, and prune expired entries
description:
  - Keeps the YAML file the network_device role reads beside the inventory's static
    sdmz_acl_blocklist. Every run removes entries whose expiry has passed.
  - With I(address), adds (or extends) an entry expiring I(ttl) from now. Refuses, changing
    nothing, an invalid address or TTL, a missing reason, or an address that overlaps a
    collaborator's prefix (collaborators are never blocked).
  - Check mode and diff report the change without writing.
options:
  path: {description: The blocklist file., type: path, required: true}
  address: {description: An address or prefix to block; omit to only prune., type: str}
  ttl: {description: "How long: 90s, 30m, 1h, 2d.", type: str, default: 1h}
  reason: {description: Why (kept in the file and on the device's ACL entry)., type: str}
  collaborators: {description: sdmz_collaborators (their prefixes are never blocked)., type: list, elements: dict, default: []}
  now: {description: "The current time (ISO 8601); default: now.", type: str}
author: Science DMZ Kit
"""

RETURN = r"""
entries: {description: The entries in force after the run., returned: always, type: list}
added: {description: The entry added or extended., returned: when address is given, type: dict}
pruned: {description: Expired entries removed., returned: always, type: list}
"""

import datetime
import ipaddress
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sdmz_acl import collaborator_sources, overlapping_sources, parse_expiry, parse_ttl

try:
    import yaml
except ImportError:  # ansible-core depends on PyYAML
    yaml = None

KEY = "sdmz_acl_blocklist_dynamic"
HEADER = ("# The Science DMZ Kit's response plan (playbooks/respond.yml) keeps this file.\n"
          "# Entries expire by themselves; the network_device role applies those in force.\n")


def fmt(moment):
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle) or {}
    except FileNotFoundError:
        return [], ""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    return list(data.get(KEY) or []), text


def render(entries):
    return HEADER + yaml.safe_dump({KEY: entries}, default_flow_style=False, sort_keys=True)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            address=dict(type="str"),
            ttl=dict(type="str", default="1h"),
            reason=dict(type="str"),
            collaborators=dict(type="list", elements="dict", default=[]),
            now=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    now = parse_expiry(p["now"]) if p["now"] else datetime.datetime.now(datetime.timezone.utc)
    problems = []
    network = None
    if p["address"]:
        try:
            network = ipaddress.ip_network(p["address"], strict=False)
        except ValueError as exc:
            problems.append("block: '%s' is not an address or prefix: %s" % (p["address"], exc))
        try:
            ttl = parse_ttl(p["ttl"])
        except ValueError as exc:
            problems.append("ttl: %s" % exc)
        if not (p["reason"] or "").strip():
            problems.append("reason: missing; say why the address is blocked (-e reason=...)")
        if network is not None:
            # The same rule the ACL derivation applies: collaborators are never blocked.
            sources = collaborator_sources(p["collaborators"], [])
            for _, name, key, index, prefix in overlapping_sources(network, sources):
                problems.append("block: %s overlaps collaborator %s's %s[%d] %s; collaborators are never "
                                "blocked" % (network, name, key, index, prefix))
    if problems:
        module.fail_json(msg="nothing was blocked:\n%s" % "\n".join("  - " + x for x in problems), problems=problems)

    try:
        entries, before = read(p["path"])
    except (OSError, yaml.YAMLError) as exc:
        module.fail_json(msg="cannot read the blocklist %s: %s" % (p["path"], exc))
    kept, pruned = [], []
    for entry in entries:
        try:
            expired = parse_expiry(entry.get("expiry")) <= now
        except (TypeError, ValueError) as exc:
            module.fail_json(msg="%s: entry %s has an unreadable expiry: %s" % (p["path"], entry, exc))
        (pruned if expired else kept).append(entry)
    result = {"pruned": pruned}
    if network is not None:
        expiry = fmt(now + ttl)
        same = [e for e in kept if str(ipaddress.ip_network(e["address"], strict=False)) == str(network)]
        if same:
            entry = same[0]
            if parse_expiry(entry["expiry"]) < parse_expiry(expiry):
                entry["expiry"] = expiry
            entry["reason"] = p["reason"]
        else:
            entry = {"address": str(network), "expiry": expiry, "reason": p["reason"], "added": fmt(now)}
            kept.append(entry)
        result["added"] = entry
    after = render(kept) if (kept or before) else ""
    changed = after != before
    result.update(changed=changed, entries=kept)
    if changed:
        result["diff"] = {"before": before, "after": after, "before_header": p["path"], "after_header": p["path"]}
        if not module.check_mode:
            directory = os.path.dirname(p["path"]) or "."
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(after)
            os.chmod(tmp, 0o640)
            os.replace(tmp, p["path"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
