"""The interop matrix: globus-url-copy against sdmz-xferd, and sdmz-xfer
against globus-gridftp-server, at -p 1, 4 and 8, with files of 0 B, 1 B,
32 KiB, 64 MiB and a directory tree, in both directions; every result is
checksummed. Then sdmz-xfer against sdmz-xferd, with pipelined small files."""
from __future__ import annotations

import json
import os

import pytest

from cprogram import check_unit_tests, run_fuzz
from xferctl import (SRC, TOKEN, Xferd, bindir, builds, area, xferd, gridftp, guc,  # noqa: F401
                     make_files, sha256, tree_digest, writable_dir, xfer)

FILES = ("zero", "one", "k32", "m64")


@pytest.mark.parametrize("build", ["build", "build-asan"], ids=["release", "asan"])
def test_c_unit_tests(builds, build):
    check_unit_tests(SRC, build)


def test_fuzz_control_parser_runs_clean_for_a_bounded_time():
    assert "Done " in run_fuzz(SRC)


@pytest.mark.parametrize("streams", [1, 4, 8])
def test_globus_url_copy_gets_and_puts_against_sdmz_xferd(xferd, area, streams):
    src = make_files(area / "src")
    got = area / "got"
    got.mkdir()
    up = writable_dir(area / "up")
    for name in FILES:
        r = guc("-p", str(streams), xferd.url(src[name]), f"file://{got / name}")
        assert r.returncode == 0, f"get {name}: {r.stdout}{r.stderr}"
        assert sha256(got / name) == sha256(src[name]), name
        # Writes need a token login; globus-url-copy takes it from the URL.
        r = guc("-p", str(streams), f"file://{src[name]}", xferd.url(up / name, f"alice:{TOKEN}"))
        assert r.returncode == 0, f"put {name}: {r.stdout}{r.stderr}"
        assert sha256(up / name) == sha256(src[name]), name
    r = guc("-r", "-cd", "-p", str(streams), xferd.url(f"{src['tree']}/"), f"file://{got}/tree/")
    assert r.returncode == 0, r.stdout + r.stderr
    assert tree_digest(got / "tree") == tree_digest(src["tree"])
    # One GridFTP transfer-log line per file, with a RETRANS entry per stream.
    lines = xferd.transfer_log.read_text().splitlines()
    m64 = [line for line in lines if f"FILE={src['m64']} " in line and "TYPE=RETR" in line]
    assert len(m64) == 1 and f"STREAMS={streams} " in m64[0] and "CODE=226" in m64[0]
    assert len(m64[0].split("RETRANS=")[1].split(",")) == streams
    assert "NBYTES=67108864 " in m64[0]


@pytest.mark.parametrize("streams", [1, 4, 8])
def test_globus_url_copy_puts_a_tree_to_sdmz_xferd(xferd, area, streams):
    """Over cached channels, file after file (an empty one among them): each
    transfer ends only when its last stream's EOD is in."""
    src = make_files(area / "src")
    up = writable_dir(area / "up")
    for attempt in range(5):
        target = up / f"tree{attempt}"
        r = guc("-r", "-cd", "-p", str(streams), f"file://{src['tree']}/",
                xferd.url(f"{target}/", f"alice:{TOKEN}"), timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        assert tree_digest(target) == tree_digest(src["tree"])


@pytest.mark.parametrize("streams", [1, 4, 8])
def test_sdmz_xfer_gets_and_puts_against_globus_gridftp_server(builds, gridftp, area, streams):
    bindir = SRC / "build"
    src = make_files(area / "src")
    got = area / "got"
    got.mkdir()
    up = writable_dir(area / "up")
    journal = area / "journal"
    for name in FILES:
        r = xfer(bindir, "-p", str(streams), "--verify", "sha256", "--json",
                 gridftp.url(src[name]), str(got / name), journal=journal)
        assert r.returncode == 0, f"get {name}: {r.stderr}"
        summary = json.loads(r.stdout)
        assert summary["ok"] and summary["verified"] and summary["bytes"] == src[name].stat().st_size
        assert sha256(got / name) == sha256(src[name]), name
        r = xfer(bindir, "-p", str(streams), "--verify", "md5", str(src[name]),
                 gridftp.url(up / name), journal=journal)
        assert r.returncode == 0, f"put {name}: {r.stderr}"
        assert sha256(up / name) == sha256(src[name]), name
    r = xfer(bindir, "-p", str(streams), "--verify", "adler32", gridftp.url(src["tree"]),
             str(got / "tree"), journal=journal)
    assert r.returncode == 0, r.stderr
    assert tree_digest(got / "tree") == tree_digest(src["tree"])
    r = xfer(bindir, "-p", str(streams), str(src["tree"]), gridftp.url(up / "tree"),
             journal=journal)
    assert r.returncode == 0, r.stderr
    assert tree_digest(up / "tree") == tree_digest(src["tree"])
    assert list(journal.iterdir()) == []   # finished transfers leave no journal


def test_sdmz_xfer_pipelines_many_small_files_against_sdmz_xferd(xferd, area):
    src = area / "many"
    src.mkdir()
    for i in range(300):
        (src / f"f{i:04d}").write_bytes(os.urandom(32 << 10))
    got = area / "got"
    r = xfer(xferd.bindir, "-p", "4", "--verify", "sha256", "--json", xferd.url(src), str(got),
             journal=area / "journal")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["files"] == 300
    assert tree_digest(got) == tree_digest(src)
    up = area / "up"
    up.mkdir()
    r = xfer(xferd.bindir, "-p", "4", "--json", str(src), xferd.url(up, user="alice"),
             journal=area / "journal")
    assert r.returncode == 0, r.stderr
    assert tree_digest(up / "many") == tree_digest(src)
    log = xferd.transfer_log.read_text()
    assert log.count(" TYPE=STOR CODE=226 ") == 300 and log.count(" CODE=226 ") == 600
    # The transfer log holds the record: good transfers stay out of the journal.
    assert " STOR " not in xferd.log_text()


def test_a_get_into_dev_null_moves_every_byte_and_keeps_no_journal(xferd, area, tmp_path):
    """A memory-to-/dev/null get (as with globus-url-copy ... file:///dev/null)
    moves the file; there is nothing to truncate, sync or journal, and
    --verify, which reads the copy back, is refused before anything moves."""
    src = area / "m8"
    src.write_bytes(os.urandom(8 << 20))
    journal = tmp_path / "journal"
    r = xfer(xferd.bindir, "-p", "4", "--json", xferd.url(src), "/dev/null", journal=journal)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["bytes"] == 8 << 20
    assert not journal.exists() or not list(journal.iterdir())
    r = xfer(xferd.bindir, "--verify", "sha256", xferd.url(src), "/dev/null", journal=journal)
    assert r.returncode == 2
    assert "/dev/null: --verify reads the copy back, and this is not a regular file" in r.stderr


def test_a_narrow_data_port_range_serves_many_listings(bindir, area, tmp_path):
    """Each directory listing takes a passive port and leaves it in TIME_WAIT;
    three ports must still serve a tree of twelve directories, twice."""
    tree = area / "wide"
    for i in range(12):
        (tree / f"d{i}").mkdir(parents=True)
        (tree / f"d{i}" / "f").write_bytes(os.urandom(100))
    server = Xferd(bindir, area, tmp_path / "xferd", "--data-ports", "47010-47012").start()
    try:
        for run in range(2):
            done = xfer(bindir, server.url(tree), str(tmp_path / f"copy{run}"))
            assert done.returncode == 0, done.stderr
            assert tree_digest(tmp_path / f"copy{run}") == tree_digest(tree)
    finally:
        assert server.stop() == 0
