"""What the benchmarks share: the network they run in, waiting for a peer's
port, and the closing report of targets met and missed."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence


# Set in the benchmark's own process once it runs in its private namespace.
PRIVATE_NETNS_ENV = "SDMZ_BENCH_PRIVATE_NETNS"
IPV4_SYSCTLS = Path("/proc/sys/net/ipv4")


def private_loopback() -> dict:
    """Runs the calling benchmark (again, from the start) in a network
    namespace of its own, whose loopback has no firewall rules and the
    congestion control BENCH_CC (cubic, the kernel's default), and returns
    those conditions for the results, with the buffer limits the namespace
    took over from the host's (Linux copies tcp_rmem and tcp_wmem). Why: the
    host's settings are not the benchmark's to choose or to change, and they
    decide the outcome. A congestion control that paces (BBR) without an fq qdisc turns on the
    kernel's per-socket pacing timers, which cut iperf3's loopback rate by
    2-3 x here; under a host's BBR every peer's goodput says more about those
    timers than about the peer (docs/streaming.md)."""
    congestion = os.environ.get("BENCH_CC", "cubic")
    available = (IPV4_SYSCTLS / "tcp_available_congestion_control").read_text().split()
    if congestion not in available:
        raise SystemExit("BENCH_CC=%s: not a congestion control this kernel offers (%s)"
                         % (congestion, " ".join(available)))
    if os.environ.get(PRIVATE_NETNS_ENV) != "1":
        if os.geteuid() != 0:
            raise SystemExit("the benchmark runs in a network namespace of its own: "
                             "run it as root (unshare --net)")
        os.environ[PRIVATE_NETNS_ENV] = "1"
        sys.stdout.flush()
        sys.stderr.flush()
        os.execvp("unshare", ["unshare", "--net", "--", sys.executable, *sys.argv])
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    (IPV4_SYSCTLS / "tcp_congestion_control").write_text(congestion)
    conditions = {name: " ".join((IPV4_SYSCTLS / name).read_text().split())
                  for name in ("tcp_congestion_control", "tcp_rmem", "tcp_wmem")}
    print("network: loopback of a namespace of its own, congestion control %s (BENCH_CC)"
          % conditions["tcp_congestion_control"], file=sys.stderr)
    return conditions


def wait_port(port: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError("port %d never opened" % port)


def report_targets(targets: list[tuple[str, bool]]) -> dict[str, bool]:
    """Prints how many targets were met and names the missed ones."""
    missed = [name for name, ok in targets if not ok]
    print("\ntargets: %d of %d met" % (len(targets) - len(missed), len(targets)))
    for name in missed:
        print("  missed: " + name)
    return {name: ok for name, ok in targets}


def write_results(out: Path, name: str, results: dict, plot: Callable[[dict], None]) -> None:
    """build/bench/NAME.json and, drawn by plot, build/bench/NAME.png."""
    (out / (name + ".json")).write_text(json.dumps(results, indent=2) + "\n")
    plot(results)
    print("\nwrote build/bench/%s.json and build/bench/%s.png" % (name, name))


def rotations(items: Sequence, rounds: int) -> Iterator[list]:
    """items in a different order each round, so that none always goes first
    (on a shared machine, going first is a condition of its own)."""
    for round_ in range(rounds):
        shift = round_ % len(items)
        yield list(items[shift:]) + list(items[:shift])


def median(values: list, key: Callable[[Any], float] | None = None) -> Any:
    """The middle one of the values that are not None (None if none are)."""
    ok = sorted((v for v in values if v is not None), key=key)
    return ok[len(ok) // 2] if ok else None
