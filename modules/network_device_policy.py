#!/usr/bin/python
# -*- coding: utf-8 -*-
# Science DMZ Kit: derive one network device's policy from the inventory.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: network_device_policy
short_description: Derive a network device's ACL, MTUs and port buffers from the inventory
description:
  - Builds the platform-neutral model the network_device templates render. The WAN-inbound ACL
    permits exactly the flows the collaborators' services need to the site's DTNs, gateways
    and measurement points (policy/services.yml), after the blocklist, return traffic,
    path-MTU discovery and link-peer entries, and denies and counts the rest.
  - Port buffers are speed x the largest collaborator RTT; where the platform's per-port
    maximum is lower, a warning names the critical RTT the port can serve at line rate.
  - Fails, touching nothing, with one line per problem (invalid prefixes, reversed port
    ranges, unknown platforms or services, collaborators without prefixes, overlapping
    collaborator prefixes, shadowed entries, blocklist entries overlapping a collaborator).
  - Runs on the control node and never contacts a device.
options:
  device: {description: Inventory name of the device., type: str, required: true}
  hosts: {description: "Every host: groups and sdmz_* variables (filter sdmz_inventory_view).", type: dict, required: true}
  collaborators: {description: sdmz_collaborators., type: list, elements: dict, required: true}
  catalogue: {description: The services catalogue merged with sdmz_services., type: dict, required: true}
  blocklist: {description: "Blocklist entries: address, expiry (ISO 8601, UTC), reason.", type: list, elements: dict, default: []}
  now: {description: "The time expiries are compared with (ISO 8601); default: now.", type: str}
  options: {description: "mtu, acl_name, permit_return_traffic, link_rules, platform_max_port_buffer_bytes, default_rtt_ms.", type: dict, default: {}}
author: Science DMZ Kit
"""

RETURN = r"""
policy: {description: The device model (ports, acl per family, warnings, expired blocklist entries)., returned: success, type: dict}
audit: {description: One row per ACL entry with the inventory entries that produced it., returned: success, type: list}
"""

import datetime

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sdmz_acl import PolicyError, device_policy, parse_expiry


def _ports_text(entry):
    if entry["port_min"] is None:
        if entry["icmp_type"] is not None:
            return "type %s%s" % (entry["icmp_type"], "" if entry["icmp_code"] is None else " code %s" % entry["icmp_code"])
        return "established" if entry["tcp_established"] else "any"
    if entry["port_min"] == entry["port_max"]:
        return str(entry["port_min"])
    return "%d-%d" % (entry["port_min"], entry["port_max"])


def audit_rows(policy):
    rows = []
    for family in ("ipv4", "ipv6"):
        for entry in policy["acl"][family]:
            rows.append({
                "seq": entry["seq"], "family": family, "action": entry["action"], "kind": entry["kind"],
                "source": entry["source"],
                "destination": entry["destination"] + (" (%s)" % entry["destination_host"] if entry.get("destination_host") else ""),
                "protocol": entry["protocol"], "ports": _ports_text(entry),
                "produced_by": "; ".join(
                    r["inventory"] + (" -> %s %s" % (r["service"], r["catalogue"]) if r.get("service") else "")
                    for r in entry["reasons"]),
            })
    return rows


def main():
    module = AnsibleModule(
        argument_spec=dict(
            device=dict(type="str", required=True),
            hosts=dict(type="dict", required=True),
            collaborators=dict(type="list", elements="dict", required=True),
            catalogue=dict(type="dict", required=True),
            blocklist=dict(type="list", elements="dict", default=[]),
            now=dict(type="str"),
            options=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        now = parse_expiry(params["now"]) if params["now"] else datetime.datetime.now(datetime.timezone.utc)
    except ValueError as exc:
        module.fail_json(msg="now: %s" % exc)
    try:
        policy = device_policy(params["device"], params["hosts"], params["collaborators"], params["catalogue"],
                               params["blocklist"], now, params["options"])
    except PolicyError as exc:
        module.fail_json(msg="the policy for %s has %d problem(s); no device was touched:\n%s"
                         % (params["device"], len(exc.problems), "\n".join("  - " + p for p in exc.problems)),
                         problems=exc.problems)
    for warning in policy["warnings"]:
        module.warn("%s: %s" % (params["device"], warning))
    module.exit_json(changed=False, policy=policy, audit=audit_rows(policy))


if __name__ == "__main__":
    main()
