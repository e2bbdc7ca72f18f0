# -*- coding: utf-8 -*-
# Science DMZ Kit: a network device's policy, derived from the inventory.
#
# Pure functions, shared by the network_device_policy module and the unit
# tests. Input is the inventory as validate.yml sees it (hosts -> groups and
# sdmz_* variables) plus the site-wide lists; output is a platform-neutral
# model that the Jinja2 templates turn into EOS, Junos, NX-OS, IOS-XR or
# nftables, and that the auditor's table is written from. Every entry carries
# the inventory entries that produced it.
from __future__ import annotations

import datetime
import ipaddress

PLATFORMS = ("eos", "junos", "nxos_ssh", "iosxr", "sdmz_linux")

# Platforms whose ACLs keep connection state; the rest get the stateless
# "TCP established" idiom (ACK or RST set) for return traffic.
STATEFUL_PLATFORMS = ("sdmz_linux",)

FAMILY_PROTOCOLS = {"ipv4": ("tcp", "udp", "icmp"), "ipv6": ("tcp", "udp", "icmpv6")}

# ICMP that must pass from anywhere or jumbo frames and IPv6 break: path-MTU
# discovery (RFC 1191, RFC 8201) and IPv6 neighbour discovery (RFC 4861).
PMTUD = {"ipv4": {"protocol": "icmp", "icmp_type": 3, "icmp_code": 4, "remark": "path MTU discovery (fragmentation needed)"},
         "ipv6": {"protocol": "icmpv6", "icmp_type": 2, "icmp_code": None, "remark": "path MTU discovery (packet too big)"}}
NEIGHBOR_DISCOVERY = (133, 134, 135, 136)


class PolicyError(Exception):
    """Problems in the inventory; each line names the entry and key."""

    def __init__(self, problems):
        super().__init__("\n".join(problems))
        self.problems = problems


def parse_ports(text, where, problems):
    """'443' or '50000-51000' -> (low, high); a problem naming `where` otherwise."""
    low, _, high = str(text).partition("-")
    try:
        low, high = int(low), int(high or low)
    except ValueError:
        problems.append("%s: ports '%s' is not a port or a range LOW-HIGH" % (where, text))
        return None
    if not (1 <= low <= 65535 and 1 <= high <= 65535):
        problems.append("%s: ports '%s': ports are 1-65535" % (where, text))
        return None
    if low > high:
        problems.append("%s: ports '%s' is reversed (%d > %d)" % (where, text, low, high))
        return None
    return low, high


def parse_network(text, where, problems, family=None):
    try:
        network = ipaddress.ip_network(str(text), strict=True)
    except ValueError as exc:
        problems.append("%s: '%s' is not a valid network: %s" % (where, text, exc))
        return None
    if family and "ipv%d" % network.version != family:
        problems.append("%s: '%s' is not an %s network" % (where, text, family.replace("ip", "IP")))
        return None
    return network


def parse_ttl(text):
    """'90s', '30m', '1h', '2d' or seconds -> a timedelta; ValueError otherwise."""
    text = str(text).strip()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "s")
    if not number.isdigit() or int(number) <= 0:
        raise ValueError("'%s' is not a duration such as 90s, 30m, 1h or 2d" % text)
    return datetime.timedelta(seconds=int(number) * units[unit])


def parse_expiry(text):
    """An ISO 8601 date-time with a zone -> an aware datetime; ValueError otherwise."""
    value = datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError("'%s' has no time zone (write it in UTC, ending in Z)" % text)
    return value


def catalogue_rules(catalogue, problems):
    """Validate the catalogue once: service -> [(index, protocol, (low, high) or None)]."""
    rules = {}
    for name, service in sorted(catalogue.items()):
        where = "services catalogue %s" % name
        parsed = []
        for index, rule in enumerate(service.get("rules") or []):
            protocol = rule.get("protocol")
            if protocol not in ("tcp", "udp", "icmp", "icmpv6"):
                problems.append("%s.rules[%d].protocol: unknown protocol '%s'" % (where, index, protocol))
                continue
            ports = None
            if protocol in ("tcp", "udp"):
                if "ports" not in rule:
                    problems.append("%s.rules[%d]: %s needs ports" % (where, index, protocol))
                    continue
                ports = parse_ports(rule["ports"], "%s.rules[%d]" % (where, index), problems)
                if ports is None:
                    continue
            parsed.append((index, protocol, ports))
        if not service.get("offered_by"):
            problems.append("%s.offered_by: names no group of hosts" % where)
        rules[name] = parsed
    return rules


def local_destinations(hosts, site, group):
    """(host, address) of each DMZ-facing address of the site's hosts in `group`."""
    found = []
    for host in sorted(hosts):
        entry = hosts[host]
        if group not in entry.get("groups", []) or entry.get("vars", {}).get("sdmz_site") != site:
            continue
        for iface in entry["vars"].get("sdmz_interfaces") or []:
            if iface.get("role") != "dmz":
                continue
            for key in ("ipv4", "ipv6"):
                if iface.get(key):
                    address = ipaddress.ip_interface(iface[key]).ip
                    found.append((host, ipaddress.ip_network(address)))
    return found


def collaborator_sources(collaborators, problems):
    """[(collaborator index, name, key, index, network)], with overlaps reported."""
    sources = []
    for c_index, collab in enumerate(collaborators or []):
        name = collab.get("name", "#%d" % c_index)
        prefixes = 0
        for key, family in (("prefixes_v4", "ipv4"), ("prefixes_v6", "ipv6")):
            for p_index, text in enumerate(collab.get(key) or []):
                network = parse_network(text, "collaborator %s: %s[%d]" % (name, key, p_index), problems, family)
                prefixes += 1
                if network is not None:
                    sources.append((c_index, name, key, p_index, network))
        if not prefixes:
            problems.append("collaborator %s: prefixes_v4/prefixes_v6: has no prefixes; give at least one" % name)
    for i, (_, name_a, key_a, idx_a, net_a) in enumerate(sources):
        for _, name_b, key_b, idx_b, net_b in sources[i + 1:]:
            if net_a.version == net_b.version and net_a.overlaps(net_b):
                problems.append(
                    "collaborator %s: %s[%d] %s overlaps collaborator %s's %s[%d] %s: the later entries "
                    "would be shadowed by the earlier ones; list each network once"
                    % (name_b, key_b, idx_b, net_b, name_a, key_a, idx_a, net_a))
    return sources


def overlapping_sources(network, sources):
    """The collaborator prefixes (from collaborator_sources) that overlap `network`."""
    return [s for s in sources if s[4].version == network.version and s[4].overlaps(network)]


def active_blocklist(blocklist, sources, now, problems):
    """Blocklist entries not yet expired, validated; expired ones returned apart."""
    active, expired = [], []
    for index, entry in enumerate(blocklist or []):
        where = "acl_blocklist[%d]" % index
        address = entry.get("address")
        network = parse_network(address, where + ".address", problems) if address else None
        if not address:
            problems.append("%s.address: missing" % where)
        if not str(entry.get("reason") or "").strip():
            problems.append("%s.reason: missing (say why the address is blocked)" % where)
        try:
            expiry = parse_expiry(entry.get("expiry"))
        except (TypeError, ValueError) as exc:
            problems.append("%s.expiry: %s" % (where, exc if entry.get("expiry") else "missing"))
            continue
        if network is None:
            continue
        for _, name, key, p_index, prefix in overlapping_sources(network, sources):
            problems.append("%s.address: %s overlaps collaborator %s's %s[%d] %s; collaborators are "
                            "never blocked (remove the prefix from the collaborator first)"
                            % (where, network, name, key, p_index, prefix))
        record = {"index": index, "network": network, "expiry": expiry, "reason": str(entry.get("reason", ""))}
        (active if expiry > now else expired).append(record)
    return active, expired


def _covers(first, second):
    """Whether `first` matches every packet `second` matches (same family)."""
    if first["protocol"] != "any" and first["protocol"] != second["protocol"]:
        return False
    for key in ("source", "destination"):
        a, b = first[key], second[key]
        if a != "any" and (b == "any" or not ipaddress.ip_network(b).subnet_of(ipaddress.ip_network(a))):
            return False
    if first.get("port_min") is not None:
        if second.get("port_min") is None:
            return False
        if not (first["port_min"] <= second["port_min"] and second["port_max"] <= first["port_max"]):
            return False
    for key in ("icmp_type", "icmp_code"):
        if first.get(key) is not None and first.get(key) != second.get(key):
            return False
    return not first.get("tcp_established") or second.get("tcp_established")


def _merge_ports(flows):
    """Merge flows of one (source, destination, protocol) whose port ranges touch."""
    flows = sorted(flows, key=lambda f: (f["port_min"] or 0, f["port_max"] or 0))
    merged = []
    for flow in flows:
        last = merged[-1] if merged else None
        if last and flow["port_min"] is not None and flow["port_min"] <= last["port_max"] + 1:
            last["port_max"] = max(last["port_max"], flow["port_max"])
            last["reasons"] += [r for r in flow["reasons"] if r not in last["reasons"]]
        elif last and flow["port_min"] is None:
            last["reasons"] += [r for r in flow["reasons"] if r not in last["reasons"]]
        else:
            merged.append(dict(flow, reasons=list(flow["reasons"])))
    return merged


def _entry(family, action, kind, remark, source="any", destination="any", protocol="any",
           ports=None, icmp_type=None, icmp_code=None, counter=None, reasons=None, tcp_established=False):
    return {"family": family, "action": action, "kind": kind, "remark": remark,
            "source": str(source), "destination": str(destination), "protocol": protocol,
            "port_min": ports[0] if ports else None, "port_max": ports[1] if ports else None,
            "icmp_type": icmp_type, "icmp_code": icmp_code, "tcp_established": tcp_established,
            "counter": counter, "reasons": reasons or []}


def rule_flows(sources, collaborators, catalogue, rules):
    """Each (collaborator prefix, catalogue rule, destination group) the collaborator's
    services need: the one expansion that ACLs, host firewalls and (through
    policy_flows) the Terraform security groups all start from."""
    for c_index, name, key, p_index, network in sources:
        family = "ipv%d" % network.version
        for service in collaborators[c_index].get("services") or []:
            for r_index, protocol, ports in rules.get(service, []):
                if protocol not in FAMILY_PROTOCOLS[family]:
                    continue
                for group in catalogue[service].get("offered_by") or []:
                    yield {"c_index": c_index, "collaborator": name, "key": key, "p_index": p_index,
                           "network": network, "family": family, "service": service, "r_index": r_index,
                           "protocol": protocol, "ports": ports, "group": group}


def policy_flows(collaborators, catalogue):
    """Group-level flows, one per (group, family, protocol, ports, source); services sharing
    a port are one flow with every reason kept. Terraform's sdmz_policy module derives the
    same list (tests compare the two)."""
    problems = []
    rules = catalogue_rules(catalogue, problems)
    sources = collaborator_sources(collaborators, problems)
    if problems:
        raise PolicyError(problems)
    flows = {}
    for raw in rule_flows(sources, collaborators, catalogue, rules):
        low, high = raw["ports"] or (None, None)
        key = (raw["group"], raw["family"], raw["protocol"], low or 0, high or 0, str(raw["network"]))
        if key in flows:
            flows[key]["service"] = ",".join(sorted({*flows[key]["service"].split(","), raw["service"]}))
            continue
        flows[key] = {"collaborator": raw["collaborator"], "service": raw["service"], "source": str(raw["network"]),
                      "family": raw["family"], "protocol": raw["protocol"], "port_min": low, "port_max": high,
                      "destination_group": raw["group"]}
    return [flows[k] for k in sorted(flows)]


def permitted_flows(hosts, site, sources, catalogue, rules, collaborators):
    """One entry per (source, destination host, protocol, port range), merged."""
    groups = {}
    for raw in rule_flows(sources, collaborators, catalogue, rules):
        network = raw["network"]
        for host, address in local_destinations(hosts, site, raw["group"]):
            if address.version != network.version:
                continue
            reason = {"collaborator": raw["collaborator"], "service": raw["service"],
                      "inventory": "sdmz_collaborators[%d] (%s) %s[%d]" % (
                          raw["c_index"], raw["collaborator"], raw["key"], raw["p_index"]),
                      "catalogue": "%s.rules[%d]" % (raw["service"], raw["r_index"]),
                      "destination_host": host, "destination_group": raw["group"]}
            flow = _entry(raw["family"], "permit", "flow", "", network, address, raw["protocol"], raw["ports"],
                          reasons=[reason])
            flow["destination_host"] = host
            key = (raw["c_index"], raw["family"], str(network), host, str(address), raw["protocol"])
            groups.setdefault(key, []).append(flow)
    flows = []
    for key in sorted(groups):
        for flow in _merge_ports(groups[key]):
            flow["remark"] = "%s: %s" % (
                ",".join(sorted({r["collaborator"] for r in flow["reasons"]})),
                ",".join(sorted({r["service"] for r in flow["reasons"]})))
            flows.append(flow)
    return flows


def device_acl(device, hosts, collaborators, catalogue, sources, rules, blocklist, options, problems):
    """The ordered entries of the device's WAN-inbound ACL, per address family."""
    platform = device["vars"].get("sdmz_platform")
    site = device["vars"].get("sdmz_site")
    wan = [i for i in device["vars"].get("sdmz_interfaces") or [] if i.get("role") == "wan"]
    acl = {}
    flows = permitted_flows(hosts, site, sources, catalogue, rules, collaborators)
    for family in ("ipv4", "ipv6"):
        entries = []
        for block in blocklist:
            if "ipv%d" % block["network"].version == family:
                entries.append(_entry(family, "deny", "block", "blocked until %s: %s" % (
                    block["expiry"].strftime("%Y-%m-%dT%H:%M:%SZ"), block["reason"]),
                    source=block["network"], counter="block",
                    reasons=[{"inventory": "acl_blocklist[%d]" % block["index"]}]))
        if options.get("permit_return_traffic", True):
            if platform in STATEFUL_PLATFORMS:
                entries.append(_entry(family, "permit", "return", "return traffic of connections opened from inside",
                                      reasons=[{"inventory": "network_device_acl_permit_return_traffic"}]))
            else:
                entries.append(_entry(family, "permit", "return", "return traffic (TCP established)",
                                      protocol="tcp", tcp_established=True,
                                      reasons=[{"inventory": "network_device_acl_permit_return_traffic"}]))
        pmtud = PMTUD[family]
        entries.append(_entry(family, "permit", "pmtud", pmtud["remark"], protocol=pmtud["protocol"],
                              icmp_type=pmtud["icmp_type"], icmp_code=pmtud["icmp_code"],
                              reasons=[{"inventory": "always (RFC 1191/8201)"}]))
        if family == "ipv6":
            for icmp_type in NEIGHBOR_DISCOVERY:
                entries.append(_entry(family, "permit", "neighbor", "IPv6 neighbour discovery", protocol="icmpv6",
                                      icmp_type=icmp_type, reasons=[{"inventory": "always (RFC 4861)"}]))
        for iface in wan:
            address = iface.get(family)
            if not address:
                continue
            link = ipaddress.ip_interface(address)
            for l_index, rule in enumerate(options.get("link_rules") or []):
                protocol = rule["protocol"]
                if protocol not in FAMILY_PROTOCOLS[family]:
                    continue
                ports = parse_ports(rule["ports"], "network_device_acl_link_rules[%d]" % l_index, problems) \
                    if rule.get("ports") else None
                if rule.get("ports") and ports is None:
                    continue
                entries.append(_entry(family, "permit", "link", "link peer on %s" % iface["name"],
                                      source=link.network, destination=ipaddress.ip_network(link.ip),
                                      protocol=protocol, ports=ports,
                                      reasons=[{"inventory": "network_device_acl_link_rules[%d]" % l_index}]))
        entries += [f for f in flows if f["family"] == family]
        entries.append(_entry(family, "deny", "default", "everything else: denied and counted", counter="deny",
                              reasons=[{"inventory": "default deny (tutorial Fig. 26)"}]))
        for seq, entry in enumerate(entries, start=1):
            entry["seq"] = seq * 10
        acl[family] = entries
    return acl, bool(wan)


def shadow_problems(device_name, acl):
    problems = []
    for family, entries in acl.items():
        for j, later in enumerate(entries):
            if later["kind"] in ("default",):
                continue
            for earlier in entries[:j]:
                if earlier["kind"] in ("return",) or not _covers(earlier, later):
                    continue
                problems.append("device %s: %s ACL entry %d (%s, from %s) is shadowed by entry %d (%s, from %s): "
                                "it would never match" % (
                                    device_name, family, later["seq"], later["remark"],
                                    "; ".join(r["inventory"] for r in later["reasons"]),
                                    earlier["seq"], earlier["remark"],
                                    "; ".join(r["inventory"] for r in earlier["reasons"])))
                break
    return problems


def port_plan(device, max_rtt_ms, default_mtu, platform_max_buffer, max_mtu=None):
    """Per data port: MTU and the buffer the tutorial asks for (speed x largest RTT)."""
    ports, warnings = [], []
    limit = device["vars"].get("sdmz_port_buffer_max_bytes", platform_max_buffer)
    for iface in device["vars"].get("sdmz_interfaces") or []:
        if iface.get("role") == "mgmt":
            continue
        port = {"name": iface["name"], "role": iface["role"], "mtu": int(iface.get("mtu") or default_mtu),
                "description": iface.get("description", ""), "speed_gbps": iface.get("speed_gbps"),
                "ipv4": iface.get("ipv4"), "ipv6": iface.get("ipv6")}
        if max_mtu and port["mtu"] > max_mtu:
            warnings.append("port %s: MTU %d is above the platform's largest (%d); %d is used"
                            % (iface["name"], port["mtu"], max_mtu, max_mtu))
            port["mtu"] = max_mtu
        speed = iface.get("speed_gbps")
        if speed:
            wanted = int(round(speed * 1e9 * max_rtt_ms / 1000.0 / 8))
            port.update(buffer_wanted_bytes=wanted, buffer_max_bytes=limit,
                        buffer_bytes=min(wanted, limit) if limit else wanted, limited=bool(limit and wanted > limit))
            port["critical_rtt_ms"] = round((port["buffer_bytes"] * 8) / (speed * 1e9) * 1000.0, 3)
            if port["limited"]:
                warnings.append("port %s: %d Gbit/s x %g ms wants a %d-byte buffer, but the platform offers at most "
                                "%d bytes per port: at line rate it serves an RTT of up to %.3f ms"
                                % (iface["name"], speed, max_rtt_ms, wanted, limit, port["critical_rtt_ms"]))
        ports.append(port)
    return ports, warnings


def device_policy(device_name, hosts, collaborators, catalogue, blocklist, now, options):
    """The whole model of one device; PolicyError with every problem found."""
    problems = []
    device = hosts.get(device_name)
    if device is None:
        raise PolicyError(["device %s: not in the inventory" % device_name])
    platform = device["vars"].get("sdmz_platform")
    if platform not in PLATFORMS:
        problems.append("device %s: sdmz_platform: unknown platform '%s' (known: %s)"
                        % (device_name, platform, ", ".join(PLATFORMS)))
    rules = catalogue_rules(catalogue, problems)
    for collab in collaborators or []:
        for service in collab.get("services") or []:
            if service not in catalogue:
                problems.append("collaborator %s: services: unknown service '%s' (known: %s)"
                                % (collab.get("name"), service, ", ".join(sorted(catalogue))))
    sources = collaborator_sources(collaborators, problems)
    active, expired = active_blocklist(blocklist, sources, now, problems)
    if problems:
        raise PolicyError(problems)
    acl, has_acl = device_acl(device, hosts, collaborators, catalogue, sources, rules, active, options, problems)
    problems += shadow_problems(device_name, acl)
    if problems:
        raise PolicyError(problems)
    rtts = [c["rtt_ms"] for c in collaborators or [] if c.get("rtt_ms")]
    max_rtt = max(rtts) if rtts else options.get("default_rtt_ms", 50)
    limits = options.get("platform_max_port_buffer_bytes") or {}
    ports, warnings = port_plan(device, max_rtt, options.get("mtu", 9216), limits.get(platform),
                                options.get("max_mtu"))
    wan = [p["name"] for p in ports if p["role"] == "wan"]
    return {
        "device": device_name,
        "platform": platform,
        "acl_name": options.get("acl_name", "SDMZ-WAN-IN"),
        "acl_interfaces": wan if has_acl else [],
        "acl": acl if has_acl else {"ipv4": [], "ipv6": []},
        "ports": ports,
        "max_rtt_ms": max_rtt,
        "warnings": warnings,
        "blocklist_expired": [{"index": b["index"], "address": str(b["network"]), "reason": b["reason"],
                               "expiry": b["expiry"].strftime("%Y-%m-%dT%H:%M:%SZ")} for b in expired],
    }
