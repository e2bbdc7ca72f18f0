# -*- coding: utf-8 -*-
# Science DMZ Kit: a Zeek cluster's layout, derived from the inventory, and
# zeekctl's own node.cfg rules, checked before any sensor is touched.
#
# Pure functions, shared by the zeek_cluster_plan module and the unit tests.
from __future__ import annotations

import configparser
import ipaddress

NODE_TYPES = ("manager", "logger", "proxy", "worker", "standalone")
# zeekctl's load-balancing methods (ZeekControl/config.py and its lb_* plugins).
LB_METHODS = ("af_packet", "custom", "interfaces", "myricom", "pf_ring")


class ZeekError(Exception):
    """Problems in the inventory or the role's variables; one line each."""

    def __init__(self, problems):
        super().__init__("\n".join(problems))
        self.problems = problems


def _capture_interfaces(host, sensor, problems):
    """The sensor's capture interfaces: the ones named in zeek_capture_interfaces
    (each must exist and not be the management interface), else role=capture."""
    interfaces = {i.get("name"): i for i in sensor.get("interfaces") or []}
    wanted = sensor.get("capture_interfaces")
    if not wanted:
        return [name for name, iface in interfaces.items() if iface.get("role") == "capture"]
    usable = []
    for name in wanted:
        if name not in interfaces:
            problems.append("%s: zeek_capture_interfaces: '%s' is not one of the host's sdmz_interfaces" % (host, name))
        elif interfaces[name].get("role") == "mgmt" or \
                (sensor.get("mgmt_address") and _has_address(interfaces[name], sensor["mgmt_address"])):
            problems.append("%s: zeek_capture_interfaces: '%s' is the management interface; capturing there "
                            "would put the sensor's own control traffic in the analysis and promiscuous mode on "
                            "its only way in" % (host, name))
        else:
            usable.append(name)
    return usable


def _has_address(iface, address):
    for key in ("ipv4", "ipv6"):
        if iface.get(key) and str(ipaddress.ip_interface(iface[key]).ip) == str(address):
            return True
    return False


def cluster(sensors, settings):
    """node.cfg sections from the sensors ({host: {roles, interfaces, capture_interfaces,
    cpus, mgmt_address, lb_procs}}). Raises ZeekError with every problem found."""
    problems = []
    sections = []
    fanout_id = int(settings.get("fanout_id_base", 21))
    reserve = int(settings.get("reserved_cpus", 1))
    roles_by_host = {h: s.get("roles") or [] for h, s in sensors.items()}
    managers = [h for h, roles in roles_by_host.items() if "manager" in roles]
    if len(managers) != 1:
        problems.append("sdmz_zeek_node_roles: exactly one host must be the manager (found %s)"
                        % (", ".join(managers) or "none"))
    if not any("proxy" in roles for roles in roles_by_host.values()):
        problems.append("sdmz_zeek_node_roles: a cluster needs at least one proxy")
    if not any("worker" in roles for roles in roles_by_host.values()):
        problems.append("sdmz_zeek_node_roles: no host is a worker, so nothing captures traffic")
    for host in sorted(sensors):
        sensor = sensors[host]
        address = sensor.get("mgmt_address") or host
        for role in ("manager", "logger", "proxy"):
            if role in roles_by_host[host]:
                sections.append({"name": "%s-%s" % (role, host), "type": role, "host": address})
        if "worker" not in roles_by_host[host]:
            continue
        capture = _capture_interfaces(host, sensor, problems)
        if not capture:
            problems.append("%s: a worker needs a capture interface (an sdmz_interfaces entry with role: capture, "
                            "or zeek_capture_interfaces)" % host)
            continue
        cpus = int(sensor.get("cpus") or 1)
        lb_procs = sensor.get("lb_procs", "auto")
        if lb_procs in (None, "auto"):
            lb_procs = max(1, (cpus - reserve) // len(capture))
        try:
            lb_procs = int(lb_procs)
        except (TypeError, ValueError):
            problems.append("%s: zeek_lb_procs: '%s' is not a number or 'auto'" % (host, lb_procs))
            continue
        if lb_procs < 1:
            problems.append("%s: zeek_lb_procs: must be at least 1" % host)
            continue
        if lb_procs * len(capture) > cpus:
            problems.append("%s: zeek_lb_procs: %d workers on each of %d capture interface(s) need %d CPUs; the "
                            "host has %d" % (host, lb_procs, len(capture), lb_procs * len(capture), cpus))
            continue
        next_cpu = cpus - 1
        for iface in capture:
            section = {"name": "worker-%s-%s" % (host, iface), "type": "worker", "host": address,
                       "interface": iface, "lb_method": "af_packet", "lb_procs": lb_procs,
                       "af_packet_fanout_id": fanout_id,
                       "af_packet_buffer_size": int(settings.get("af_packet_buffer_size", 128 * 1024 * 1024))}
            fanout_id += 1
            if settings.get("pin_cpus", True):
                # Workers take the highest CPUs; the lowest stay for the manager, logger,
                # proxy and the NIC's interrupts.
                section["pin_cpus"] = list(range(next_cpu - lb_procs + 1, next_cpu + 1))
                next_cpu -= lb_procs
            sections.append(section)
    if problems:
        raise ZeekError(problems)
    return sections


def node_cfg(sections):
    """node.cfg text from the sections."""
    lines = ["# Written by the Science DMZ Kit's zeek role from the inventory; changes here are overwritten.", ""]
    for section in sections:
        lines.append("[%s]" % section["name"])
        for key in ("type", "host", "interface", "lb_method", "lb_procs", "pin_cpus",
                    "af_packet_fanout_id", "af_packet_buffer_size"):
            if key in section:
                value = section[key]
                if isinstance(value, list):
                    value = ",".join(str(v) for v in value)
                lines.append("%s=%s" % (key, value))
        lines.append("")
    return "\n".join(lines)


def check_node_cfg(text, cpus_by_host=None):
    """zeekctl's node.cfg rules (ZeekControl/config.py), applied to the text a role
    rendered: problems as lines; an empty list means zeekctl would accept it."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        return ["node.cfg: %s" % exc]
    problems = []
    types = {}
    fanouts = {}
    for name in parser.sections():
        node = parser[name]
        kind = node.get("type")
        if kind not in NODE_TYPES:
            problems.append("node.cfg [%s]: type '%s' is not one of %s" % (name, kind, ", ".join(NODE_TYPES)))
            continue
        types.setdefault(kind, []).append(name)
        if not node.get("host"):
            problems.append("node.cfg [%s]: no host" % name)
        lb_method, lb_procs = node.get("lb_method"), node.get("lb_procs")
        procs = 0
        if lb_procs:
            try:
                procs = int(lb_procs)
            except ValueError:
                problems.append("node.cfg [%s]: lb_procs must be an integer" % name)
            else:
                if procs < 1:
                    problems.append("node.cfg [%s]: lb_procs must be at least 1" % name)
            if not lb_method:
                problems.append("node.cfg [%s]: lb_procs needs an lb_method" % name)
            elif lb_method not in LB_METHODS:
                problems.append("node.cfg [%s]: unknown lb_method '%s'" % (name, lb_method))
        elif lb_method:
            problems.append("node.cfg [%s]: lb_method needs lb_procs" % name)
        if node.get("pin_cpus"):
            try:
                pins = [int(c) for c in node["pin_cpus"].split(",")]
            except ValueError:
                pins = [-1]
            if any(c < 0 for c in pins):
                problems.append("node.cfg [%s]: pin_cpus must be a list of non-negative integers" % name)
            elif procs and len(pins) < procs:
                problems.append("node.cfg [%s]: pin_cpus names %d CPUs for %d processes" % (name, len(pins), procs))
            elif cpus_by_host and node.get("host") in cpus_by_host and max(pins) >= cpus_by_host[node["host"]]:
                problems.append("node.cfg [%s]: pin_cpus names CPU %d; the host has %d"
                                % (name, max(pins), cpus_by_host[node["host"]]))
        if kind == "worker":
            if not node.get("interface"):
                problems.append("node.cfg [%s]: a worker needs an interface" % name)
            if lb_method == "af_packet":
                fanout = node.get("af_packet_fanout_id", "")
                key = (node.get("host"), fanout)
                if not fanout:
                    problems.append("node.cfg [%s]: af_packet workers need af_packet_fanout_id" % name)
                elif key in fanouts:
                    problems.append("node.cfg [%s]: af_packet_fanout_id %s is already used by [%s] on the same host"
                                    % (name, fanout, fanouts[key]))
                else:
                    fanouts[key] = name
    if "standalone" in types:
        if len(parser.sections()) > 1:
            problems.append("node.cfg: a standalone node must be the only node")
    else:
        if len(types.get("manager", [])) != 1:
            problems.append("node.cfg: a cluster needs exactly one manager")
        if not types.get("proxy"):
            problems.append("node.cfg: a cluster needs a proxy")
    return problems


def networks(hosts, site, extra=None):
    """networks.cfg lines: (prefix, comment) for every DMZ prefix of the site."""
    found = {}
    for host in sorted(hosts):
        entry = hosts[host].get("vars", {})
        if entry.get("sdmz_site") != site:
            continue
        for iface in entry.get("sdmz_interfaces") or []:
            if iface.get("role") != "dmz":
                continue
            for key in ("ipv4", "ipv6"):
                if iface.get(key):
                    network = ipaddress.ip_interface(iface[key]).network
                    found.setdefault(str(network), "Science DMZ %s (%s)" % (site, iface.get("lab_segment") or host))
    for index, item in enumerate(extra or []):
        try:
            network = ipaddress.ip_network(item["prefix"], strict=True)
        except (KeyError, ValueError) as exc:
            raise ZeekError(["zeek_extra_networks[%d].prefix: %s" % (index, exc)]) from exc
        found[str(network)] = item.get("comment", "site network")
    return sorted(found.items(), key=lambda kv: (ipaddress.ip_network(kv[0]).version, ipaddress.ip_network(kv[0])))


def zeek_literal(value):
    """An address or subnet as a Zeek literal (IPv6 in brackets)."""
    text = str(value)
    if ":" not in text:
        return text
    if "/" in text:
        address, length = text.split("/")
        return "[%s]/%s" % (address, length)
    return "[%s]" % text
