# -*- coding: utf-8 -*-
# Science DMZ Kit: from a tuning plan and a probe of the host, the list of
# settings with their status: ok | drift | unsupported. The dtn_tuning role
# applies what drifted, verifies with a second probe and reports this list.
from __future__ import annotations


def _item(setting, scope, current, recommended, why, supported=True, reason="", kind="", **extra):
    if not supported:
        status = "unsupported"
    elif current is not None and str(current) == str(recommended):
        status = "ok"
    else:
        status = "drift"
    item = {"setting": setting, "scope": scope, "current": None if current is None else str(current),
            "recommended": str(recommended), "why": why, "status": status,
            "reason": reason if status == "unsupported" else "", "kind": kind}
    item.update(extra)
    return item


def _maxrate_bps(value):
    """tc's maxrate as bits/s: JSON gives bytes/s as a number, text output a rate string."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return int(value) * 8
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1}
    text = str(value).lower()
    for unit, factor in units.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return None


def _qdisc_item(name, link, plan, probe):
    pacing = plan["pacing"]
    if pacing["enabled"]:
        recommended = "fq maxrate %s" % pacing["tc_maxrate"]
        why = plan["explain"]["pacing"]
    else:
        recommended = "fq"
        why = plan["explain"]["pacing"]
    current = link.get("qdisc")
    if current == "fq":
        rate = _maxrate_bps(link.get("maxrate"))
        if rate:
            current = "fq maxrate %dmbit" % (rate // 1000000)
    fq = probe.get("fq", {})
    return _item("qdisc", name, current, recommended, why, supported=bool(fq.get("supported")),
                 reason=fq.get("reason") or "", kind="qdisc",
                 maxrate=pacing["tc_maxrate"] if pacing["enabled"] else "")


def _link_items(name, link, plan, probe, settings):
    items = []
    mtu = settings["mtu"]
    max_mtu = link.get("max_mtu")
    items.append(_item("mtu", name, link.get("mtu"), mtu,
                       "MTU %d on the data interface: jumbo frames make TCP tolerate loss and recover faster." % mtu,
                       supported=max_mtu is None or max_mtu >= mtu,
                       reason="the driver's largest MTU is %s" % max_mtu, kind="mtu"))
    txq = settings["txqueuelen"]
    items.append(_item("txqueuelen", name, link.get("txqueuelen"), txq,
                       "A %d-packet transmit queue absorbs a fast host's bursts at 10G and above." % txq,
                       kind="txqueuelen"))
    items.append(_qdisc_item(name, link, plan, probe))
    rings = link.get("rings", {})
    if settings.get("rings") == "max":
        for direction in ("rx", "tx"):
            items.append(_item("ring_%s" % direction, name, rings.get(direction), rings.get("%s_max" % direction, "max"),
                               "The largest %s ring the NIC offers absorbs bursts before the CPU drains them."
                               % direction.upper(),
                               supported=bool(rings.get("supported")), reason=rings.get("reason", ""), kind="ring"))
    offloads = link.get("offloads", {})
    words = {"gro": "GRO merges received segments, saving per-packet CPU",
             "tso": "TSO lets the NIC segment large sends",
             "lro": "LRO is off because it breaks forwarding and pacing"}
    for feature, wanted in sorted((settings.get("offloads") or {}).items()):
        state = offloads.get(feature, {})
        current = None if state.get("on") is None else ("on" if state["on"] else "off")
        recommended = "on" if wanted else "off"
        fixed = state.get("fixed") and current != recommended
        items.append(_item("offload_%s" % feature, name, current, recommended, words.get(feature, feature) + ".",
                           supported=not fixed,
                           reason=state.get("reason") or "fixed %s by the driver" % (current or "unknown"),
                           kind="offload", feature=feature))
    if settings.get("irq_affinity"):
        irqs = link.get("irqs") or []
        cpus = link.get("numa_cpus")
        items.append(_item("irq_affinity", name, None, cpus or "",
                           "NIC interrupts on the NIC's own NUMA node keep packets in local memory.",
                           supported=bool(irqs and cpus),
                           reason="no PCI device IRQs (a virtual interface)", kind="irq", irqs=irqs))
    return items


def dtn_tuning_items(plan, probe, settings):
    """Every setting the role manages, with current, recommended, why and status."""
    items = []
    offered = plan.get("available_congestion_control")
    for key, value in sorted(plan["sysctl"].items()):
        state = probe["sysctl"].get(key, {})
        current = state.get("value")
        supported, reason = bool(state.get("writable")), state.get("reason", "")
        if key == "net.ipv4.tcp_congestion_control" and offered is not None and value not in offered:
            supported = False
            reason = "the kernel does not offer %s (it offers %s)" % (value, " ".join(offered) or "none")
        items.append(_item(key, "sysctl", None if current is None else " ".join(str(current).split()),
                           value, plan["explain"].get(key, ""),
                           supported=supported, reason=reason, kind="sysctl"))
    for name in settings["interfaces"]:
        items.extend(_link_items(name, probe["interfaces"].get(name, {}), plan, probe, settings))
    governor = settings.get("cpu_governor")
    if governor:
        cpufreq = probe["cpufreq"]
        current = sorted(set(cpufreq.get("governors", {}).values()))
        supported = cpufreq.get("supported") and governor in cpufreq.get("available", [governor])
        items.append(_item("cpu_governor", "cpu", ",".join(current) if current else None, governor,
                           "The performance governor keeps cores at full clock, so packet processing never waits "
                           "for a frequency ramp.", supported=supported,
                           reason=cpufreq.get("reason") or "the %s governor is not offered" % governor, kind="cpu"))
    if settings.get("irq_affinity"):
        irqbalance = probe["irqbalance"]
        items.append(_item("irqbalance", "service", "active" if irqbalance.get("active") else "inactive", "inactive",
                           "irqbalance would move the pinned NIC interrupts away again.", kind="service"))
    profile = settings.get("tuned_profile")
    if profile and probe["tuned"].get("installed"):
        items.append(_item("tuned_profile", "tuned", probe["tuned"].get("profile"), profile,
                           "tuned's %s profile sets the CPU and power settings for throughput." % profile,
                           kind="tuned"))
    return items


def dtn_tuning_link_env(items, interface):
    """The settings the link unit applies to one interface: only those the host supports."""
    env = {}
    for item in items:
        if item["scope"] != interface or item["status"] == "unsupported":
            continue
        if item["kind"] == "mtu":
            env["DTN_TUNING_MTU"] = item["recommended"]
        elif item["kind"] == "txqueuelen":
            env["DTN_TUNING_TXQUEUELEN"] = item["recommended"]
        elif item["kind"] == "qdisc":
            env["DTN_TUNING_FQ_MAXRATE"] = item.get("maxrate") or "none"
        elif item["kind"] == "ring":
            env["DTN_TUNING_%s" % item["setting"].upper()] = item["recommended"]
        elif item["kind"] == "offload":
            env.setdefault("DTN_TUNING_OFFLOADS", [])
            env["DTN_TUNING_OFFLOADS"].append("%s %s" % (item["feature"], item["recommended"]))
        elif item["kind"] == "irq":
            env["DTN_TUNING_IRQ_CPUS"] = item["recommended"]
            env["DTN_TUNING_IRQS"] = " ".join(str(i) for i in item.get("irqs", []))
    if "DTN_TUNING_OFFLOADS" in env:
        env["DTN_TUNING_OFFLOADS"] = " ".join(env["DTN_TUNING_OFFLOADS"])
    return env


def dtn_tuning_table(items):
    """A compact fixed-width table of the items for the play output."""
    rows = [("status", "scope", "setting", "current", "recommended")]
    for item in items:
        rows.append((item["status"], item["scope"], item["setting"], item["current"] or "-", item["recommended"]))
    widths = [min(max(len(r[i]) for r in rows), 40) for i in range(5)]
    return ["  ".join(str(c)[:w].ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]


class FilterModule:
    def filters(self):
        return {
            "dtn_tuning_items": dtn_tuning_items,
            "dtn_tuning_link_env": dtn_tuning_link_env,
            "dtn_tuning_table": dtn_tuning_table,
        }
