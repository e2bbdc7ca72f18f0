#!/usr/bin/python
# -*- coding: utf-8 -*-
# Science DMZ Kit: what a post-rollout check must probe, derived from the policy.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sdmz_verify_plan
short_description: Derive the post-rollout probes (ACL, path MTU, throughput) from the policy
description:
  - ACL probes - from each inventory host inside a collaborator's prefixes, every TCP port
    and ICMP the collaborator's services open to the site's hosts (expect C(reach)); from each
    host of the non-collaborator group, the same destinations (expect C(drop)). UDP gives no
    answer that tells a drop from silence, so UDP rules are listed as not probed.
  - Path MTU - from each local DTN and measurement point to each collaborator host, a
    full-size ping with DF set.
  - Throughput - iperf3 from each local DTN and each collaborator host to each measurement
    point running an iperf3 server, where the policy lets it in.
  - Runs on the control node; contacts no host.
options:
  site: {description: The local site., type: str, required: true}
  hosts: {description: "Every host: groups and sdmz_* variables (filter sdmz_inventory_view).", type: dict, required: true}
  collaborators: {description: sdmz_collaborators., type: list, elements: dict, required: true}
  catalogue: {description: The services catalogue., type: dict, required: true}
  non_collaborator_group: {description: Inventory group of hosts that must be denied., type: str, default: non_collaborators}
  iperf3_servers: {description: Measurement points running an iperf3 server., type: list, elements: str, default: []}
  iperf3_port: {description: Their port., type: int, default: 5201}
author: Science DMZ Kit
"""

RETURN = r"""
acl_probes: {description: "source_host, destination_host, address, protocol, port, service, expect.", returned: success, type: list}
not_probed: {description: Rules that cannot be probed (UDP) with the reason., returned: success, type: list}
mtu_paths: {description: "source_host, destination_host, address.", returned: success, type: list}
throughput_paths: {description: "client_host, server_host, address, port.", returned: success, type: list}
"""

import ipaddress

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sdmz_acl import (PolicyError, catalogue_rules, collaborator_sources, local_destinations,
                                           permitted_flows)


def plan(params):
    hosts, site = params["hosts"], params["site"]
    problems = []
    rules = catalogue_rules(params["catalogue"], problems)
    sources = collaborator_sources(params["collaborators"], problems)
    if problems:
        raise PolicyError(problems)
    flows = permitted_flows(hosts, site, sources, params["catalogue"], rules, params["collaborators"])
    # The collaborators' data hosts the inventory knows (in the lab, site B's).
    remote = {}
    for other in sorted({entry.get("vars", {}).get("sdmz_site") for entry in hosts.values()} - {site, None}):
        for group in ("dtn", "gateway", "perfsonar"):
            for host, network in local_destinations(hosts, other, group):
                address = network.network_address
                for _, name, _, _, prefix in sources:
                    if address.version == 4 and address in prefix:
                        remote[host] = (name, address)
    outsiders = sorted(h for h in hosts if params["non_collaborator_group"] in hosts[h].get("groups", []))
    probes, not_probed, seen = [], [], set()
    for flow in flows:
        if flow["family"] != "ipv4":
            continue
        target = {"destination_host": flow["destination_host"], "address": str(ipaddress.ip_network(flow["destination"]).network_address),
                  "protocol": flow["protocol"], "port": flow["port_min"],
                  "service": flow["remark"].split(": ", 1)[-1]}
        if flow["protocol"] == "udp":
            not_probed.append(dict(target, reason="UDP: no answer tells a drop from silence"))
            continue
        if flow["protocol"] not in ("tcp", "icmp"):
            continue
        network = ipaddress.ip_network(flow["source"])
        for host, (name, address) in sorted(remote.items()):
            if address in network:
                probes.append(dict(target, source_host=host, source_kind="collaborator " + name, expect="reach"))
        key = (target["address"], target["protocol"], target["port"])
        if key not in seen:
            seen.add(key)
            for host in outsiders:
                probes.append(dict(target, source_host=host, source_kind="not a collaborator", expect="drop"))
    local = [h for g in ("dtn", "perfsonar") for h, _ in local_destinations(hosts, site, g)]
    mtu = [{"source_host": src, "destination_host": dst, "address": str(address)}
           for src in sorted(set(local)) for dst, (_, address) in sorted(remote.items())]
    throughput = []
    for server in params["iperf3_servers"]:
        for point, address in local_destinations(hosts, site, "perfsonar"):
            if point != server or address.version != 4:
                continue
            server_address = address.network_address
            clients = sorted({h for h, _ in local_destinations(hosts, site, "dtn")})
            clients += [h for h in sorted(remote) if any(
                f["destination_host"] == server and f["protocol"] == "tcp" and
                f["port_min"] <= params["iperf3_port"] <= f["port_max"] and
                remote[h][1] in ipaddress.ip_network(f["source"]) for f in flows)]
            throughput += [{"client_host": c, "server_host": server, "address": str(server_address),
                            "port": params["iperf3_port"]} for c in clients]
    return probes, not_probed, mtu, throughput


def main():
    module = AnsibleModule(
        argument_spec=dict(
            site=dict(type="str", required=True),
            hosts=dict(type="dict", required=True),
            collaborators=dict(type="list", elements="dict", required=True),
            catalogue=dict(type="dict", required=True),
            non_collaborator_group=dict(type="str", default="non_collaborators"),
            iperf3_servers=dict(type="list", elements="str", default=[]),
            iperf3_port=dict(type="int", default=5201),
        ),
        supports_check_mode=True,
    )
    try:
        probes, not_probed, mtu, throughput = plan(module.params)
    except PolicyError as exc:
        module.fail_json(msg="the policy has problems:\n" + "\n".join("  - " + p for p in exc.problems))
    module.exit_json(changed=False, acl_probes=probes, not_probed=not_probed, mtu_paths=mtu,
                     throughput_paths=throughput)


if __name__ == "__main__":
    main()
