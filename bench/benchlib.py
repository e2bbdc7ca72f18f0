"""What the benchmarks share: waiting for a peer's port, and the closing
report of targets met and missed."""
from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence


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
