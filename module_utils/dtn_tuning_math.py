# -*- coding: utf-8 -*-
# Science DMZ Kit: the DTN tuning arithmetic (bandwidth-delay product, buffers,
# pacing, critical RTT). Pure functions, shared by the dtn_tuning_plan module
# and its unit tests.
from __future__ import annotations

import math

# The largest value Linux accepts for a socket buffer limit (INT_MAX).
MAX_BUFFER = 2147483647

# Floors per NIC speed tier, after ESnet fasterdata's Linux host tuning
# guidance: a 10G host gets a 32 MiB TCP maximum and a 64 MiB core maximum;
# each tier up doubles or more, and 100G and faster hosts take the largest
# core maximum Linux allows. netdev_max_backlog and optmem_max grow with the
# packet rate the tier implies.
SPEED_TIERS = (
    # tier_gbps, tcp_max_floor, core_max_floor, netdev_max_backlog, optmem_max
    (10, 33554432, 67108864, 30000, 65536),
    (25, 67108864, 134217728, 100000, 131072),
    (40, 134217728, 268435456, 100000, 262144),
    (100, 536870912, MAX_BUFFER, 250000, 1048576),
    (200, 1073741824, MAX_BUFFER, 250000, 1048576),
    (400, MAX_BUFFER, MAX_BUFFER, 250000, 1048576),
)

CONGESTION_PREFERENCE = ("bbr", "htcp", "cubic")
HOST_ROLES = ("dtn", "measurement", "gateway")
PACING_FRACTION = 0.8

TCP_RMEM_MIN, TCP_RMEM_DEFAULT = 4096, 87380
TCP_WMEM_MIN, TCP_WMEM_DEFAULT = 4096, 65536


class PlanError(ValueError):
    """Bad input: the message names the parameter and the value."""


def next_power_of_two(value: float) -> int:
    if value <= 1:
        return 1
    return 1 << math.ceil(math.log2(value))


def speed_tier(nic_speed_gbps: float) -> tuple:
    """The smallest tier at least as fast as the NIC (the fastest tier above 400G)."""
    for tier in SPEED_TIERS:
        if nic_speed_gbps <= tier[0]:
            return tier
    return SPEED_TIERS[-1]


def bdp_bytes(nic_speed_gbps: float, rtt_ms: float) -> int:
    """Bandwidth-delay product in bytes: speed (bit/s) x RTT (s) / 8."""
    return int(round(nic_speed_gbps * 1e9 * rtt_ms / 1e3 / 8))


def critical_rtt_ms(port_buffer_bytes: int, speed_gbps: float) -> float:
    """The largest RTT a port buffer can serve at line rate: buffer / speed."""
    return port_buffer_bytes * 8 / (speed_gbps * 1e9) * 1e3


def largest_rtt(max_rtt_ms, collaborators) -> tuple[float, str]:
    """The RTT the host is sized for, and where it came from."""
    if max_rtt_ms is not None:
        if max_rtt_ms <= 0:
            raise PlanError("max_rtt_ms must be a number > 0 (got %s)" % max_rtt_ms)
        return float(max_rtt_ms), "max_rtt_ms=%s" % max_rtt_ms
    if not collaborators:
        raise PlanError("give max_rtt_ms or collaborators (a list of {name, rtt_ms})")
    farthest = None
    for index, collab in enumerate(collaborators):
        name = collab.get("name") or "#%d" % index
        rtt = collab.get("rtt_ms")
        if not isinstance(rtt, (int, float)) or isinstance(rtt, bool) or rtt <= 0:
            raise PlanError("collaborators[%d] (%s): rtt_ms must be a number > 0 (got %r)" % (index, name, rtt))
        if farthest is None or rtt > farthest[0]:
            farthest = (float(rtt), name)
    return farthest[0], "collaborator %s (rtt_ms=%s, the largest)" % (farthest[1], farthest[0])


def choose_congestion_control(requested: str, available) -> tuple[str, str]:
    if requested != "auto":
        return requested, "congestion_control=%s was requested" % requested
    offered = list(available or [])
    for name in CONGESTION_PREFERENCE:
        if name in offered:
            return name, ("auto prefers %s; the kernel offers %s, so %s"
                          % (" > ".join(CONGESTION_PREFERENCE), " ".join(offered), name))
    return "cubic", "auto: the kernel offers none of bbr, htcp (%s); cubic is Linux's default" % " ".join(offered)


def fmt_bytes(value: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            return "%s B (%.1f %s)" % (format(value, ","), value / size, unit)
    return "%s B" % format(value, ",")


def plan(nic_speed_gbps, max_rtt_ms=None, collaborators=None, streams=1, mtu=9000,
         host_role="dtn", congestion_control="auto", available_congestion_control=None,
         port_buffer_bytes=None) -> dict:
    """The full recommendation; raises PlanError naming the bad parameter."""
    if isinstance(nic_speed_gbps, bool) or not isinstance(nic_speed_gbps, (int, float)) or nic_speed_gbps <= 0:
        raise PlanError("nic_speed_gbps must be a number > 0 (got %r)" % (nic_speed_gbps,))
    if isinstance(streams, bool) or not isinstance(streams, int) or streams < 1:
        raise PlanError("streams must be an integer >= 1 (got %r)" % (streams,))
    if isinstance(mtu, bool) or not isinstance(mtu, int) or not 1280 <= mtu <= 9216:
        raise PlanError("mtu must be an integer from 1280 to 9216 (got %r)" % (mtu,))
    if host_role not in HOST_ROLES:
        raise PlanError("host_role must be one of %s (got %r)" % (", ".join(HOST_ROLES), host_role))
    if congestion_control not in ("auto",) + CONGESTION_PREFERENCE:
        raise PlanError("congestion_control must be one of auto, %s (got %r)"
                        % (", ".join(CONGESTION_PREFERENCE), congestion_control))
    if port_buffer_bytes is not None and (isinstance(port_buffer_bytes, bool) or port_buffer_bytes <= 0):
        raise PlanError("port_buffer_bytes must be a number > 0 (got %r)" % (port_buffer_bytes,))

    rtt_ms, rtt_source = largest_rtt(max_rtt_ms, collaborators)
    bdp = bdp_bytes(nic_speed_gbps, rtt_ms)
    tier_gbps, tcp_floor, core_floor, backlog, optmem = speed_tier(nic_speed_gbps)

    per_stream = 2 * bdp / streams
    wanted = next_power_of_two(per_stream)
    tcp_max = min(max(wanted, tcp_floor), MAX_BUFFER)
    core_max = min(max(tcp_max, core_floor), MAX_BUFFER)
    streams_needed = max(1, math.ceil(bdp / MAX_BUFFER))

    cc, cc_why = choose_congestion_control(congestion_control, available_congestion_control)
    explain = {
        "bdp_bytes": "%s = %s Gbit/s x %s ms / 8, the RTT from %s."
                     % (fmt_bytes(bdp), nic_speed_gbps, rtt_ms, rtt_source),
        "tcp_max_bytes": ("%s: 2 x BDP / %d stream(s) = %s rounded up to a power of two (%s), "
                          "at least the %dG tier floor %s, at most %s."
                          % (fmt_bytes(tcp_max), streams, fmt_bytes(int(math.ceil(per_stream))),
                             fmt_bytes(wanted), tier_gbps, fmt_bytes(tcp_floor), fmt_bytes(MAX_BUFFER))),
    }
    if wanted > MAX_BUFFER:
        explain["tcp_max_bytes"] += (" Clamped: one stream cannot hold 2 x BDP; use at least %d streams to fill "
                                     "the path." % streams_needed)
    sysctl = {
        "net.core.rmem_max": str(core_max),
        "net.core.wmem_max": str(core_max),
        "net.ipv4.tcp_rmem": "%d %d %d" % (TCP_RMEM_MIN, TCP_RMEM_DEFAULT, tcp_max),
        "net.ipv4.tcp_wmem": "%d %d %d" % (TCP_WMEM_MIN, TCP_WMEM_DEFAULT, tcp_max),
        "net.ipv4.tcp_congestion_control": cc,
        "net.core.default_qdisc": "fq",
        "net.ipv4.tcp_mtu_probing": "1" if mtu > 1500 else "0",
        "net.ipv4.tcp_no_metrics_save": "1",
        "net.core.netdev_max_backlog": str(backlog),
        "net.core.optmem_max": str(optmem),
    }
    explain.update({
        "net.core.rmem_max": ("%s: the largest receive buffer an application may request; at least the TCP "
                              "maximum and the %dG tier floor %s." % (fmt_bytes(core_max), tier_gbps,
                                                                     fmt_bytes(core_floor))),
        "net.core.wmem_max": "%s: the largest send buffer an application may request; as rmem_max." % fmt_bytes(core_max),
        "net.ipv4.tcp_rmem": "Autotuning may grow a receive buffer to the TCP maximum, %s." % fmt_bytes(tcp_max),
        "net.ipv4.tcp_wmem": "Autotuning may grow a send buffer to the TCP maximum, %s." % fmt_bytes(tcp_max),
        "net.ipv4.tcp_congestion_control": cc_why + ".",
        "net.core.default_qdisc": "fq paces each flow to its rate, which smooths bursts into switch buffers.",
        "net.ipv4.tcp_mtu_probing": ("mtu %d > 1500: probe the path MTU so a jumbo-frame black hole degrades "
                                     "instead of stalling." % mtu if mtu > 1500 else
                                     "mtu %d: standard frames, no MTU probing needed." % mtu),
        "net.ipv4.tcp_no_metrics_save": "Do not start a connection from a previous connection's (possibly lossy) metrics.",
        "net.core.netdev_max_backlog": "%d packets queued from the NIC before drops, for the %dG tier." % (backlog, tier_gbps),
        "net.core.optmem_max": "%d bytes of ancillary socket memory, for the %dG tier." % (optmem, tier_gbps),
        "streams_needed": ("%d: the fewest streams whose largest buffers (%s each) hold the BDP."
                           % (streams_needed, fmt_bytes(MAX_BUFFER))),
    })

    total_bps = int(nic_speed_gbps * 1e9 * PACING_FRACTION)
    if host_role == "measurement":
        pacing = {"enabled": False, "per_flow_bps": None, "total_bps": None, "tc_maxrate": None,
                  "fraction": None}
        explain["pacing"] = ("Measurement hosts are not paced: a throughput test must show what the path "
                             "carries at line rate; fq without maxrate still spaces packets.")
    else:
        per_flow = total_bps // streams
        pacing = {"enabled": True, "per_flow_bps": per_flow, "total_bps": total_bps,
                  "tc_maxrate": "%dmbit" % (per_flow // 1000000), "fraction": PACING_FRACTION}
        explain["pacing"] = ("fq maxrate %s per flow: %d%% of the %s Gbit/s NIC (%.1f Gbit/s) shared by %d stream(s)."
                             % (pacing["tc_maxrate"], int(PACING_FRACTION * 100), nic_speed_gbps,
                                total_bps / 1e9, streams))

    result = {
        "bdp_bytes": bdp,
        "rtt_ms": rtt_ms,
        "tier_gbps": tier_gbps,
        "tcp_max_bytes": tcp_max,
        "streams": streams,
        "streams_needed": streams_needed,
        "congestion_control": cc,
        "mtu": mtu,
        "host_role": host_role,
        "sysctl": sysctl,
        "pacing": pacing,
        "critical_rtt_ms": None,
        "explain": explain,
    }
    if port_buffer_bytes is not None:
        crit = critical_rtt_ms(port_buffer_bytes, nic_speed_gbps)
        result["critical_rtt_ms"] = round(crit, 3)
        verdict = ("enough for the %s ms path" % rtt_ms if crit >= rtt_ms else
                   "below the %s ms path: that port drops bursts before TCP fills the pipe" % rtt_ms)
        explain["critical_rtt_ms"] = ("%.3f ms = port buffer %s x 8 / %s Gbit/s; %s."
                                      % (crit, fmt_bytes(int(port_buffer_bytes)), nic_speed_gbps, verdict))
    return result
