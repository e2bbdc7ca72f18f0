#!/usr/bin/python
# -*- coding: utf-8 -*-
# Science DMZ Kit: the local lab's wiring (network namespaces, bridges, veths).
from __future__ import annotations

DOCUMENTATION = r"""
module: sdmz_lab_net
short_description: Wire the local Science DMZ lab from network namespaces, bridges and veth pairs
description:
  - Declares the lab's layer-2/3 wiring on the control node. Each lab host gets a named
    network namespace C(PREFIX-HOST) that its container joins; each lab segment is a Linux
    bridge C(PREFIX-SEGMENT) in the initial namespace; each host interface is one end of a
    veth pair whose other end is a port of the segment's bridge.
  - Addresses, routes and IP forwarding inside each namespace are set as declared.
  - Reads the current state with C(ip -json) and changes only what differs; supports check
    mode and diff. With I(state=absent) it removes every namespace, bridge and veth whose name
    or alias carries the prefix, whatever the inventory says now, so nothing is left behind.
  - Must run as root on the control node.
version_added: "0.1.0"
author: Science DMZ Kit
options:
  state:
    description: C(present) to build or converge the wiring, C(absent) to remove all of it.
    type: str
    choices: [present, absent]
    default: present
  prefix:
    description: Prefix of every namespace, bridge and veth alias the lab owns.
    type: str
    default: sdmz
  segments:
    description: Lab segments (one bridge each).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Segment name; the bridge is C(PREFIX-NAME), at most 15 characters.
        type: str
        required: true
      mtu:
        description: MTU of the bridge and of every port on it.
        type: int
        required: true
      host_address:
        description: Optional interface address (CIDR) of the control node on this segment.
        type: str
      mirror_of:
        description:
          - Make this a SPAN segment. Its members are not bridged; every frame entering any port of
            the named segment's bridge (both directions of that link) is copied to them with
            C(tc ... action mirred), as a switch's SPAN port does.
        type: str
  nodes:
    description: Lab hosts and their interfaces.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Host name; its namespace is C(PREFIX-NAME).
        type: str
        required: true
      forwarding:
        description: Enable IPv4 and IPv6 forwarding in the namespace (routers).
        type: bool
        default: false
      interfaces:
        description: Interfaces, each a veth end plugged into a segment.
        type: list
        elements: dict
        default: []
      routes:
        description: Routes, each C({to, via}); C(to) is a CIDR or C(default) / C(default6).
        type: list
        elements: dict
        default: []
"""

EXAMPLES = r"""
- name: Wire the lab
  sdmz_lab_net:
    segments:
      - {name: dmz_a, mtu: 9000}
    nodes:
      - name: dtn1
        interfaces:
          - {name: dmz0, segment: dmz_a, mtu: 9000, ipv4: 198.18.1.11/24}
        routes:
          - {to: default, via: 198.18.1.1}
"""

RETURN = r"""
actions:
  description: The commands run (or, in check mode, that would run), in order.
  returned: always
  type: list
  elements: str
"""

import ipaddress
import json

from ansible.module_utils.basic import AnsibleModule

IFNAMSIZ = 15


class LabNet:
    """Compares declared wiring with `ip -json` output and plans the commands."""

    def __init__(self, module: AnsibleModule, prefix: str):
        self.module = module
        self.prefix = prefix
        self.actions: list[list[str]] = []
        self.applied = 0

    # -- reading ---------------------------------------------------------
    def ip_json(self, args: list[str], netns: str | None = None):
        cmd = ["ip"] + (["-n", netns] if netns else []) + ["-json"] + args
        rc, out, err = self.module.run_command(cmd)
        if rc != 0:
            return None
        return json.loads(out or "[]")

    def netns_names(self) -> set[str]:
        return {n["name"] for n in (self.ip_json(["netns", "list"]) or [])}

    def link(self, name: str, netns: str | None = None, details: bool = False):
        args = (["-details"] if details else []) + ["link", "show", "dev", name]
        found = self.ip_json(args, netns)
        return found[0] if found else None

    def addresses(self, ifname: str, netns: str) -> set[str]:
        found = self.ip_json(["addr", "show", "dev", ifname], netns) or []
        result = set()
        for entry in found:
            for info in entry.get("addr_info", []):
                if info.get("scope") == "link":
                    continue
                result.add("%s/%s" % (info["local"], info["prefixlen"]))
        return result

    def sysctl(self, netns: str, key: str) -> str:
        rc, out, _ = self.module.run_command(["ip", "netns", "exec", netns, "sysctl", "-n", key])
        return out.strip() if rc == 0 else ""

    # -- planning --------------------------------------------------------
    def plan(self, *cmd: str) -> None:
        self.actions.append(list(cmd))

    def ns(self, node: str) -> str:
        return "%s-%s" % (self.prefix, node)

    def bridge(self, segment: str) -> str:
        return "%s-%s" % (self.prefix, segment)

    def peer_name(self, node: str, ifname: str) -> str:
        return "%s.%s" % (node[:7], ifname[:7])

    def alias(self, node: str, ifname: str) -> str:
        return "%s:%s:%s" % (self.prefix, node, ifname)

    def converge_bridge(self, seg: dict) -> None:
        name = self.bridge(seg["name"])
        current = self.link(name, details=True)
        if current is None:
            self.plan("ip", "link", "add", "name", name, "mtu", str(seg["mtu"]), "type", "bridge")
            self.plan("ip", "link", "set", "dev", name, "alias", "%s:segment:%s" % (self.prefix, seg["name"]))
            current = {"mtu": seg["mtu"], "operstate": "DOWN", "linkinfo": {"info_data": {}}}
        if current.get("mtu") != seg["mtu"]:
            self.plan("ip", "link", "set", "dev", name, "mtu", str(seg["mtu"]))
        if "UP" not in current.get("flags", []):
            self.plan("ip", "link", "set", "dev", name, "up")
        if seg.get("host_address"):
            have = set()
            for entry in self.ip_json(["addr", "show", "dev", name]) or []:
                for info in entry.get("addr_info", []):
                    have.add("%s/%s" % (info["local"], info["prefixlen"]))
            if seg["host_address"] not in have:
                self.plan("ip", "addr", "add", seg["host_address"], "dev", name)

    def converge_interface(self, node: str, iface: dict, segments: dict) -> None:
        netns = self.ns(node)
        seg = segments[iface["segment"]]
        mtu = str(iface.get("mtu") or seg["mtu"])
        peer = self.peer_name(node, iface["name"])
        inside = self.link(iface["name"], netns)
        outside = self.link(peer)
        existed = inside is not None and outside is not None
        if not existed:
            if outside is not None:
                self.plan("ip", "link", "del", "dev", peer)
            self.plan("ip", "link", "add", "name", peer, "mtu", mtu, "type", "veth",
                      "peer", "name", iface["name"], "netns", netns, "mtu", mtu)
            self.plan("ip", "link", "set", "dev", peer, "alias", self.alias(node, iface["name"]))
            inside = {"mtu": int(mtu), "flags": []}
            outside = {"mtu": int(mtu), "flags": []}
        if not seg.get("mirror_of") and outside.get("master") != self.bridge(seg["name"]):
            self.plan("ip", "link", "set", "dev", peer, "master", self.bridge(seg["name"]))
        if outside.get("mtu") != int(mtu):
            self.plan("ip", "link", "set", "dev", peer, "mtu", mtu)
        if "UP" not in outside.get("flags", []):
            self.plan("ip", "link", "set", "dev", peer, "up")
        if inside.get("mtu") != int(mtu):
            self.plan("ip", "-n", netns, "link", "set", "dev", iface["name"], "mtu", mtu)
        if "UP" not in inside.get("flags", []):
            self.plan("ip", "-n", netns, "link", "set", "dev", iface["name"], "up")
        have = self.addresses(iface["name"], netns) if existed else set()
        for key in ("ipv4", "ipv6"):
            want = iface.get(key)
            if want and str(ipaddress.ip_interface(want)) not in have:
                extra = ["nodad"] if key == "ipv6" else []
                self.plan("ip", "-n", netns, "addr", "add", want, "dev", iface["name"], *extra)

    def converge_mirror(self, seg: dict, nodes: list) -> None:
        """Copy every frame entering a port of the mirrored segment to the SPAN members.

        The ports come from the declared topology, not from the bridge, so check mode
        lists these commands even before the bridge exists."""
        targets = [self.peer_name(n["name"], i["name"]) for n in nodes
                   for i in n.get("interfaces", []) if i.get("segment") == seg["name"]]
        ports = [self.peer_name(n["name"], i["name"]) for n in nodes
                 for i in n.get("interfaces", []) if i.get("segment") == seg["mirror_of"]]
        for port in ports:
            rc, out, _ = self.module.run_command(["tc", "-json", "qdisc", "show", "dev", port])
            qdiscs = json.loads(out or "[]") if rc == 0 else []
            if not any(q.get("kind") == "ingress" for q in qdiscs):
                self.plan("tc", "qdisc", "add", "dev", port, "handle", "ffff:", "ingress")
            rc, out, _ = self.module.run_command(["tc", "filter", "show", "dev", port, "parent", "ffff:"])
            for target in targets:
                if "to device %s)" % target not in out:
                    self.plan("tc", "filter", "add", "dev", port, "parent", "ffff:", "protocol", "all",
                              "u32", "match", "u32", "0", "0",
                              "action", "mirred", "egress", "mirror", "dev", target)

    def converge_routes(self, node: str, routes: list) -> None:
        netns = self.ns(node)
        for route in routes:
            to = route["to"]
            family = 6 if (to == "default6" or ":" in to or ":" in route["via"]) else 4
            dest = "default" if to in ("default", "default6") else str(ipaddress.ip_network(to))
            table = self.ip_json(["-%d" % family, "route", "show", dest], netns) or []
            if not any(r.get("gateway") == route["via"] for r in table):
                self.plan("ip", "-n", netns, "-%d" % family, "route", "replace", dest, "via", route["via"])

    def converge_forwarding(self, node: str, enabled: bool) -> None:
        netns = self.ns(node)
        want = "1" if enabled else "0"
        for key in ("net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"):
            if self.sysctl(netns, key) != want:
                self.plan("ip", "netns", "exec", netns, "sysctl", "-q", "-w", "%s=%s" % (key, want))

    def present(self, segments: list, nodes: list) -> None:
        by_name = {s["name"]: s for s in segments}
        for seg in segments:
            if not seg.get("mirror_of"):
                self.converge_bridge(seg)
        existing = self.netns_names()
        for node in nodes:
            netns = self.ns(node["name"])
            if netns not in existing:
                self.plan("ip", "netns", "add", netns)
                self.plan("ip", "-n", netns, "link", "set", "dev", "lo", "up")
        # Interfaces need the namespaces and bridges; apply what is planned so far first.
        self.apply_pending()
        for node in nodes:
            for iface in node.get("interfaces", []):
                self.converge_interface(node["name"], iface, by_name)
            self.converge_forwarding(node["name"], node.get("forwarding", False))
        self.apply_pending()
        for node in nodes:
            self.converge_routes(node["name"], node.get("routes", []))
        for seg in segments:
            if seg.get("mirror_of"):
                self.converge_mirror(seg, nodes)
        self.apply_pending()

    def absent(self) -> None:
        for netns in sorted(self.netns_names()):
            if netns.startswith(self.prefix + "-"):
                self.plan("ip", "netns", "del", netns)
        for link in self.ip_json(["link", "show"]) or []:
            alias = link.get("ifalias", "")
            if alias.startswith(self.prefix + ":") or link["ifname"].startswith(self.prefix + "-"):
                self.plan("ip", "link", "del", "dev", link["ifname"])
        self.apply_pending()

    # -- applying --------------------------------------------------------
    def apply_pending(self) -> None:
        """Run the commands planned since the last call (none in check mode)."""
        for cmd in self.actions[self.applied:]:
            if not self.module.check_mode:
                rc, out, err = self.module.run_command(cmd)
                # A veth peer disappears with its namespace; deleting it again is not an error.
                if rc != 0 and not (cmd[:3] == ["ip", "link", "del"] and "Cannot find device" in err):
                    self.module.fail_json(msg="lab wiring: '%s' failed: %s" % (" ".join(cmd), err.strip()),
                                          actions=[" ".join(c) for c in self.actions])
        self.applied = len(self.actions)


def check_names(module: AnsibleModule, prefix: str, segments: list, nodes: list) -> None:
    """Kernel names are limited to 15 characters and must be unique: say which one is wrong."""
    seen: dict[str, str] = {}
    seg_names = {s["name"] for s in segments}
    for seg in segments:
        if seg.get("mirror_of") and seg["mirror_of"] not in seg_names - {seg["name"]}:
            module.fail_json(msg="lab segment '%s': mirror_of names '%s', which is not another declared segment"
                             % (seg["name"], seg["mirror_of"]))
        name = "%s-%s" % (prefix, seg["name"])
        if len(name) > IFNAMSIZ:
            module.fail_json(msg="lab segment '%s': bridge name '%s' is longer than %d characters"
                             % (seg["name"], name, IFNAMSIZ))
    for node in nodes:
        for iface in node.get("interfaces", []):
            where = "host %s interface %s" % (node["name"], iface.get("name"))
            if iface.get("segment") not in seg_names:
                module.fail_json(msg="%s: lab segment '%s' is not declared in sdmz_lab_segments"
                                 % (where, iface.get("segment")))
            if len(iface["name"]) > IFNAMSIZ:
                module.fail_json(msg="%s: name longer than %d characters" % (where, IFNAMSIZ))
            peer = "%s.%s" % (node["name"][:7], iface["name"][:7])
            if peer in seen:
                module.fail_json(msg="%s: its bridge port name '%s' collides with %s" % (where, peer, seen[peer]))
            seen[peer] = where


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["present", "absent"], default="present"),
            prefix=dict(type="str", default="sdmz"),
            segments=dict(type="list", elements="dict", default=[]),
            nodes=dict(type="list", elements="dict", default=[]),
        ),
        supports_check_mode=True,
    )
    prefix = module.params["prefix"]
    lab = LabNet(module, prefix)
    if module.params["state"] == "present":
        check_names(module, prefix, module.params["segments"], module.params["nodes"])
        lab.present(module.params["segments"], module.params["nodes"])
    else:
        lab.absent()
    lines = [" ".join(c) for c in lab.actions]
    module.exit_json(
        changed=bool(lines),
        actions=lines,
        diff={"before": "", "after": "".join(line + "\n" for line in lines)},
    )


if __name__ == "__main__":
    main()
