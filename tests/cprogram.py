"""What the tests of every C program share: the release and sanitizer builds
as fixtures, the C unit tests, the bounded fuzz run, and the sanitizer check
of a log. Each program's helper module binds them to its source folder:
    builds, bindir = build_fixtures(SRC)"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SANITIZER_MARKS = ("AddressSanitizer", "LeakSanitizer", "runtime error:")
BUILDS = {"release": "build", "asan": "build-asan"}


def assert_no_sanitizer_report(text: str) -> None:
    """Sanitizer reports (leaks included, at exit) fail the test that caused them."""
    assert not any(mark in text for mark in SANITIZER_MARKS), text[-4000:]


def build_fixtures(src: Path):
    """`builds` (make all asan, once a session) and `bindir` (each test runs
    against the release build and the sanitizer build)."""

    @pytest.fixture(scope="session")
    def builds() -> None:
        result = subprocess.run(["make", "-C", str(src), "all", "asan"], capture_output=True,
                                text=True, timeout=600, check=False)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    @pytest.fixture(params=list(BUILDS.values()), ids=list(BUILDS))
    def bindir(request, builds) -> Path:
        return src / request.param

    return builds, bindir


def check_unit_tests(src: Path, build: str) -> None:
    result = subprocess.run([str(src / build / "unit-tests")], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert ", 0 failed" in result.stdout


def run_fuzz(src: Path, seconds: int = 15) -> str:
    """`make fuzz` for a bounded time; its libFuzzer output (stderr)."""
    result = subprocess.run(["make", "-C", str(src), "fuzz", f"FUZZ_SECONDS={seconds}"],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stderr
