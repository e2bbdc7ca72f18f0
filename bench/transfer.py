#!/usr/bin/env python3
"""make bench-transfer: sdmz-xfer/sdmz-xferd against globus-url-copy with
globus-gridftp-server at the same -p, scp and rsync (over a private sshd),
cp, and iperf3 memory-to-memory as the limit; on loopback, side by side in
one run, in a network namespace of its own (congestion control BENCH_CC,
cubic). Workloads: one big file (4 GiB; BENCH_BIG_BYTES) and 10,000 files
of 32 KiB (BENCH_SMALL_FILES), tmpfs to tmpfs (/dev/shm). Every copy is
compared with its source before it counts. Each measurement is repeated
BENCH_REPEATS times (3), the peers in a rotated order each round, and the
median counts; one untimed cp of each workload runs first, because on a
virtual machine the first copy into memory the guest never touched pays for
the host backing it (here up to 3 x slower), and whoever ran first took
that penalty. Writes a table,
build/bench/transfer.json and build/bench/transfer.png. A benchmark: it
reports ratios, it asserts nothing."""
from __future__ import annotations

import filecmp
import getpass
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import (median, private_loopback, report_targets, rotations, wait_port,
                      write_results)

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "src" / "transferd" / "build"
OUT = ROOT / "build" / "bench"
BIG_BYTES = int(os.environ.get("BENCH_BIG_BYTES", str(4 << 30)))
SMALL_FILES = int(os.environ.get("BENCH_SMALL_FILES", "10000"))
SMALL_BYTES = 32 << 10
STREAMS = [int(p) for p in os.environ.get("BENCH_STREAMS", "1,4").split(",")]
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
IPERF_SECONDS = 5
PORTS = {"xferd": 27301, "gridftp": 27302, "sshd": 27303, "iperf3": 27304}
DATA_PORTS = "27400-27499"
SSH_OPTS = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "BatchMode=yes", "-o", "LogLevel=ERROR"]


def timed(cmd: list[str], **kwargs) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    seconds = time.monotonic() - t0
    if done.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd[:3]), done.returncode,
                                                   (done.stderr or done.stdout)[-800:]))
    return seconds, done


def same_tree(a: Path, b: Path) -> bool:
    cmp = filecmp.dircmp(a, b)
    return (not cmp.left_only and not cmp.right_only and not cmp.diff_files and
            not cmp.funny_files and all(same_tree(a / d, b / d) for d in cmp.common_dirs) and
            not filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)[1])


def make_workloads(work: Path) -> tuple[Path, Path]:
    big, small = work / "src" / "big", work / "src" / "small"
    small.mkdir(parents=True)
    with open(big, "wb") as f:
        chunk = os.urandom(64 << 20)
        for left in range(BIG_BYTES, 0, -len(chunk)):
            f.write(chunk[:min(left, len(chunk))])
    for i in range(SMALL_FILES):
        sub = small / ("d%02d" % (i % 50))
        sub.mkdir(exist_ok=True)
        (sub / ("f%05d" % i)).write_bytes(os.urandom(SMALL_BYTES))
    for p in [work, *work.rglob("*")]:
        p.chmod(0o777 if p.is_dir() else 0o644)   # globus-gridftp-server reads as nobody
    return big, small


class Servers:
    """sdmz-xferd, globus-gridftp-server, a private sshd and iperf3, on loopback."""

    def __init__(self, work: Path):
        self.procs: list[subprocess.Popen] = []
        self.work = work
        self.key = work / "ssh" / "id"

    def start(self) -> "Servers":
        self.spawn([str(BIN / "sdmz-xferd"), "--root", str(self.work), "--listen",
                    "127.0.0.1:%d" % PORTS["xferd"], "--data-ports", DATA_PORTS,
                    "--anonymous-read"], PORTS["xferd"])
        self.spawn(["globus-gridftp-server", "-aa", "-anonymous-user", "nobody", "-p",
                    str(PORTS["gridftp"]), "-control-interface", "127.0.0.1",
                    "-data-interface", "127.0.0.1"], PORTS["gridftp"])
        self.spawn(["iperf3", "-s", "-p", str(PORTS["iperf3"])], PORTS["iperf3"])
        self.start_sshd()
        return self

    def spawn(self, cmd: list[str], port: int) -> None:
        self.procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL))
        wait_port(port)

    def start_sshd(self) -> None:
        """scp and rsync need an sshd; this one is private to the run (its own
        host key, one authorized key, loopback only; the benchmark runs as root)."""
        ssh = self.key.parent
        ssh.mkdir(mode=0o700)
        for name in ("id", "host"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(ssh / name)],
                           check=True)
        shutil.copy(ssh / "id.pub", ssh / "authorized_keys")
        Path("/run/sshd").mkdir(exist_ok=True)
        self.spawn(["/usr/sbin/sshd", "-D", "-e", "-f", "/dev/null", "-p", str(PORTS["sshd"]),
                    "-h", str(ssh / "host"), "-o", "ListenAddress=127.0.0.1",
                    "-o", "AuthorizedKeysFile=%s" % (ssh / "authorized_keys"),
                    "-o", "PidFile=none", "-o", "UsePAM=no", "-o", "StrictModes=no",
                    "-o", "PermitRootLogin=prohibit-password",
                    "-o", "Subsystem=sftp internal-sftp"], PORTS["sshd"])

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
            proc.wait(timeout=30)


def iperf3(streams: int) -> float:
    _, done = timed(["iperf3", "-c", "127.0.0.1", "-p", str(PORTS["iperf3"]), "-P", str(streams),
                     "-t", str(IPERF_SECONDS), "-J"])
    return json.loads(done.stdout)["end"]["sum_received"]["bits_per_second"]


def copy_command(peer: str, streams: int, src: Path, dst: Path, tree: bool,
                 key: Path) -> list[str]:
    """The command that fetches src (on the 'remote' side) into dst."""
    if peer == "sdmz-xfer":
        return [str(BIN / "sdmz-xfer"), "-p", str(streams), "--json",
                "ftp://127.0.0.1:%d%s" % (PORTS["xferd"], src), str(dst)]
    if peer == "globus-url-copy":
        # Its best settings: MODE E with reused data channels (-fast), and
        # pipelining (-pp) for many files.
        url = "ftp://127.0.0.1:%d%s%s" % (PORTS["gridftp"], src, "/" if tree else "")
        return ["globus-url-copy", "-p", str(streams), "-fast", *(["-pp", "-cd", "-r"] if tree else []),
                url, "file://%s%s" % (dst, "/" if tree else "")]
    if peer == "scp":
        return ["scp", "-q", *SSH_OPTS, "-i", str(key), "-P", str(PORTS["sshd"]),
                *(["-r"] if tree else []), "%s@127.0.0.1:%s" % (getpass.getuser(), src), str(dst)]
    if peer == "rsync":
        shell = " ".join(["ssh", *SSH_OPTS, "-i", str(key), "-p", str(PORTS["sshd"])])
        return ["rsync", "-a", "-e", shell, "%s@127.0.0.1:%s%s" % (getpass.getuser(), src,
                                                                    "/" if tree else ""), str(dst)]
    if peer == "cp":
        return ["cp", "-r" if tree else "--", str(src), str(dst)]
    raise ValueError(peer)



def measure(peer: str, streams: int, src: Path, work: Path, tree: bool, key: Path) -> dict:
    dst = work / "dst" / src.name
    shutil.rmtree(work / "dst", ignore_errors=True)
    (work / "dst").mkdir()
    if tree and peer in ("globus-url-copy", "rsync"):
        dst.mkdir()
    seconds, done = timed(copy_command(peer, streams, src, dst, tree, key), timeout=3600)
    same = same_tree(src, dst) if tree else filecmp.cmp(src, dst, shallow=False)
    if not same:
        raise RuntimeError("%s -p %d: the copy differs from its source" % (peer, streams))
    row = {"seconds": seconds}
    if peer == "sdmz-xfer":
        summary = json.loads(done.stdout)
        row["imbalance"] = summary.get("imbalance")
        row["retransmits"] = summary.get("retransmits")
    shutil.rmtree(work / "dst")
    return row


def measure_all(peers: list[tuple[str, int]], workload: str, src: Path, work: Path, tree: bool,
                key: Path) -> dict:
    """Each peer REPEATS times: its median run, with every run's seconds."""
    measure("cp", 1, src, work, tree, key)   # the warm-up (see the docstring)
    runs: dict[tuple[str, int], list[dict]] = {p: [] for p in peers}
    for round_, order in enumerate(rotations(peers, REPEATS)):
        for peer, streams in order:
            print("measuring %-6s %-16s -p %d  (round %d of %d)"
                  % (workload, peer, streams, round_ + 1, REPEATS), file=sys.stderr)
            runs[peer, streams].append(measure(peer, streams, src, work, tree, key))
    return {"%s/%d" % p: {**median(r, key=lambda row: row["seconds"]),
                          "runs": [row["seconds"] for row in r]}
            for p, r in runs.items()}


def main() -> int:
    missing = [tool for tool in ("iperf3", "globus-url-copy", "globus-gridftp-server", "scp",
                                 "rsync", "ssh-keygen") if not shutil.which(tool)]
    if missing or not (BIN / "sdmz-xfer").exists():
        print("bench-transfer: missing %s (make setup; make bench-transfer installs the peers)"
              % ", ".join(missing or ["src/transferd/build"]), file=sys.stderr)
        return 2
    network = private_loopback()
    OUT.mkdir(parents=True, exist_ok=True)
    results = {"cpus": os.cpu_count(), "network": network, "repeats": REPEATS,
               "big_bytes": BIG_BYTES, "small_files": SMALL_FILES, "small_bytes": SMALL_BYTES,
               "streams": STREAMS, "iperf3_bps": {}, "big": {}, "small": {}}
    work = Path(tempfile.mkdtemp(prefix="sdmz-bench-", dir="/dev/shm"))
    work.chmod(0o755)
    try:
        print("writing the workloads in %s ..." % work, file=sys.stderr)
        big, small = make_workloads(work)
        servers = Servers(work).start()
        peers = [(p, s) for s in STREAMS for p in ("sdmz-xfer", "globus-url-copy")]
        peers += [("scp", 1), ("rsync", 1), ("cp", 1)]
        try:
            for streams in STREAMS:
                results["iperf3_bps"][str(streams)] = median([iperf3(streams)
                                                              for _ in range(REPEATS)])
            for workload, src, tree in (("big", big, False), ("small", small, True)):
                results[workload] = measure_all(peers, workload, src, work, tree, servers.key)
        finally:
            servers.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(results)
    return 0


def report(results: dict) -> None:
    big_bits = results["big_bytes"] * 8
    print("\nOne file of %.1f GiB, tmpfs to tmpfs, loopback (%s), %d CPUs; median of %d runs"
          % (results["big_bytes"] / (1 << 30), results["network"]["tcp_congestion_control"],
             results["cpus"], results["repeats"]))
    print("%-22s %9s %9s %10s" % ("peer", "seconds", "Gbit/s", "imbalance"))
    for key, row in results["big"].items():
        row["gbps"] = big_bits / row["seconds"] / 1e9
        imbalance = "%9.1f%%" % (100 * row["imbalance"]) if row.get("imbalance") is not None else ""
        print("%-22s %9.2f %9.2f %10s" % (key, row["seconds"], row["gbps"], imbalance))
    for streams, bps in results["iperf3_bps"].items():
        print("%-22s %9s %9.2f" % ("iperf3/%s (memory)" % streams, "", bps / 1e9))
    print("\n%d files of %d KiB" % (results["small_files"], results["small_bytes"] >> 10))
    print("%-22s %9s %10s" % ("peer", "seconds", "files/s"))
    for key, row in results["small"].items():
        row["files_per_s"] = results["small_files"] / row["seconds"]
        print("%-22s %9.2f %10.0f" % (key, row["seconds"], row["files_per_s"]))

    targets, ratios = [], {}
    for streams in results["streams"]:
        ours, theirs = "sdmz-xfer/%d" % streams, "globus-url-copy/%d" % streams
        r = {"of_iperf3": results["big"][ours]["gbps"] * 1e9 / results["iperf3_bps"][str(streams)],
             "big_vs_gridftp": results["big"][theirs]["seconds"] / results["big"][ours]["seconds"],
             "small_vs_gridftp": results["small"][ours]["files_per_s"] /
             results["small"][theirs]["files_per_s"]}
        ratios[str(streams)] = r
        print("\n-p %d: %.2f of iperf3; %.2f x GridFTP on the big file; %.2f x its files/s"
              % (streams, r["of_iperf3"], r["big_vs_gridftp"], r["small_vs_gridftp"]))
        targets.append(("-p %d big file >= 0.8 of iperf3" % streams, r["of_iperf3"] >= 0.8))
        targets.append(("-p %d big file >= 1.3 x GridFTP" % streams, r["big_vs_gridftp"] >= 1.3))
        targets.append(("-p %d small files >= 3 x GridFTP files/s" % streams,
                        r["small_vs_gridftp"] >= 3))
        if streams > 1:
            imbalance = results["big"][ours]["imbalance"]
            targets.append(("-p %d relative imbalance < 2 %%" % streams, imbalance < 0.02))
    results["ratios"] = ratios
    results["targets"] = report_targets(targets)
    write_results(OUT, "transfer", results, plot)


def plot(results: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    big = results["big"]
    names = list(big) + ["iperf3/%s" % s for s in results["iperf3_bps"]]
    values = [row["gbps"] for row in big.values()] + [b / 1e9 for b in results["iperf3_bps"].values()]
    left.barh(names, values, color=["C0" if n.startswith("sdmz") else "C7" if n.startswith("iperf3")
                                    else "C1" for n in names])
    left.set_xlabel("Gbit/s")
    left.set_title("%.0f GiB file, tmpfs to tmpfs, loopback (%s)"
                   % (results["big_bytes"] / (1 << 30),
                      results["network"]["tcp_congestion_control"]))
    small = results["small"]
    right.barh(list(small), [row["files_per_s"] for row in small.values()],
               color=["C0" if n.startswith("sdmz") else "C1" for n in small])
    right.set_xlabel("files per second")
    right.set_title("%d x %d KiB files" % (results["small_files"], results["small_bytes"] >> 10))
    for ax in (left, right):
        ax.invert_yaxis()
        ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(OUT / "transfer.png", dpi=110)


if __name__ == "__main__":
    sys.exit(main())
