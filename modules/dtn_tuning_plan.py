#!/usr/bin/python
# -*- coding: utf-8 -*-
# Science DMZ Kit: compute a DTN's tuning from the bandwidth-delay product.
from __future__ import annotations

DOCUMENTATION = r"""
module: dtn_tuning_plan
short_description: Compute a data transfer node's TCP, pacing and NIC tuning from the bandwidth-delay product
description:
  - Turns a NIC speed and the largest RTT the host must serve into the settings the Science DMZ
    tutorial (sections III-B, IV-B, VII-B) and ESnet fasterdata's host tuning recommend, with one
    sentence per value saying why (C(explain)).
  - Changes nothing. Reads the target kernel's offered congestion control algorithms unless
    I(available_congestion_control) is given. Runs standalone, e.g.
    C(ansible localhost -m dtn_tuning_plan -a 'nic_speed_gbps=10 max_rtt_ms=70 streams=1 mtu=9000 host_role=dtn').
version_added: "0.1.0"
author: Science DMZ Kit
options:
  nic_speed_gbps:
    description: Speed of the data NIC in Gbit/s; > 0.
    type: float
    required: true
  max_rtt_ms:
    description: The largest round-trip time the host must serve, in ms; > 0. Give this or I(collaborators).
    type: float
  collaborators:
    description: Collaborators, each C({name, rtt_ms}); the largest RTT is used when I(max_rtt_ms) is not given.
    type: list
    elements: dict
  streams:
    description: Parallel TCP streams a transfer uses; the TCP maximum is shared among them.
    type: int
    default: 1
  mtu:
    description: MTU of the data interface, 1280-9216.
    type: int
    default: 9000
  host_role:
    description: C(dtn), C(measurement) (not paced) or C(gateway).
    type: str
    choices: [dtn, measurement, gateway]
    default: dtn
  congestion_control:
    description: C(auto) prefers bbr, then htcp, then cubic, among those the kernel offers.
    type: str
    choices: [auto, bbr, htcp, cubic]
    default: auto
  available_congestion_control:
    description: The algorithms the kernel offers; default read from /proc/sys/net/ipv4/tcp_available_congestion_control.
    type: list
    elements: str
  port_buffer_bytes:
    description: A switch port's buffer in bytes; when given, C(critical_rtt_ms) is computed for it.
    type: int
"""

EXAMPLES = r"""
- name: Plan a 10G DTN for a 70 ms path with 4 streams
  dtn_tuning_plan:
    nic_speed_gbps: 10
    max_rtt_ms: 70
    streams: 4
  register: plan
"""

RETURN = r"""
bdp_bytes:
  description: Bandwidth-delay product, bytes (10 Gbit/s x 70 ms = 87,500,000).
  returned: always
  type: int
tcp_max_bytes:
  description: The TCP buffer maximum (third field of tcp_rmem/tcp_wmem).
  returned: always
  type: int
sysctl:
  description: sysctl name to value string.
  returned: always
  type: dict
streams_needed:
  description: The fewest parallel streams whose largest buffers hold the BDP.
  returned: always
  type: int
pacing:
  description: fq pacing, C({enabled, per_flow_bps, total_bps, tc_maxrate, fraction}).
  returned: always
  type: dict
critical_rtt_ms:
  description: The largest RTT the given port buffer serves at line rate (null without I(port_buffer_bytes)).
  returned: always
  type: float
explain:
  description: For every value, one sentence saying why.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.dtn_tuning_math import PlanError, plan

AVAILABLE_CC = "/proc/sys/net/ipv4/tcp_available_congestion_control"


def offered_congestion_control():
    try:
        with open(AVAILABLE_CC, encoding="ascii") as handle:
            return handle.read().split()
    except OSError:
        return []


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nic_speed_gbps=dict(type="float", required=True),
            max_rtt_ms=dict(type="float"),
            collaborators=dict(type="list", elements="dict"),
            streams=dict(type="int", default=1),
            mtu=dict(type="int", default=9000),
            host_role=dict(type="str", choices=["dtn", "measurement", "gateway"], default="dtn"),
            congestion_control=dict(type="str", choices=["auto", "bbr", "htcp", "cubic"], default="auto"),
            available_congestion_control=dict(type="list", elements="str"),
            port_buffer_bytes=dict(type="int"),
        ),
        required_one_of=[["max_rtt_ms", "collaborators"]],
        supports_check_mode=True,
    )
    params = dict(module.params)
    if params["available_congestion_control"] is None:
        params["available_congestion_control"] = offered_congestion_control()
    try:
        result = plan(**params)
    except PlanError as exc:
        module.fail_json(msg="dtn_tuning_plan: %s" % exc)
    module.exit_json(changed=False, available_congestion_control=params["available_congestion_control"], **result)


if __name__ == "__main__":
    main()
