"""Fixtures for the stream proxy tests: both builds (release, and
AddressSanitizer + UBSan), each test with its own running sdmz-proxy."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from proxyctl import SRC, Proxy  # noqa: E402

SANITIZER_MARKS = ("AddressSanitizer", "LeakSanitizer", "runtime error:")


@pytest.fixture(scope="session")
def builds() -> None:
    result = subprocess.run(["make", "-C", str(SRC), "all", "asan"], capture_output=True,
                            text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


@pytest.fixture(params=["build", "build-asan"], ids=["release", "asan"])
def bindir(request, builds) -> Path:
    return SRC / request.param


@pytest.fixture
def proxy(bindir, tmp_path):
    p = Proxy(bindir, tmp_path / "proxy").start()
    yield p
    if p.proc is not None:
        rc = p.stop()
        log = p.log_text()
        # Sanitizer reports (leaks included, at exit) fail the test that caused them.
        assert not any(mark in log for mark in SANITIZER_MARKS), log[-4000:]
        assert rc == 0, log[-2000:]
