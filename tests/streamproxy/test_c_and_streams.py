"""The C unit tests and fuzz harnesses, and pyzmq pipelines (the SciStream
paper's PUSH/PULL and PUB/SUB) through two chained proxies on loopback."""
from __future__ import annotations

import signal
import socket
import subprocess
import time

import pytest
import zmq

from cprogram import check_unit_tests, run_fuzz
from proxyctl import SRC, bindir, builds, free_port_block, wait_for  # noqa: F401


@pytest.mark.parametrize("build", ["build", "build-asan"], ids=["release", "asan"])
def test_c_unit_tests(builds, build):
    check_unit_tests(SRC, build)


def test_fuzz_harnesses_run_clean_for_a_bounded_time():
    """libFuzzer on the control-message and config parsers (ASan + UBSan)."""
    assert run_fuzz(SRC).count("Done ") == 2


@pytest.fixture
def two_hops(bindir):
    """consumer port <- hop2 <- hop1 <- producer: the gw1 -> gw2 path in miniature."""
    consumer, hop2, hop1 = free_port_block(1), free_port_block(1), free_port_block(1)
    procs = [subprocess.Popen([str(bindir / "sdmz-proxy"), "relay", "--listen",
                               "127.0.0.1:%d" % listen, "--connect", "127.0.0.1:%d" % target],
                              stderr=subprocess.PIPE, text=True)
             for listen, target in ((hop2, consumer), (hop1, hop2))]
    wait_for(lambda: all(socket.socket().connect_ex(("127.0.0.1", p)) == 0 for p in (hop1, hop2)))
    yield consumer, hop1
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0 and "Sanitizer" not in err, err


def test_pyzmq_push_pull_through_two_proxies(two_hops):
    consumer_port, entry_port = two_hops
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind("tcp://127.0.0.1:%d" % consumer_port)
    push = ctx.socket(zmq.PUSH)
    push.connect("tcp://127.0.0.1:%d" % entry_port)
    messages = [("%06d:" % i).encode() + bytes([i % 251]) * (i % 5000) for i in range(3000)]
    for m in messages:
        push.send(m)
    pull.setsockopt(zmq.RCVTIMEO, 20000)
    received = [pull.recv() for _ in messages]
    assert received == messages  # every message, intact and in order
    ctx.destroy(linger=0)


def test_pyzmq_pub_sub_through_two_proxies(two_hops):
    consumer_port, entry_port = two_hops
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVHWM, 0)  # PUB/SUB drop at the high-water mark by design:
    sub.bind("tcp://127.0.0.1:%d" % consumer_port)
    sub.setsockopt(zmq.SUBSCRIBE, b"frame")
    sub.setsockopt(zmq.RCVTIMEO, 200)
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.SNDHWM, 0)  # unbounded here, so any loss would be the proxies'
    pub.connect("tcp://127.0.0.1:%d" % entry_port)
    # PUB drops until the subscription has crossed both hops: wait for it.
    deadline = time.monotonic() + 20
    while True:
        pub.send(b"frame-hello")
        try:
            if sub.recv() == b"frame-hello":
                break
        except zmq.Again:
            assert time.monotonic() < deadline, "subscription never crossed the proxies"
    while True:  # drain the remaining hellos
        try:
            sub.recv()
        except zmq.Again:
            break
    frames = [b"frame%05d" % i + b"x" * 4096 for i in range(2000)]
    for f in frames:
        pub.send(f)
    sub.setsockopt(zmq.RCVTIMEO, 20000)
    assert [sub.recv() for _ in frames] == frames
    ctx.destroy(linger=0)
