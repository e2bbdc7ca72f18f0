"""sdmz-proxy on loopback: real sockets, the real binaries, both builds.
Each test names the behaviour it holds the proxy to."""
from __future__ import annotations

import hashlib
import os
import re
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest

from proxyctl import (Proxy, Sink, bindir, builds, free_port_block, proxy,  # noqa: F401
                      recv_all, send_and_confirm, send_records,
                      stalling_listener, wait_for, whole_records)


def test_relay_mode_carries_bytes_intact_both_ways(bindir):
    """relay: 16 MiB arrive byte for byte; the answer sent after EOF comes back."""
    target, listen = free_port_block(1), free_port_block(1)
    sink = Sink(target)
    relay = subprocess.Popen([str(bindir / "sdmz-proxy"), "relay", "--listen",
                              "127.0.0.1:%d" % listen, "--connect", "127.0.0.1:%d" % target],
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", listen)) == 0)
        payload = os.urandom(16 << 20)
        answer = send_and_confirm(listen, payload)
        assert answer == "sha256=" + hashlib.sha256(payload).hexdigest()
    finally:
        relay.send_signal(signal.SIGTERM)
        _, err = relay.communicate(timeout=20)
        sink.close()
    assert relay.returncode == 0, err
    assert "AddressSanitizer" not in err and "runtime error" not in err, err


def test_small_messages_to_a_stalled_consumer_arrive_whole_and_in_order(bindir):
    """Messages of 512 B are copied, not spliced; when the consumer stalls,
    what the proxy read but could not send waits in its pipe, and after the
    stall every message arrives once, whole and in order."""
    target, listen = free_port_block(1), free_port_block(1)
    consumer_listener = stalling_listener(target)
    relay = subprocess.Popen([str(bindir / "sdmz-proxy"), "relay", "--listen",
                              "127.0.0.1:%d" % listen, "--connect", "127.0.0.1:%d" % target],
                             stderr=subprocess.PIPE, text=True)
    count, record = 20000, 512
    try:
        wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", listen)) == 0)
        consumer_listener.accept()[0].close()   # the relayed connection of that probe
        with socket.create_connection(("127.0.0.1", listen), timeout=30) as producer:
            producer.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sending = threading.Thread(target=send_records, args=(producer, count, record))
            sending.start()
            consumer, _ = consumer_listener.accept()
            time.sleep(1.0)   # the stall: every buffer on the way fills
            data = recv_all(consumer, timeout=30)
            sending.join(timeout=30)
            consumer.close()
    finally:
        relay.send_signal(signal.SIGTERM)
        _, err = relay.communicate(timeout=20)
        consumer_listener.close()
    assert whole_records(data, record) == list(range(count))
    assert "AddressSanitizer" not in err and "runtime error" not in err, err


def voluntary_sleeps(pid: int) -> int:
    """How often the process's threads have blocked (voluntary context switches)."""
    total = 0
    for task in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/status" % (pid, task)) as status:
            total += sum(int(line.split()[1]) for line in status
                         if line.startswith("voluntary_ctxt_switches:"))
    return total


def cpu_seconds(pid: int) -> float:
    with open("/proc/%d/stat" % pid) as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sleeps_during_pingpong(bindir, pid: int, port: int, count: int) -> int:
    """Voluntary sleeps of process pid while count 512 B round trips pass port."""
    before = voluntary_sleeps(pid)
    subprocess.run([str(bindir / "sdmz-msgbench"), "pingpong", "--connect", "127.0.0.1:%d" % port,
                    "--size", "512", "--count", str(count), "--warmup", "0"],
                   check=True, capture_output=True, timeout=60)
    return voluntary_sleeps(pid) - before


@pytest.fixture
def echo_server(bindir):
    port = free_port_block(1)
    echo = subprocess.Popen([str(bindir / "sdmz-msgbench"), "echo", "--listen",
                             "127.0.0.1:%d" % port])
    wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0)
    yield port
    echo.terminate()
    echo.wait(timeout=10)


def test_busy_polling_relay_does_not_sleep_between_messages_and_sleeps_when_idle(
        bindir, echo_server):
    """relay --busy-poll: while messages flow the worker polls instead of
    blocking for each one; idle for longer than the window, it blocks again
    and burns no CPU. A bad value is one error."""
    bad = subprocess.run([str(bindir / "sdmz-proxy"), "relay", "--listen", "127.0.0.1:1",
                          "--connect", "127.0.0.1:2", "--busy-poll", "20000"],
                         capture_output=True, text=True, timeout=10)
    assert bad.returncode == 2 and "--busy-poll: microseconds, 0-10000" in bad.stderr
    port, count = free_port_block(1), 2000
    relay = subprocess.Popen([str(bindir / "sdmz-proxy"), "relay", "--listen",
                              "127.0.0.1:%d" % port, "--connect", "127.0.0.1:%d" % echo_server,
                              "--workers", "1", "--busy-poll", "5000"],
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0)
        sleeps = sleeps_during_pingpong(bindir, relay.pid, port, count)
        time.sleep(0.5)
        idle_start = cpu_seconds(relay.pid)
        time.sleep(1.0)
        idle_cpu = cpu_seconds(relay.pid) - idle_start
    finally:
        relay.send_signal(signal.SIGTERM)
        _, err = relay.communicate(timeout=20)
    assert sleeps < count // 10, "%d sleeps during %d round trips" % (sleeps, count)
    assert idle_cpu < 0.3, "a busy-polling relay with nothing to do used %.2f s of CPU" % idle_cpu
    assert "AddressSanitizer" not in err and "runtime error" not in err, err


def test_busy_poll_us_is_off_by_default_and_a_reload_turns_it_on(proxy, echo_server):
    """serve: with the default busy_poll_us = 0 the worker blocks for every
    request and reply; SIGHUP with busy_poll_us = 5000 applies to running
    workers and their live connections."""
    port, count = proxy.port_min, 2000
    proxy.create("pp", port, echo_server)
    assert sleeps_during_pingpong(proxy.bindir, proxy.proc.pid, port, count) >= count
    proxy.write_config(busy_poll_us="5000")
    proxy.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "busy_poll_us" in proxy.log_text())
    sleeps = sleeps_during_pingpong(proxy.bindir, proxy.proc.pid, port, count)
    assert sleeps < count // 10, "%d sleeps during %d round trips" % (sleeps, count)


def test_requests_are_created_listed_and_counted(proxy):
    target = free_port_block(2)
    sinks = [Sink(target), Sink(target + 1)]
    proxy.create("beam", proxy.port_min, target, channels=2)
    listed = proxy.ctl("--json", "list")
    assert '"id": "beam"' in listed.stdout and '"channels": 2' in listed.stdout
    payloads = [os.urandom(3 << 20), os.urandom(1 << 20)]
    for channel, payload in enumerate(payloads):
        answer = send_and_confirm(proxy.port_min + channel, payload)
        assert answer == "sha256=" + hashlib.sha256(payload).hexdigest()
    stats = wait_for(lambda: (s := proxy.stats("beam")) and
                     all(c["conns"] == "0" for c in s["channels"]) and s)
    assert [int(c["bytes_forward"]) for c in stats["channels"]] == [len(p) for p in payloads]
    assert all(int(c["bytes_reverse"]) == 71 for c in stats["channels"])  # "sha256=" + 64 hex
    metrics = proxy.metrics()
    assert 'sdmz_proxy_bytes_forward_total{request="beam",channel="0"} %d' % len(payloads[0]) in metrics
    # The same create again changes nothing; a different one is refused.
    again = proxy.ctl("create", "--id", "beam", "--side", "producer", "--channels", "2", "--listen",
                      "127.0.0.1:%d" % proxy.port_min, "--connect", "127.0.0.1:%d" % target,
                      "--allow", "127.0.0.0/8")
    assert again.returncode == 0 and again.stdout.startswith("ok unchanged")
    other = proxy.ctl("create", "--id", "beam", "--side", "producer", "--channels", "3", "--listen",
                      "127.0.0.1:%d" % proxy.port_min, "--connect", "127.0.0.1:%d" % target,
                      "--allow", "127.0.0.0/8")
    assert other.returncode == 1 and "exists with other settings" in other.stderr
    for sink in sinks:
        sink.close()


def test_bad_requests_get_one_message_naming_the_key(proxy):
    base = ["create", "--id", "x", "--side", "producer", "--channels", "1",
            "--connect", "127.0.0.1:9", "--allow", "127.0.0.0/8"]
    outside = proxy.ctl(*base, "--listen", "127.0.0.1:%d" % (proxy.port_max + 1))
    assert outside.returncode == 1
    assert "outside the configured port_range" in outside.stderr
    unresolved = proxy.ctl(*base, "--listen", "gw1.example.org:%d" % proxy.port_min)
    assert unresolved.returncode == 1 and "listen:" in unresolved.stderr
    assert proxy.ctl("list").stdout.startswith("ok 0 request(s)")


def test_a_source_not_in_the_request_is_closed_and_counted(proxy):
    target = free_port_block(1)
    sink = Sink(target)
    proxy.create("narrow", proxy.port_min, target, allow="127.0.0.2/32")
    with socket.create_connection(("127.0.0.1", proxy.port_min), timeout=5) as s:
        s.settimeout(5)
        try:
            assert s.recv(1) == b""
        except ConnectionResetError:
            pass
    stats = wait_for(lambda: (s := proxy.stats())["server"]["rejected_source"] == "1" and s)
    assert stats["channels"][0]["conns_total"] == "0"
    assert sink.conns == []  # never relayed: not an open relay
    assert re.search(r"narrow ch0: refused 127\.0\.0\.1:\d+: source not in the request's allow list",
                     proxy.log_text())
    assert 'sdmz_proxy_rejected_total{reason="source"} 1' in proxy.metrics()
    sink.close()


def test_ports_without_a_request_refuse_connections(proxy):
    target = free_port_block(1)
    proxy.create("short", proxy.port_min, target)
    assert proxy.ctl("release", "--id", "short").returncode == 0
    for port in (proxy.port_min, proxy.port_min + 1):
        assert socket.socket().connect_ex(("127.0.0.1", port)) != 0


def test_forged_replayed_and_stale_control_messages_are_refused(proxy):
    valid = proxy.signed("list")
    assert proxy.raw_control(valid).startswith("ok")
    assert proxy.raw_control(valid).startswith("error replay")
    forged = proxy.signed("create", "id=evil", key=b"not-the-key-0123456789")
    assert proxy.raw_control(forged).startswith("error bad_hmac")
    stale = proxy.signed("list", ts=int(time.time()) - 3600)
    assert proxy.raw_control(stale).startswith("error stale")
    assert proxy.raw_control(b"create id=x\n").startswith("error malformed")
    server = proxy.stats()["server"]
    assert (server["control_bad_hmac"], server["control_replay"], server["control_stale"],
            server["control_malformed"]) == ("1", "1", "1", "1")
    log = proxy.log_text()
    assert "bad_hmac: HMAC does not match the control key" in log
    assert "replay: nonce already used (replayed message)" in log
    assert proxy.ctl("list").stdout.startswith("ok 0 request(s)")


def test_consumer_vanishing_and_producer_reset_close_the_pair(proxy):
    target = free_port_block(1)
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", target))
    server.listen(4)
    proxy.create("faults", proxy.port_min, target)

    # The consumer vanishes: the producer's connection is closed too.
    producer = socket.create_connection(("127.0.0.1", proxy.port_min), timeout=5)
    consumer, _ = server.accept()
    producer.sendall(b"x" * 1000)
    assert consumer.recv(1000)
    consumer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    consumer.close()  # RST
    producer.settimeout(5)
    # Writing on must fail: a producer still writable after its consumer
    # vanished would fill the proxy's buffer and then time out instead.
    with pytest.raises((ConnectionResetError, BrokenPipeError)):
        for _ in range(200):
            producer.sendall(b"y" * 65536)
            time.sleep(0.01)
    producer.close()

    # The producer resets: the consumer sees its connection end.
    producer = socket.create_connection(("127.0.0.1", proxy.port_min), timeout=5)
    consumer, _ = server.accept()
    producer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    producer.close()
    consumer.settimeout(5)
    try:
        assert consumer.recv(10) == b""
    except ConnectionResetError:
        pass
    consumer.close()
    server.close()
    wait_for(lambda: proxy.stats()["server"]["connections"] == "0")
    log = proxy.log_text()
    assert "faults ch0: target side reset" in log or "faults ch0: relay ended" in log
    assert "faults ch0: client side reset" in log or "faults ch0: relay ended" in log


def test_connection_limits_are_enforced(proxy):
    target = free_port_block(1)
    sink = Sink(target, read=False)
    proxy.create("limited", proxy.port_min, target, max_conns=2)
    held = [socket.create_connection(("127.0.0.1", proxy.port_min)) for _ in range(2)]
    wait_for(lambda: proxy.stats()["server"]["connections"] == "2")
    extra = socket.create_connection(("127.0.0.1", proxy.port_min), timeout=5)
    extra.settimeout(5)
    try:
        assert extra.recv(1) == b""
    except ConnectionResetError:
        pass
    assert wait_for(lambda: proxy.stats()["server"]["rejected_limit"] == "1")
    assert "limited ch0: refused" in proxy.log_text()
    for s in held + [extra]:
        s.close()
    sink.close()


def test_buffer_resizes_live_without_dropping_the_connection(proxy):
    target = free_port_block(1)
    sink = Sink(target)
    proxy.create("resize", proxy.port_min, target, buffer="64K")
    first, second = os.urandom(4 << 20), os.urandom(4 << 20)
    with socket.create_connection(("127.0.0.1", proxy.port_min), timeout=20) as s:
        s.sendall(first)
        before = wait_for(lambda: proxy.stats()["channels"][0]["buffer_capacity"] != "0" and
                          proxy.stats()["channels"][0]["buffer_capacity"])
        assert proxy.ctl("update", "--id", "resize", "--buffer", "512K").returncode == 0
        after = wait_for(lambda: (c := proxy.stats()["channels"][0]["buffer_capacity"]) != before and c)
        assert int(after) == 512 * 1024 and int(before) == 64 * 1024
        s.sendall(second)
        s.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
    assert answer.decode() == "sha256=" + hashlib.sha256(first + second).hexdigest()
    assert proxy.stats()["channels"][0]["conns_total"] == "1"
    sink.close()


def test_drop_oldest_discards_whole_records_and_counts_them(proxy):
    """A stalled consumer: the producer is never blocked, whole records are
    dropped and counted, and what arrives is intact records in order."""
    record = 1024
    target = free_port_block(1)
    server = stalling_listener(target)
    proxy.create("lossy", proxy.port_min, target, buffer="64K", policy="drop-oldest", record=record)
    producer = socket.create_connection(("127.0.0.1", proxy.port_min), timeout=10)
    consumer, _ = server.accept()  # accepted, not read: the consumer stalls
    count = 16384  # 16 MiB, far more than every buffer on the path
    send_records(producer, count, record)  # never blocks for long
    stats = wait_for(lambda: (c := proxy.stats()["channels"][0]) and int(c["dropped_bytes"]) > 0 and c)
    assert int(stats["overflow_events"]) > 0
    indexes = whole_records(recv_all(consumer, 10), record)
    assert indexes[-1] == count - 1  # the newest data survives
    final = proxy.stats()["channels"][0]
    assert int(final["dropped_bytes"]) == (count - len(indexes)) * record
    producer.close()
    consumer.close()
    server.close()


def test_rate_is_enforced_with_kernel_pacing(proxy):
    """rate=40M over 1 channel: 5 MB cannot arrive faster than the rate allows
    (an upper bound: a slow machine only makes it slower)."""
    target = free_port_block(1)
    sink = Sink(target)
    proxy.create("paced", proxy.port_min, target, rate="40M")
    payload = os.urandom(5_000_000)
    start = time.monotonic()
    answer = send_and_confirm(proxy.port_min, payload)
    elapsed = time.monotonic() - start
    assert answer == "sha256=" + hashlib.sha256(payload).hexdigest()
    achieved = len(payload) * 8 / elapsed
    assert achieved < 40e6 * 1.3, "%.1f Mbit/s through a 40 Mbit/s request" % (achieved / 1e6)
    sink.close()


def test_restart_restores_requests_and_releases_every_port(proxy):
    target = free_port_block(2)
    sinks = [Sink(target), Sink(target + 1)]
    proxy.create("durable", proxy.port_min, target, channels=2)
    held = socket.create_connection(("127.0.0.1", proxy.port_min))
    assert proxy.stop() == 0
    assert not proxy.socket.exists()
    for port in (proxy.port_min, proxy.port_min + 1):  # every port released
        assert socket.socket().connect_ex(("127.0.0.1", port)) != 0
        s = socket.socket()  # and free to listen on, as a restarted daemon does
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen(1)
        s.close()
    held.close()
    proxy.start()
    assert "durable" in proxy.ctl("list").stdout
    payload = os.urandom(1 << 20)
    assert send_and_confirm(proxy.port_min + 1, payload) == \
        "sha256=" + hashlib.sha256(payload).hexdigest()
    assert "restored 1 request(s)" in proxy.log_text()
    for sink in sinks:
        sink.close()


def test_sighup_reloads_the_key_and_a_bad_config_keeps_the_running_one(proxy):
    old_key = proxy.key.read_bytes().strip()
    proxy.key.write_text("a-new-control-key-for-rotation\n")
    proxy.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "reloaded" in proxy.log_text())
    assert proxy.raw_control(proxy.signed("list", key=old_key)).startswith("error bad_hmac")
    assert proxy.ctl("list").returncode == 0
    proxy.config.write_text(proxy.config.read_text() + "bogus = 1\n")
    proxy.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "reload failed" in proxy.log_text())
    assert "bogus: unknown key" in proxy.log_text()
    assert proxy.ctl("list").returncode == 0
    assert "sdmz_proxy_reloads_total 1" in proxy.metrics()


def test_bad_config_is_one_error_and_nothing_starts(bindir, tmp_path):
    config = tmp_path / "bad.conf"
    config.write_text("control_socket = %s\nport_range = 5199-5100\n" % (tmp_path / "c.sock"))
    check = subprocess.run([str(bindir / "sdmz-proxy"), "check", "--config", str(config)],
                           capture_output=True, text=True, check=False)
    assert check.returncode == 2
    assert check.stderr.strip() == "sdmz-proxy: %s: line 2: port_range: LOW-HIGH, 1-65535" % config
    serve = subprocess.run([str(bindir / "sdmz-proxy"), "serve", "--config", str(config)],
                           capture_output=True, text=True, check=False, timeout=10)
    assert serve.returncode == 2 and "line 2: port_range" in serve.stderr
    assert not (tmp_path / "c.sock").exists()


def test_ten_thousand_connects_leak_no_fd_or_memory(proxy, bindir):
    target = free_port_block(1)
    sink = Sink(target)
    proxy.create("churn", proxy.port_min, target)

    def churn(n):
        for _ in range(n):
            with socket.create_connection(("127.0.0.1", proxy.port_min), timeout=10) as s:
                s.sendall(b"ping")
                s.shutdown(socket.SHUT_WR)
                s.recv(128)

    churn(500)  # warm-up: allocator pools, epoll tables
    wait_for(lambda: proxy.stats()["server"]["connections"] == "0")
    fds, rss = proxy.fd_count(), proxy.rss_kib()
    churn(9500)
    wait_for(lambda: proxy.stats()["server"]["connections"] == "0")
    assert proxy.fd_count() == fds
    if bindir.name == "build":  # ASan's quarantine grows RSS by design; its leak check runs at exit
        assert proxy.rss_kib() - rss < 4096, (rss, proxy.rss_kib())
    assert proxy.stats("churn")["channels"][0]["conns_total"] == "10000"
    sink.close()
