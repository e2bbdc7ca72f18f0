#!/usr/bin/python
# -*- coding: utf-8 -*-
# Science DMZ Kit: derive the site's pSConfig template from the inventory.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: perfsonar_psconfig
short_description: Derive a pSConfig template (mesh and collaborator tests) from the inventory
description:
  - Builds a perfSONAR 5 pSConfig JSON template with every local measurement point as a
    mesh, and a disjoint group local points <-> the collaborators' perfSONAR addresses
    (sdmz_collaborators[].perfsonar), with the tests and schedules of perfsonar_tests.
  - Fails, changing nothing, with one line per problem naming the key (unknown test types,
    durations that are not ISO 8601, unknown spec settings, bad addresses).
  - Runs on the control node and contacts no host.
options:
  site: {description: The local site's name (sdmz_local_site)., type: str, required: true}
  hosts: {description: "Every host: groups and sdmz_* variables (filter sdmz_inventory_view); the site's hosts in the perfsonar group are its points.", type: dict, required: true}
  collaborators: {description: sdmz_collaborators., type: list, elements: dict, default: []}
  tests: {description: "Test name -> {type, interval, slip, spec}.", type: dict, required: true}
  archives: {description: "Archive name -> {archiver, data, ttl}.", type: dict, default: {}}
author: Science DMZ Kit
"""

RETURN = r"""
template: {description: The pSConfig template., returned: success, type: dict}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sdmz_acl import local_destinations
from ansible.module_utils.sdmz_psconfig import PsconfigError, template


def points_from_inventory(hosts, site):
    """One point per DMZ address of the site's perfsonar hosts (IPv6 ones named <host>-v6)."""
    return [{"name": host + ("-v6" if network.version == 6 else ""), "address": str(network.network_address)}
            for host, network in local_destinations(hosts, site, "perfsonar")]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            site=dict(type="str", required=True),
            hosts=dict(type="dict", required=True),
            collaborators=dict(type="list", elements="dict", default=[]),
            tests=dict(type="dict", required=True),
            archives=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        points = points_from_inventory(params["hosts"], params["site"])
        result = template(params["site"], points, params["collaborators"], params["tests"],
                          params["archives"])
    except PsconfigError as exc:
        module.fail_json(msg="the pSConfig template has %d problem(s); nothing was changed:\n%s"
                         % (len(exc.problems), "\n".join("  - " + p for p in exc.problems)), problems=exc.problems)
    module.exit_json(changed=False, template=result)


if __name__ == "__main__":
    main()
