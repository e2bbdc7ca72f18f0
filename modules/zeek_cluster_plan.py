#!/usr/bin/python
# -*- coding: utf-8 -*-
# Science DMZ Kit: derive a Zeek cluster (node.cfg, networks.cfg) from the inventory.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: zeek_cluster_plan
short_description: Derive a Zeek cluster layout and its networks from the inventory
description:
  - One manager, logger and proxy where sdmz_zeek_node_roles says, and per capture
    interface of each worker host a worker section with lb_method=af_packet, lb_procs,
    pin_cpus (the highest CPUs), a fanout id unique per interface and af_packet_buffer_size.
  - The rendered node.cfg is checked against zeekctl's own rules (lb_method values, lb_procs
    needs lb_method, unique fanout ids, one manager, a proxy) before it is returned.
  - networks.cfg lists the site's DMZ prefixes (plus zeek_extra_networks).
  - Fails, changing nothing, with one line per problem (a worker with more lb_procs than
    CPUs, a capture interface that is the management interface, no worker, no manager).
  - Runs on the control node and contacts no host.
options:
  site: {description: The local site's name., type: str, required: true}
  sensors: {description: "Zeek host -> {roles, interfaces, capture_interfaces, cpus, mgmt_address, lb_procs}.", type: dict, required: true}
  hosts: {description: "Every host: groups and sdmz_* variables (filter sdmz_inventory_view).", type: dict, required: true}
  settings: {description: "fanout_id_base, reserved_cpus, pin_cpus, af_packet_buffer_size.", type: dict, default: {}}
  extra_networks: {description: "More networks.cfg entries: [{prefix, comment}].", type: list, elements: dict, default: []}
  collaborators: {description: sdmz_collaborators (never dropped; their elephant flows are shunted)., type: list, elements: dict, default: []}
  catalogue: {description: The services catalogue (the DTN and gateway ports the policy watches)., type: dict, default: {}}
author: Science DMZ Kit
"""

RETURN = r"""
sections: {description: The node.cfg sections., returned: success, type: list}
node_cfg: {description: The node.cfg text., returned: success, type: str}
networks: {description: "networks.cfg entries: [[prefix, comment]].", returned: success, type: list}
policy: {description: "Zeek literals for the policy scripts: collaborator_nets, data_hosts, data_port_ranges.", returned: success, type: dict}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sdmz_acl import PolicyError, catalogue_rules, collaborator_sources, local_destinations
from ansible.module_utils.sdmz_zeek import ZeekError, check_node_cfg, cluster, networks, node_cfg, zeek_literal

DATA_GROUPS = ("dtn", "gateway")


def policy_inputs(hosts, site, collaborators, catalogue):
    """What the kit's Zeek policy needs, from the derivation the ACL uses: the collaborators'
    prefixes, the site's DTNs and gateways, and the ports their services use."""
    problems = []
    rules = catalogue_rules(catalogue, problems)
    sources = collaborator_sources(collaborators, problems)
    if problems:
        raise PolicyError(problems)
    data_hosts = [zeek_literal(network.network_address)
                  for group in DATA_GROUPS for _, network in local_destinations(hosts, site, group)]
    ports = set()
    for name, parsed in rules.items():
        if set(DATA_GROUPS) & set(catalogue[name].get("offered_by") or []):
            ports.update((protocol, low_high[0], low_high[1]) for _, protocol, low_high in parsed if low_high)
    ports = sorted(ports)
    return {"collaborator_nets": [zeek_literal(source[4]) for source in sources],
            "data_hosts": list(dict.fromkeys(data_hosts)),
            "data_port_ranges": [{"proto": p, "lo": lo, "hi": hi} for p, lo, hi in ports]}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            site=dict(type="str", required=True),
            sensors=dict(type="dict", required=True),
            hosts=dict(type="dict", required=True),
            settings=dict(type="dict", default={}),
            extra_networks=dict(type="list", elements="dict", default=[]),
            collaborators=dict(type="list", elements="dict", default=[]),
            catalogue=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        sections = cluster(params["sensors"], params["settings"])
        nets = networks(params["hosts"], params["site"], params["extra_networks"])
    except ZeekError as exc:
        module.fail_json(msg="the Zeek cluster has %d problem(s); no sensor was touched:\n%s"
                         % (len(exc.problems), "\n".join("  - " + p for p in exc.problems)), problems=exc.problems)
    text = node_cfg(sections)
    cpus = {s.get("mgmt_address") or h: int(s.get("cpus") or 1) for h, s in params["sensors"].items()}
    problems = check_node_cfg(text, cpus)
    if problems:
        module.fail_json(msg="the derived node.cfg breaks zeekctl's rules:\n%s" % "\n".join("  - " + p for p in problems),
                         problems=problems, node_cfg=text)
    try:
        policy = policy_inputs(params["hosts"], params["site"], params["collaborators"], params["catalogue"])
    except PolicyError as exc:
        module.fail_json(msg="the policy has problems:\n" + "\n".join("  - " + p for p in exc.problems))
    module.exit_json(changed=False, sections=sections, node_cfg=text, networks=[list(n) for n in nets], policy=policy)


if __name__ == "__main__":
    main()
