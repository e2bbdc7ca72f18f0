"""Helpers for the transfer daemon tests: builds, a running sdmz-xferd, a
running globus-gridftp-server, the clients, and file fixtures."""
from __future__ import annotations

import contextlib
import hashlib
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from cprogram import assert_no_sanitizer_report, build_fixtures

SRC = Path(__file__).resolve().parents[2] / "src" / "transferd"
TOKEN = "t0ken-for-tests"


def free_port() -> int:
    for _ in range(200):
        port = random.randint(20000, 45000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {port}")


def shared_dir() -> Path:
    """A directory the anonymous GridFTP user (nobody) can read and write:
    pytest's tmp_path sits under a 0700 directory."""
    path = Path(tempfile.mkdtemp(prefix="sdmz-xfer-", dir="/tmp"))
    path.chmod(0o777)
    return path


def writable_dir(path: Path) -> Path:
    """A new folder the anonymous GridFTP user (nobody) can write in: mkdir
    honours the umask."""
    path.mkdir()
    path.chmod(0o777)
    return path


def make_files(where: Path) -> dict[str, Path]:
    """0 B, 1 B, 32 KiB, 64 MiB and a small tree."""
    where.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, size in (("zero", 0), ("one", 1), ("k32", 32 << 10), ("m64", 64 << 20)):
        path = where / name
        path.write_bytes(os.urandom(size))
        files[name] = path
    tree = where / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "top").write_bytes(os.urandom(1000))
    (tree / "a" / "mid").write_bytes(os.urandom(70000))
    (tree / "a" / "b" / "deep").write_bytes(os.urandom(5))
    (tree / "a" / "b" / "empty").write_bytes(b"")
    files["tree"] = tree
    for p in [where, *where.rglob("*")]:
        p.chmod(0o777 if p.is_dir() else 0o666)
    return files


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): sha256(p) for p in sorted(root.rglob("*")) if p.is_file()}


class Xferd:
    def __init__(self, bindir: Path, root: Path, workdir: Path, *extra: str):
        self.bindir, self.root, self.workdir = bindir, root, workdir
        self.port = free_port()
        self.extra = extra
        self.token_file = workdir / "tokens"
        self.transfer_log = workdir / "transfer.log"
        self.stderr_path = workdir / "xferd.stderr"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Xferd":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.token_file.write_text(f"# test tokens\nalice {TOKEN}\n")
        self.token_file.chmod(0o600)
        self.proc = subprocess.Popen(
            [str(self.bindir / "sdmz-xferd"), "--root", str(self.root),
             "--listen", f"127.0.0.1:{self.port}", "--data-ports", "46000-46999",
             "--anonymous-read", "--token-file", str(self.token_file),
             "--log", str(self.transfer_log), "--marker-interval", "1", *self.extra],
            stdout=subprocess.DEVNULL, stderr=open(self.stderr_path, "w"))
        wait_port(self.port)
        return self

    def url(self, path: Path | str, user: str = "") -> str:
        return f"ftp://{user + '@' if user else ''}127.0.0.1:{self.port}{path}"

    def log_text(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.terminate()
        rc = self.proc.wait(timeout=30)
        self.proc = None
        return rc


class GridFtpServer:
    """globus-gridftp-server, anonymous on loopback, as sites run it."""

    def __init__(self):
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    def start(self) -> "GridFtpServer":
        exe = shutil.which("globus-gridftp-server")
        assert exe, "globus-gridftp-server is missing: make setup installs it"
        self.proc = subprocess.Popen(
            [exe, "-aa", "-anonymous-user", "nobody", "-p", str(self.port),
             "-control-interface", "127.0.0.1", "-data-interface", "127.0.0.1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)
        return self

    def url(self, path: Path | str) -> str:
        return f"ftp://127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.terminate()
        self.proc.wait(timeout=30)


def xfer_command(bindir: Path, *args: str, journal: Path | None = None) -> list[str]:
    cmd = [str(bindir / "sdmz-xfer")]
    if journal is not None:
        cmd += ["--journal-dir", str(journal)]
    return [*cmd, *args]


def xfer_env(env: dict | None = None) -> dict:
    return dict(os.environ, SDMZ_XFER_TOKEN=TOKEN, **(env or {}))


def xfer(bindir: Path, *args: str, env: dict | None = None, timeout: float = 60,
         journal: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(xfer_command(bindir, *args, journal=journal), capture_output=True,
                          text=True, timeout=timeout, env=xfer_env(env), check=False)


def guc(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    exe = shutil.which("globus-url-copy")
    assert exe, "globus-url-copy is missing: make setup installs it"
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


builds, bindir = build_fixtures(SRC)


@pytest.fixture
def area():
    path = shared_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def serving(server: Xferd):
    """Runs the server; afterwards, unless a test stopped it itself, it must
    stop cleanly and its log must carry no sanitizer report."""
    server.start()
    yield server
    if server.proc is not None:
        rc = server.stop()
        log = server.log_text()
        assert_no_sanitizer_report(log)
        assert rc == 0, log[-2000:]


@pytest.fixture
def xferd(bindir, area, tmp_path):
    with serving(Xferd(bindir, area, tmp_path / "xferd")) as server:
        yield server


@pytest.fixture
def gridftp():
    server = GridFtpServer().start()
    yield server
    server.stop()
