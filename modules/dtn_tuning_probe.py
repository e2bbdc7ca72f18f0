#!/usr/bin/python
# -*- coding: utf-8 -*-
# Science DMZ Kit: what a host has now, and what it can take, for DTN tuning.
from __future__ import annotations

DOCUMENTATION = r"""
module: dtn_tuning_probe
short_description: Read a host's current tuning and find out which settings it can take
description:
  - Reads each sysctl's current value and whether this host may write it (by writing the value it
    already has back, which changes nothing), each interface's MTU, txqueuelen, root qdisc, NIC
    rings and offloads, the CPU frequency governors, tuned and irqbalance, and whether the host is
    a container.
  - Finds out whether the kernel has the C(fq) qdisc by attaching it to a throwaway veth pair that
    is removed at once (no other interface is touched).
  - The dtn_tuning role decides from this, per setting, ok / drift / unsupported, so nothing is
    ever reported as applied that the kernel did not take.
version_added: "0.1.0"
author: Science DMZ Kit
options:
  sysctl_keys:
    description: sysctl names to read.
    type: list
    elements: str
    default: []
  interfaces:
    description: Interfaces to read.
    type: list
    elements: str
    default: []
  probe_fq:
    description: Whether to find out if the kernel has the fq qdisc.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Probe
  dtn_tuning_probe:
    sysctl_keys: [net.ipv4.tcp_rmem, net.core.rmem_max]
    interfaces: [eth0]
  register: probe
"""

RETURN = r"""
container:
  description: The container technology the host runs in, or an empty string.
  returned: always
  type: str
sysctl:
  description: Per key, C({present, value, writable, reason}).
  returned: always
  type: dict
fq:
  description: C({supported, reason}).
  returned: always
  type: dict
interfaces:
  description: Per interface, C({exists, mtu, max_mtu, txqueuelen, qdisc, maxrate, rings, offloads, irqs, numa_cpus}).
  returned: always
  type: dict
cpufreq:
  description: C({supported, governors, available, reason}).
  returned: always
  type: dict
tuned:
  description: C({installed, profile}).
  returned: always
  type: dict
irqbalance:
  description: C({installed, active}).
  returned: always
  type: dict
"""

import errno
import glob
import json
import os
import re

from ansible.module_utils.basic import AnsibleModule

ETHTOOL_FEATURES = {
    "gro": "generic-receive-offload",
    "tso": "tcp-segmentation-offload",
    "lro": "large-receive-offload",
}


def detect_container(module):
    rc, out, _ = module.run_command(["systemd-detect-virt", "--container"])
    if rc == 0 and out.strip() and out.strip() != "none":
        return out.strip()
    if os.path.exists("/run/.containerenv"):
        return "podman"
    if os.path.exists("/.dockerenv"):
        return "docker"
    return ""


def probe_sysctl(key, container):
    path = "/proc/sys/" + key.replace(".", "/")
    if not os.path.exists(path):
        where = ("this container's network namespace (a global setting: tune it on the host that runs the "
                 "container)" if container else "this kernel")
        return {"present": False, "value": None, "writable": False, "reason": "%s is not present in %s" % (key, where)}
    try:
        with open(path, encoding="ascii") as handle:
            value = handle.read()
    except OSError as exc:
        return {"present": True, "value": None, "writable": False, "reason": "cannot read %s: %s" % (key, exc.strerror)}
    normal = " ".join(value.split())
    try:
        # Writing back the value it already has changes nothing, and tells whether a write is allowed.
        with open(path, "w", encoding="ascii") as handle:
            handle.write(value)
    except OSError as exc:
        why = exc.strerror
        if container and exc.errno in (errno.EACCES, errno.EPERM, errno.EINVAL):
            why += (": %s is global, and this host is a container in its own network namespace; "
                    "tune it on the host that runs the container" % key)
        return {"present": True, "value": normal, "writable": False, "reason": "the kernel refused the write (%s)" % why}
    return {"present": True, "value": normal, "writable": True, "reason": ""}


def probe_fq(module):
    """Attach fq to a throwaway veth pair; the pair is removed whatever happens."""
    name = "sdmzfq%d" % (os.getpid() % 100000)
    rc, _, err = module.run_command(["ip", "link", "add", name, "type", "veth", "peer", "name", name + "p"])
    if rc != 0:
        return {"supported": None, "reason": "cannot create a probe interface: %s" % err.strip()}
    try:
        rc, _, err = module.run_command(["tc", "qdisc", "add", "dev", name, "root", "fq"])
    finally:
        module.run_command(["ip", "link", "del", name])
    if rc == 0:
        return {"supported": True, "reason": ""}
    return {"supported": False, "reason": "the kernel has no fq qdisc (tc: %s)" % err.strip()}


def read_text(path):
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return None


def probe_rings(module, name):
    rc, out, err = module.run_command(["ethtool", "-g", name])
    if rc != 0:
        return {"supported": False, "reason": "the driver has no ring parameters (ethtool -g: %s)"
                % ((err or out).strip().splitlines() or ["unsupported"])[-1]}
    values, section = {}, None
    for line in out.splitlines():
        if line.startswith("Pre-set maximums"):
            section = "max"
        elif line.startswith("Current hardware settings"):
            section = "cur"
        match = re.match(r"^(RX|TX):\s+(\d+)", line)
        if match and section:
            values["%s_%s" % (match.group(1).lower(), section)] = int(match.group(2))
    if not {"rx_max", "rx_cur", "tx_max", "tx_cur"} <= set(values):
        return {"supported": False, "reason": "ethtool -g reported no RX/TX ring sizes"}
    return {"supported": True, "reason": "", "rx": values["rx_cur"], "rx_max": values["rx_max"],
            "tx": values["tx_cur"], "tx_max": values["tx_max"]}


def probe_offloads(module, name):
    rc, out, err = module.run_command(["ethtool", "-k", name])
    result = {}
    for short, long_name in ETHTOOL_FEATURES.items():
        match = re.search(r"^%s:\s+(on|off)(\s+\[fixed\])?" % re.escape(long_name), out, re.M) if rc == 0 else None
        if match:
            result[short] = {"on": match.group(1) == "on", "fixed": bool(match.group(2))}
        else:
            result[short] = {"on": None, "fixed": True, "reason": "ethtool -k does not report %s" % long_name}
    return result


def probe_interface(module, name):
    rc, out, _ = module.run_command(["ip", "-d", "-j", "link", "show", "dev", name])
    if rc != 0:
        return {"exists": False}
    link = json.loads(out)[0]
    rc, out, _ = module.run_command(["tc", "-j", "qdisc", "show", "dev", name, "root"])
    qdiscs = json.loads(out or "[]") if rc == 0 else []
    root = next((q for q in qdiscs if q.get("root")), qdiscs[0] if qdiscs else {})
    maxrate = (root.get("options") or {}).get("maxrate")
    device = "/sys/class/net/%s/device" % name
    irqs = sorted(int(os.path.basename(p)) for p in glob.glob(device + "/msi_irqs/*"))
    return {
        "exists": True,
        "mtu": link.get("mtu"),
        "max_mtu": link.get("max_mtu"),
        "txqueuelen": link.get("txqlen"),
        "qdisc": root.get("kind"),
        "maxrate": maxrate,
        "rings": probe_rings(module, name),
        "offloads": probe_offloads(module, name),
        "irqs": irqs,
        "numa_cpus": read_text(device + "/local_cpulist"),
    }


def probe_cpufreq():
    paths = sorted(glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"))
    if not paths:
        return {"supported": False, "governors": {}, "available": [],
                "reason": "no CPU frequency scaling driver (a virtual machine or container)"}
    governors = {p.split("/")[5]: read_text(p) for p in paths}
    available = (read_text(paths[0].replace("scaling_governor", "scaling_available_governors")) or "").split()
    return {"supported": True, "governors": governors, "available": available, "reason": ""}


def probe_service(module, binary, unit):
    installed = module.get_bin_path(binary) is not None
    active = False
    if installed:
        rc, out, _ = module.run_command(["systemctl", "is-active", unit])
        active = out.strip() == "active"
    return installed, active


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysctl_keys=dict(type="list", elements="str", default=[]),
            interfaces=dict(type="list", elements="str", default=[]),
            probe_fq=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    container = detect_container(module)
    tuned_installed, _ = probe_service(module, "tuned-adm", "tuned")
    profile = None
    if tuned_installed:
        rc, out, _ = module.run_command(["tuned-adm", "active"])
        match = re.search(r"Current active profile:\s*(\S+)", out)
        profile = match.group(1) if match else None
    irqbalance_installed, irqbalance_active = probe_service(module, "irqbalance", "irqbalance")
    module.exit_json(
        changed=False,
        container=container,
        sysctl={key: probe_sysctl(key, container) for key in module.params["sysctl_keys"]},
        fq=probe_fq(module) if module.params["probe_fq"] else {"supported": None, "reason": "not probed"},
        interfaces={name: probe_interface(module, name) for name in module.params["interfaces"]},
        cpufreq=probe_cpufreq(),
        tuned={"installed": tuned_installed, "profile": profile},
        irqbalance={"installed": irqbalance_installed, "active": irqbalance_active},
    )


if __name__ == "__main__":
    main()
