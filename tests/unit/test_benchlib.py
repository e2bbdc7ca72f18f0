"""The benchmarks' network (bench/benchlib.py, private_loopback): a benchmark
re-runs itself in a network namespace of its own, sets the congestion control
asked for there, and leaves the host's alone; a congestion control the kernel
lacks is one clear error."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOST_CC = Path("/proc/sys/net/ipv4/tcp_congestion_control")

# What a benchmark does first, then what the test needs to know of where it ran.
PROBE = """
import json, os, socket, sys
sys.path.insert(0, %r)
from benchlib import private_loopback
conditions = private_loopback()
with socket.socket() as server, socket.socket() as client:
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client.connect(server.getsockname())
print(json.dumps({"conditions": conditions, "netns": os.readlink("/proc/self/ns/net")}))
""" % str(ROOT / "bench")


def run_probe(tmp_path: Path, congestion: str) -> subprocess.CompletedProcess:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "SDMZ_BENCH_PRIVATE_NETNS"}
    return subprocess.run([sys.executable, str(probe)], capture_output=True, text=True,
                          env=dict(env, BENCH_CC=congestion), timeout=60, check=False)


def test_a_benchmark_runs_in_its_own_namespace_with_the_congestion_control_asked(tmp_path):
    host_cc = HOST_CC.read_text().strip()
    wanted = "reno" if host_cc != "reno" else "cubic"
    done = run_probe(tmp_path, wanted)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["netns"] != os.readlink("/proc/self/ns/net")
    assert seen["conditions"]["tcp_congestion_control"] == wanted
    assert len(seen["conditions"]["tcp_rmem"].split()) == 3
    assert "congestion control %s (BENCH_CC)" % wanted in done.stderr
    assert HOST_CC.read_text().strip() == host_cc


def test_a_congestion_control_the_kernel_lacks_is_one_clear_error(tmp_path):
    done = run_probe(tmp_path, "nonesuch")
    assert done.returncode == 1
    assert done.stderr.startswith("BENCH_CC=nonesuch: not a congestion control this kernel "
                                  "offers ("), done.stderr
    assert done.stdout == ""
