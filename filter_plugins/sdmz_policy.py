# -*- coding: utf-8 -*-
# Science DMZ Kit: the permitted flows, derived from the collaborators and the
# services catalogue (policy/services.yml). Network ACLs, host firewalls and
# cloud security groups all start from this list; Terraform's sdmz_policy
# module derives the same list, and a test compares the two.
from __future__ import annotations

import ipaddress

FAMILY_PROTOCOLS = {"ipv4": {"tcp", "udp", "icmp"}, "ipv6": {"tcp", "udp", "icmpv6"}}


def _ports(rule):
    if "ports" not in rule:
        return None, None
    low, _, high = str(rule["ports"]).partition("-")
    return int(low), int(high or low)


def sdmz_policy_flows(collaborators, catalogue):
    """One entry per permitted flow: who (collaborator, prefix) may reach which
    hosts (destination group) with which protocol and ports, and why (service)."""
    flows = {}
    for collab in collaborators or []:
        for service in collab.get("services", []):
            entry = catalogue[service]
            for rule in entry["rules"]:
                low, high = _ports(rule)
                for family, key in (("ipv4", "prefixes_v4"), ("ipv6", "prefixes_v6")):
                    if rule["protocol"] not in FAMILY_PROTOCOLS[family]:
                        continue
                    for prefix in collab.get(key, []) or []:
                        source = str(ipaddress.ip_network(prefix))
                        for group in entry["offered_by"]:
                            flow = {"collaborator": collab["name"], "service": service, "source": source,
                                    "family": family, "protocol": rule["protocol"], "port_min": low,
                                    "port_max": high, "destination_group": group}
                            key_ = (group, family, rule["protocol"], low or 0, high or 0, source)
                            # Two services may share a port (443): one flow, every reason kept.
                            if key_ in flows:
                                flows[key_]["service"] = ",".join(sorted({*flows[key_]["service"].split(","), service}))
                                continue
                            flows[key_] = flow
    return [flows[k] for k in sorted(flows)]


class FilterModule:
    def filters(self):
        return {"sdmz_policy_flows": sdmz_policy_flows}
