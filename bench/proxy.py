#!/usr/bin/env python3
"""make bench-proxy: goodput and added latency of a direct connection,
sdmz-proxy, HAProxy (TCP mode, splice) and socat, on loopback, side by side in
one run, with one and two proxy hops (the SciStream paper's Fig. 7 and 8),
in a network namespace of its own (congestion control BENCH_CC, cubic).
Goodput is iperf3's receiver rate at each write size; latency is a 512-byte
ping-pong (sdmz-msgbench), measured also with each proxy's busy polling
(sdmz-proxy --busy-poll, HAProxy's busy-polling). Each goodput point also
records the CPU of the sender, the proxies and the receiver, which tells the
stage that bounds it. The goodput chains are up for the whole run; a latency
chain is up only for its own measurement, so a busy-polling proxy spins only
while it is measured. Each point is measured BENCH_REPEATS times (3) with
the peers interleaved in a rotated order, the median counting: on a shared
machine the direct rate drifts by 2 x within a run, so a ratio is only fair
between measurements taken side by side.
Writes a table, build/bench/proxy.json and build/bench/proxy.png.
A benchmark: it reports ratios, it asserts nothing."""
from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import (median, private_loopback, report_targets, rotations, wait_port,
                      write_results)

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "src" / "streamproxy" / "build"
OUT = ROOT / "build" / "bench"
SECONDS = float(os.environ.get("BENCH_SECONDS", "2"))
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
SIZES = [512 << i for i in range(12)]  # 512 B ... 1 MiB
PEERS = ["direct", "sdmz-proxy", "haproxy", "socat"]
# Latency is also measured with each proxy's busy polling: on a VM, waking a
# halted vCPU costs more than relaying 512 bytes.
BUSY_POLL_US = 50
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# The stages of a goodput chain whose CPU is recorded, in the table's order.
STAGES = ("sender", "proxies", "receiver")
LATENCY_PEERS = ["direct", "sdmz-proxy", "sdmz-proxy busy-poll", "haproxy",
                 "haproxy busy-polling", "socat"]


def start_hop(peer: str, listen: int, target: int, workdir: Path) -> subprocess.Popen:
    if peer.startswith("sdmz-proxy"):
        cmd = [str(BIN / "sdmz-proxy"), "relay", "--listen", "127.0.0.1:%d" % listen,
               "--connect", "127.0.0.1:%d" % target]
        if peer.endswith("busy-poll"):
            cmd += ["--busy-poll", str(BUSY_POLL_US)]
    elif peer.startswith("haproxy"):
        cfg = workdir / ("haproxy-%d.cfg" % listen)
        cfg.write_text(
            "global\n  maxconn 256\n%sdefaults\n  mode tcp\n  timeout connect 5s\n"
            "  timeout client 5m\n  timeout server 5m\n  option splice-auto\n"
            "listen hop\n  bind 127.0.0.1:%d\n  server target 127.0.0.1:%d\n"
            % ("  busy-polling\n" if peer.endswith("busy-polling") else "", listen, target))
        cmd = ["haproxy", "-db", "-f", str(cfg)]
    elif peer == "socat":
        cmd = ["socat", "TCP-LISTEN:%d,reuseaddr,fork,bind=127.0.0.1" % listen,
               "TCP:127.0.0.1:%d" % target]
    else:
        raise ValueError(peer)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(listen)
    return proc


class Chain:
    """A chain of `hops` proxies of one kind in front of `target`."""

    def __init__(self, peer: str, hops: int, target: int, base: int, workdir: Path):
        self.procs, self.entry = [], target
        if peer != "direct":
            for hop in range(hops):
                listen = base + hop
                self.procs.append(start_hop(peer, listen, self.entry, workdir))
                self.entry = listen

    def close(self):
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)


def cpu_ticks(pid: int) -> int:
    """CPU time of a process and its children, live and reaped (socat forks
    one child per connection; HAProxy and sdmz-proxy are one process)."""
    try:
        fields = Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0  # reaped meanwhile: counted in its parent's cutime from now on
    try:
        children = Path("/proc/%d/task/%d/children" % (pid, pid)).read_text().split()
    except (FileNotFoundError, ProcessLookupError):
        children = []  # no CONFIG_PROC_CHILDREN: reaped children (cutime) only
    # utime, stime, cutime, cstime (fields 14-17 of proc_pid_stat(5))
    return sum(int(f) for f in fields[11:15]) + sum(cpu_ticks(int(c)) for c in children)


def goodput(chain: Chain, size: int) -> dict | None:
    """iperf3's received goodput, with the CPU of the sender, the proxies and
    the receiver (% of one core) that says which stage held it back; a run
    that fails (a peer dropping iperf3's control connection, say) is retried
    twice, then recorded as None."""
    for _ in range(3):
        before, started = sum(cpu_ticks(p.pid) for p in chain.procs), time.monotonic()
        result = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(chain.entry), "-t",
                                 str(SECONDS), "-l", str(size), "-J"],
                                capture_output=True, text=True, timeout=120)
        elapsed = time.monotonic() - started
        proxies = sum(cpu_ticks(p.pid) for p in chain.procs) - before
        try:
            end = json.loads(result.stdout)["end"]
            iperf_cpu = end["cpu_utilization_percent"]
            return {"bps": end["sum_received"]["bits_per_second"],
                    "cpu": {"sender": iperf_cpu["host_total"],
                            "proxies": 100.0 * proxies / CLOCK_TICKS / elapsed,
                            "receiver": iperf_cpu["remote_total"]}}
        except (ValueError, KeyError):
            print("iperf3 through port %d, %d B: %s" % (chain.entry, size, (result.stdout[-300:]
                  or result.stderr[-300:]).strip()), file=sys.stderr)
            time.sleep(1)
    return None


def latency(peer: str, hops: int, echo_port: int, base: int, workdir: Path) -> float:
    """Median round trip through a chain that is up only for this measurement."""
    chain = Chain(peer, hops, echo_port, base, workdir)
    try:
        result = subprocess.run([str(BIN / "sdmz-msgbench"), "pingpong", "--connect",
                                 "127.0.0.1:%d" % chain.entry, "--size", "512", "--count",
                                 "20000"], capture_output=True, text=True, timeout=120,
                                check=True)
    finally:
        chain.close()
    return json.loads(result.stdout)["rtt_us_p50"]


def main() -> int:
    missing = [tool for tool in ("iperf3", "haproxy", "socat") if not shutil.which(tool)]
    if missing or not (BIN / "sdmz-proxy").exists():
        print("bench-proxy: missing %s (make setup; make bench-proxy installs the peers)"
              % ", ".join(missing or ["src/streamproxy/build"]), file=sys.stderr)
        return 2
    network = private_loopback()
    OUT.mkdir(parents=True, exist_ok=True)
    results = {"seconds_per_point": SECONDS, "repeats": REPEATS, "cpus": os.cpu_count(),
               "network": network, "busy_poll_us": BUSY_POLL_US, "goodput_bps": {},
               "cpu_percent": {}, "rtt_us_p50": {}}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        iperf_port, echo_port = 27201, 27202
        iperf = subprocess.Popen(["iperf3", "-s", "-p", str(iperf_port)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        echo = subprocess.Popen([str(BIN / "sdmz-msgbench"), "echo", "--listen",
                                 "127.0.0.1:%d" % echo_port])
        wait_port(iperf_port)
        wait_port(echo_port)
        chains: dict[tuple[str, str], Chain] = {}
        try:
            base = 27210
            for hops in (1, 2):
                for peer in PEERS:
                    key = "%s/%d" % (peer, hops)
                    chains[key, "iperf"] = Chain(peer, hops, iperf_port, base, workdir)
                    base += 2
            for hops in (1, 2):
                keys = ["%s/%d" % (p, hops) for p in PEERS]
                for size in SIZES:
                    runs: dict[str, list] = {k: [] for k in keys}
                    for order in rotations(keys, REPEATS):
                        for key in order:
                            runs[key].append(goodput(chains[key, "iperf"], size))
                    for key in keys:
                        ok = [r for r in runs[key] if r]
                        results["goodput_bps"].setdefault(key, {})[str(size)] = median(
                            [r["bps"] for r in ok])
                        results["cpu_percent"].setdefault(key, {})[str(size)] = {
                            stage: median([r["cpu"][stage] for r in ok]) for stage in STAGES}
                    print("measured %d hop(s), %7d B" % (hops, size), file=sys.stderr)
                rtts: dict[str, list] = {p: [] for p in LATENCY_PEERS}
                for order in rotations(LATENCY_PEERS, REPEATS):
                    for peer in order:
                        rtts[peer].append(latency(peer, hops, echo_port, base, workdir))
                for peer in LATENCY_PEERS:
                    results["rtt_us_p50"]["%s/%d" % (peer, hops)] = median(rtts[peer])
        finally:
            for chain in chains.values():
                chain.close()
            iperf.terminate()
            echo.terminate()
    report(results)
    return 0


def report(results: dict) -> None:
    g, rtt = results["goodput_bps"], results["rtt_us_p50"]
    ratios, targets = {}, []
    for hops in (1, 2):
        print("\n%d hop(s): goodput in Gbit/s by write size (median of %d runs; %s)"
              % (hops, results["repeats"], results["network"]["tcp_congestion_control"]))
        print("%-8s" % "size" + "".join("%12s" % p for p in PEERS) +
              "  proxy/direct proxy/haproxy proxy/socat")
        for size in SIZES:
            # A point that failed every try (None) counts as NaN: its targets are missed.
            row = {p: g["%s/%d" % (p, hops)][str(size)] or math.nan for p in PEERS}
            r = {"direct": row["sdmz-proxy"] / row["direct"],
                 "haproxy": row["sdmz-proxy"] / row["haproxy"],
                 "socat": row["sdmz-proxy"] / row["socat"]}
            ratios["%d/%d" % (hops, size)] = r
            print("%-8s" % size + "".join("%12.2f" % (row[p] / 1e9) for p in PEERS) +
                  "  %12.2f %13.2f %11.2f" % (r["direct"], r["haproxy"], r["socat"]))
            if size >= 65536:
                targets.append(("%d hop %7d B: >= 1.5x HAProxy" % (hops, size), r["haproxy"] >= 1.5))
                targets.append(("%d hop %7d B: >= 2x socat" % (hops, size), r["socat"] >= 2.0))
                if hops == 1:
                    targets.append(("1 hop %7d B: >= 0.75 of direct" % size, r["direct"] >= 0.75))
            targets.append(("%d hop %7d B: ahead of HAProxy and socat" % (hops, size),
                            r["haproxy"] > 1 and r["socat"] > 1))
        print_cpu(results["cpu_percent"], hops)
    print("\n512 B ping-pong, median round trip (us) and added one-way latency per hop (us)")
    added = {}
    for hops in (1, 2):
        for peer in LATENCY_PEERS[1:]:
            key = "%s/%d" % (peer, hops)
            added[key] = (rtt[key] - rtt["direct/%d" % hops]) / 2 / hops
            print("  %-20s %d hop(s): rtt %7.1f  added/hop %6.1f"
                  % (peer, hops, rtt[key], added[key]))
        print("  %-20s           rtt %7.1f" % ("direct", rtt["direct/%d" % hops]))
    # The target is met in the proxy's latency setting; the default (sleeping)
    # setting's figure stands next to it in the table and the JSON.
    targets.append(("added latency per hop <= 10 us (1 hop, --busy-poll %d)" % BUSY_POLL_US,
                    added["sdmz-proxy busy-poll/1"] <= 10))
    results["ratios"] = ratios
    results["added_latency_us_per_hop"] = added
    results["targets"] = report_targets(targets)
    write_results(OUT, "proxy", results, plot)


def print_cpu(cpu: dict, hops: int) -> None:
    """Which stage held the goodput back: one at ~100 % of a core is the
    bottleneck; none near it means the stages waited on each other."""
    print("%d hop(s): CPU, %% of one core, sender/proxies/receiver (median)" % hops)
    print("%-8s" % "size" + "".join("%16s" % p for p in PEERS))
    for size in SIZES:
        cells = []
        for peer in PEERS:
            stages = cpu["%s/%d" % (peer, hops)][str(size)]
            cells.append("/".join("%3.0f" % stages[k] if stages[k] is not None else "  ?"
                                  for k in STAGES))
        print("%-8s" % size + "".join("%16s" % c for c in cells))


def plot(results: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.5))
    for ax, hops in zip(axes, (1, 2)):
        for peer in PEERS:
            series = results["goodput_bps"]["%s/%d" % (peer, hops)]
            ax.plot(SIZES, [(series[str(s)] or math.nan) / 1e9 for s in SIZES], marker="o",
                    label=peer)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("write size (bytes)")
        ax.set_title("%d proxy hop(s), loopback (%s), %d CPUs"
                     % (hops, results["network"]["tcp_congestion_control"], results["cpus"]))
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("goodput (Gbit/s)")
    axes[0].legend()
    added = results["added_latency_us_per_hop"]
    peers = LATENCY_PEERS[1:]
    for offset, hops in ((-0.2, 1), (0.2, 2)):
        axes[2].bar([i + offset for i in range(len(peers))],
                    [added["%s/%d" % (p, hops)] for p in peers], width=0.4,
                    label="%d hop(s)" % hops)
    axes[2].axhline(0, color="black", linewidth=0.8)
    axes[2].set_xticks(range(len(peers)))
    axes[2].set_xticklabels(peers, rotation=20, ha="right")
    axes[2].set_ylabel("added latency per hop (us), 512 B ping-pong")
    axes[2].set_title("added latency (median round trip - direct) / 2 / hops")
    axes[2].grid(True, axis="y", alpha=0.3)
    axes[2].legend()
    fig.tight_layout()
    fig.savefig(OUT / "proxy.png", dpi=110)


if __name__ == "__main__":
    sys.exit(main())
