"""Run sdmz-proxy and talk to it the way an operator does: its own binaries,
its control socket, real TCP on loopback. Shared by the proxy tests."""
from __future__ import annotations

import hashlib
import hmac
import os
import random
import secrets
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from cprogram import assert_no_sanitizer_report, build_fixtures

SRC = Path(__file__).resolve().parents[2] / "src" / "streamproxy"


def free_port_block(count: int) -> int:
    """The first of `count` consecutive loopback ports free now."""
    for _ in range(200):
        base = random.randint(20000, 60000 - count)
        socks = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", port))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port block")


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met within %.1fs" % timeout)


def parse_kv(line: str) -> dict[str, str]:
    kind, *pairs = line.split()
    out = {"kind": kind}
    out.update(p.split("=", 1) for p in pairs if "=" in p)
    return out


class Proxy:
    """sdmz-proxy serve with a private config, key, state file and port range."""

    def __init__(self, bindir: Path, workdir: Path, ports: int = 40):
        self.bindir = bindir
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.key = self.dir / "control.key"
        self.key.write_text(secrets.token_hex(32) + "\n")
        self.key.chmod(0o600)
        self.socket = self.dir / "control.sock"
        self.state = self.dir / "requests"
        self.port_min = free_port_block(ports)
        self.port_max = self.port_min + ports - 1
        self.metrics_port = free_port_block(1)
        self.config = self.dir / "proxy.conf"
        self.log = self.dir / "proxy.log"
        self.write_config()
        self.proc: subprocess.Popen | None = None

    def write_config(self, **extra: str) -> None:
        lines = {
            "control_socket": str(self.socket), "key_file": str(self.key),
            "state_file": str(self.state), "metrics_listen": "127.0.0.1:%d" % self.metrics_port,
            "port_range": "%d-%d" % (self.port_min, self.port_max), "workers": "2",
            "log_level": "debug",
        }
        lines.update(extra)
        self.config.write_text("".join("%s = %s\n" % kv for kv in lines.items()))

    def start(self) -> "Proxy":
        self.proc = subprocess.Popen([str(self.bindir / "sdmz-proxy"), "serve", "--config",
                                      str(self.config)], stderr=open(self.log, "ab"),
                                     stdout=subprocess.DEVNULL)
        wait_for(lambda: self.socket.exists() or self.proc.poll() is not None)
        assert self.proc.poll() is None, self.log.read_text()
        return self

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=30)
        self.proc = None
        return rc

    def ctl(self, *args: str, key: Path | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.bindir / "sdmz-streamctl"), "--socket", str(self.socket),
                               "--key-file", str(key or self.key), *args],
                              capture_output=True, text=True, timeout=30, check=False)

    def create(self, rid: str, port: int, target: int, channels: int = 1, allow: str = "127.0.0.0/8",
               side: str = "producer", **extra: str) -> None:
        args = ["create", "--id", rid, "--side", side, "--channels", str(channels),
                "--listen", "127.0.0.1:%d" % port, "--connect", "127.0.0.1:%d" % target,
                "--allow", allow]
        for key, value in extra.items():
            args += ["--" + key.replace("_", "-"), str(value)]
        result = self.ctl(*args)
        assert result.returncode == 0, result.stderr

    def stats(self, rid: str | None = None) -> dict:
        result = self.ctl("stats", *(["--id", rid] if rid else []))
        assert result.returncode == 0, result.stderr
        lines = [parse_kv(line) for line in result.stdout.splitlines()[1:]]
        return {"channels": [l for l in lines if l["kind"] == "channel"],
                "server": next(l for l in lines if l["kind"] == "server")}

    def metrics(self) -> str:
        with socket.create_connection(("127.0.0.1", self.metrics_port), timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        return data.decode()

    def fd_count(self) -> int:
        return len(os.listdir("/proc/%d/fd" % self.proc.pid))

    def rss_kib(self) -> int:
        for line in Path("/proc/%d/status" % self.proc.pid).read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def raw_control(self, line: bytes) -> str:
        """Send one raw control line (for forged and replayed messages)."""
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(str(self.socket))
            s.sendall(line)
            data = b""
            while chunk := s.recv(4096):
                data += chunk
        return data.decode()

    def signed(self, verb: str, *args: str, key: bytes | None = None, ts: int | None = None,
               nonce: str | None = None) -> bytes:
        """A control line built independently of the C code: the protocol, not the code."""
        body = " ".join(["SDMZ1", str(ts if ts is not None else int(time.time())),
                         nonce or secrets.token_hex(16), verb, *args])
        mac = hmac.new(key if key is not None else self.key.read_bytes().strip(), body.encode(),
                       hashlib.sha256).hexdigest()
        return ("%s %s\n" % (body, mac)).encode()


class Sink:
    """A TCP server that keeps every connection's bytes (threads, loopback)."""

    def __init__(self, port: int, read: bool = True):
        import threading
        self.port = port
        self.read = read
        self.received: list[bytes] = []
        self.conns: list[socket.socket] = []
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", port))
        self.server.listen(64)
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        import threading
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with self.lock:
                self.conns.append(conn)
            if self.read:
                threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    def _drain(self, conn: socket.socket):
        chunks = []
        try:
            while chunk := conn.recv(1 << 20):
                chunks.append(chunk)
            data = b"".join(chunks)
            # Answer after EOF: proves the half-close and the reverse direction.
            conn.sendall(b"sha256=" + hashlib.sha256(data).hexdigest().encode())
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            data = b"".join(chunks)
        with self.lock:
            self.received.append(data)
        conn.close()

    def close(self):
        self.server.close()
        with self.lock:
            for c in self.conns:
                try:
                    c.close()
                except OSError:
                    pass


def stalling_listener(port: int) -> socket.socket:
    """A consumer's listening socket with a tiny receive buffer: accepted and
    not read, it stalls the stream as soon as the proxies' buffers fill."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    server.bind(("127.0.0.1", port))
    server.listen(1)
    return server


def send_records(sock: socket.socket, count: int, record: int) -> None:
    """Records 0..count-1, each its 8-byte index repeated; then half-close."""
    for i in range(count):
        sock.sendall(struct.pack("!Q", i) * (record // 8))
    sock.shutdown(socket.SHUT_WR)


def recv_all(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    chunks = []
    while chunk := sock.recv(1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def whole_records(data: bytes, record: int) -> list[int]:
    """The indexes of the records that arrived, each checked whole: a record is
    its 8-byte index repeated (what the drop-oldest tests send)."""
    import struct
    assert len(data) % record == 0, "a torn record arrived"
    indexes = [struct.unpack_from("!Q", data, off)[0] for off in range(0, len(data), record)]
    for off, index in zip(range(0, len(data), record), indexes):
        assert data[off:off + record] == struct.pack("!Q", index) * (record // 8)
    assert indexes == sorted(indexes) and len(set(indexes)) == len(indexes), "reordered"
    return indexes


def send_and_confirm(port: int, payload: bytes) -> str:
    """Send payload, half-close, return what the far end answered."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
    return answer.decode()


# ---- fixtures (imported by the test modules; a second conftest.py would
# shadow tests/conftest.py for the other test folders) ----

builds, bindir = build_fixtures(SRC)


@pytest.fixture
def proxy(bindir, tmp_path):
    p = Proxy(bindir, tmp_path / "proxy").start()
    yield p
    if p.proc is not None:
        rc = p.stop()
        log = p.log_text()
        assert_no_sanitizer_report(log)
        assert rc == 0, log[-2000:]
