"""Kill and resume. A transfer killed with SIGKILL on either side, mid-file
or mid-directory, continues with --resume without sending again what the
receiver durably holds, and the result's checksum equals the source's.
Data the journal does not vouch for (a torn chunk) is sent again; a journal
that no longer matches its file is not trusted. A get that fails part-way
leaves the local files whose turn had not come as they were.

The sender is paced (--pacing-rate on the server, --rate on the client) so
that there is a middle of the transfer to kill it in."""
from __future__ import annotations

import ftplib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cprogram import assert_no_sanitizer_report
from xferctl import (SRC, TOKEN, GridFtpServer, Xferd, area,  # noqa: F401
                     bindir, builds, serving, xferd,
                     sha256, tree_digest, xfer, xfer_command, xfer_env)

SIZE = 64 << 20
PACE = "16M"          # per stream; with -p 4 the file takes about 8 s


def journal_ranges(journal_dir: Path) -> list[tuple[int, int]]:
    """The ranges of the one journal in journal_dir, [] if there is none yet."""
    ranges = []
    for path in journal_dir.glob("*.journal"):
        for line in path.read_text().splitlines():
            if line.startswith("ranges "):
                for part in line[7:].split(","):
                    start, end = part.split("-")
                    ranges.append((int(start), int(end)))
    return ranges


def finished_files(journal_dir: Path) -> int:
    """Files the transfer's done log lists as finished."""
    return sum(len(path.read_text().split()) for path in journal_dir.glob("*.done"))


def start_client(bindir: Path, journal: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(xfer_command(bindir, "-p", "4", *args, journal=journal),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=xfer_env())


def wait_for_journal(journal: Path, proc: subprocess.Popen, least: int,
                     timeout: float = 30) -> list[tuple[int, int]]:
    """Waits until the journal vouches for at least `least` bytes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ranges = journal_ranges(journal)
        if sum(end - start for start, end in ranges) >= least:
            return ranges
        assert proc.poll() is None, "the transfer ended before it could be killed: " + \
            proc.communicate()[1]
        time.sleep(0.05)
    raise TimeoutError(f"no journal of {least} bytes in {journal}")


def session_pid(server: Xferd) -> int:
    """The forked process serving the one open session."""
    assert server.proc is not None
    children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children").read_text()
    pids = [int(pid) for pid in children.split()]
    assert len(pids) == 1, pids
    return pids[0]


def resume(bindir: Path, journal: Path, *args: str) -> dict:
    done = xfer(bindir, "-p", "4", "--resume", "--verify", "sha256", "--json", *args,
                journal=journal, timeout=120)
    assert done.returncode == 0, done.stderr
    assert_no_sanitizer_report(done.stderr)
    assert not list(journal.iterdir()), "a finished transfer leaves no journal"
    return json.loads(done.stdout)


@pytest.fixture
def paced_xferd(bindir, area, tmp_path):
    with serving(Xferd(bindir, area, tmp_path / "xferd", "--pacing-rate", PACE)) as server:
        yield server


@pytest.fixture
def big(area) -> Path:
    path = area / "big"
    path.write_bytes(os.urandom(SIZE))
    path.chmod(0o666)
    return path


def test_client_killed_mid_get_resumes(bindir, paced_xferd, big, tmp_path):
    journal, local = tmp_path / "journal", tmp_path / "big"
    proc = start_client(bindir, journal, paced_xferd.url(big), str(local))
    held = wait_for_journal(journal, proc, 8 << 20)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert sum(end - start for start, end in held) < SIZE

    summary = resume(bindir, journal, paced_xferd.url(big), str(local))
    assert sha256(local) == sha256(big)
    assert 0 < summary["bytes"] <= SIZE - sum(end - start for start, end in held)


def test_a_run_without_resume_starts_over_and_removes_stale_journals(bindir, paced_xferd, big,
                                                                     area, tmp_path):
    """A killed run's journal, and a half-written temporary one, describe a
    file that a run without --resume replaces: that run must send it whole
    and leave neither behind. The rerun is unpaced, so it is over before the
    server's first marker: only the removal at the start can clear them."""
    journal, target = tmp_path / "journal", area / "stored"
    url = paced_xferd.url(target, user="alice")
    proc = start_client(bindir, journal, "--rate", PACE, str(big), url)
    wait_for_journal(journal, proc, 8 << 20)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    [stale] = journal.glob("*.journal")
    Path(f"{stale}.tmp").write_text("size 1\nranges 0-")

    done = xfer(bindir, "-p", "4", "--json", str(big), url, journal=journal, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sha256(target) == sha256(big)
    assert json.loads(done.stdout)["bytes"] == SIZE, "the whole file moves again"
    assert not list(journal.iterdir()), "no journal is left behind"


def test_client_killed_mid_put_resumes(bindir, paced_xferd, big, area, tmp_path):
    journal, target = tmp_path / "journal", area / "stored"
    url = paced_xferd.url(target, user="alice")
    proc = start_client(bindir, journal, "--rate", PACE, str(big), url)
    held = wait_for_journal(journal, proc, 8 << 20)   # from the server's 111 markers
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    summary = resume(bindir, journal, str(big), url)
    assert sha256(target) == sha256(big)
    assert 0 < summary["bytes"] <= SIZE - sum(end - start for start, end in held)


def test_server_killed_mid_get_resumes(bindir, paced_xferd, big, tmp_path):
    journal, local = tmp_path / "journal", tmp_path / "big"
    proc = start_client(bindir, journal, paced_xferd.url(big), str(local))
    time.sleep(0.5)
    pid = session_pid(paced_xferd)
    wait_for_journal(journal, proc, 8 << 20)
    os.kill(pid, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "--resume" in stderr, stderr
    # What arrived before the server died is in the journal, not only the
    # last periodic marker.
    held = sum(end - start for start, end in journal_ranges(journal))

    summary = resume(bindir, journal, paced_xferd.url(big), str(local))
    assert sha256(local) == sha256(big)
    assert 0 < summary["bytes"] <= SIZE - held


def test_server_killed_mid_put_resumes_on_a_new_server(bindir, area, big, tmp_path):
    journal, target = tmp_path / "journal", area / "stored"
    first = Xferd(bindir, area, tmp_path / "first").start()
    url = first.url(target, user="alice")
    proc = start_client(bindir, journal, "--rate", PACE, str(big), url)
    held = wait_for_journal(journal, proc, 8 << 20)
    session = session_pid(first)
    first.proc.send_signal(signal.SIGKILL)          # the whole server: daemon and session
    os.kill(session, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "--resume" in stderr, stderr
    first.proc.wait()

    second = Xferd(bindir, area, tmp_path / "second").start()
    try:
        summary = resume(bindir, journal, str(big), second.url(target, user="alice"))
    finally:
        assert second.stop() == 0
    assert sha256(target) == sha256(big)
    assert 0 < summary["bytes"] <= SIZE - sum(end - start for start, end in held)


def test_client_killed_mid_directory_resumes(bindir, paced_xferd, area, tmp_path):
    tree = area / "tree"
    (tree / "sub").mkdir(parents=True)
    for i in range(8):
        (tree / ("sub" if i % 2 else "") / f"f{i}").write_bytes(os.urandom(4 << 20))
    journal, local = tmp_path / "journal", tmp_path / "copy"
    local.mkdir()
    proc = start_client(bindir, journal, paced_xferd.url(tree), str(local))
    deadline = time.monotonic() + 30
    while finished_files(journal) < 3 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert 3 <= finished_files(journal) < 8

    summary = resume(bindir, journal, paced_xferd.url(tree), str(local))
    assert tree_digest(local / "tree") == tree_digest(tree)
    assert 0 < summary["bytes"] < 32 << 20
    assert summary["files"] == 8


def test_a_torn_chunk_is_sent_again(bindir, paced_xferd, big, tmp_path):
    """Bytes past what the journal vouches for are garbage here (as after a
    crash that tore the last writes): the resume must replace them."""
    journal, local = tmp_path / "journal", tmp_path / "big"
    proc = start_client(bindir, journal, paced_xferd.url(big), str(local))
    wait_for_journal(journal, proc, 8 << 20)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    ranges = journal_ranges(journal)
    with open(local, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        position = 0
        for start, end in sorted(ranges) + [(size, size)]:
            if start > position:
                f.seek(position)
                f.write(b"\xff" * (start - position))
            position = max(position, end)
    assert sha256(local) != sha256(big)

    resume(bindir, journal, paced_xferd.url(big), str(local))
    assert sha256(local) == sha256(big)


def test_a_journal_that_no_longer_matches_its_file_is_not_trusted(bindir, paced_xferd, big,
                                                                    tmp_path):
    journal, local = tmp_path / "journal", tmp_path / "big"
    proc = start_client(bindir, journal, paced_xferd.url(big), str(local))
    wait_for_journal(journal, proc, 8 << 20)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    local.write_bytes(b"")              # someone emptied the partial file

    done = xfer(bindir, "-p", "4", "--resume", "--verify", "sha256", "--json",
                paced_xferd.url(big), str(local), journal=journal, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "shorter than its journal says; fetching it again" in done.stderr
    assert json.loads(done.stdout)["bytes"] == SIZE
    assert sha256(local) == sha256(big)


def test_the_server_refuses_a_restart_past_the_end_of_its_file(paced_xferd, area):
    (area / "short").write_bytes(b"x" * 100)
    (area / "short").chmod(0o666)
    ftp = ftplib.FTP()
    ftp.connect("127.0.0.1", paced_xferd.port, timeout=30)
    ftp.login("alice", TOKEN)
    ftp.sendcmd("TYPE I")
    ftp.sendcmd("MODE E")
    ftp.sendcmd("PASV")
    assert ftp.sendcmd("REST 0-5000").startswith("350")
    with pytest.raises(ftplib.error_perm, match="holds 100 bytes, but the restart claims 5000"):
        ftp.sendcmd(f"STOR {area}/short")
    ftp.quit()
    assert (area / "short").read_bytes() == b"x" * 100


def test_resume_against_globus_gridftp_server(builds, area, tmp_path):
    """globus-gridftp-server's own 111 Range Markers feed the journal, and its
    STOR takes our REST ranges."""
    bindir = SRC / "build"
    server = GridFtpServer().start()
    try:
        source = tmp_path / "big"
        source.write_bytes(os.urandom(SIZE))
        journal, target = tmp_path / "journal", area / "stored"
        proc = start_client(bindir, journal, "--rate", PACE, str(source), server.url(target))
        held = wait_for_journal(journal, proc, 8 << 20)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        summary = resume(bindir, journal, str(source), server.url(target))
    finally:
        server.stop()
    assert sha256(target) == sha256(source)
    assert 0 < summary["bytes"] <= SIZE - sum(end - start for start, end in held)


def listed_tree(area: Path, port: int, files: int) -> tuple[Path, list[str]]:
    """A tree of small files, and their names in the order the server on
    port lists them (MLSD, anonymous), which is the order a get pipelines
    them in."""
    tree = area / "tree"
    tree.mkdir()
    for i in range(files):
        (tree / f"f{i}").write_bytes(os.urandom(64 << 10))
    with ftplib.FTP() as ftp:
        ftp.connect("127.0.0.1", port, timeout=30)
        ftp.login()
        order = [name for name, facts in ftp.mlsd(str(tree)) if facts.get("type") == "file"]
    assert sorted(order) == [f"f{i}" for i in range(files)], order
    return tree, order


def test_a_file_the_server_refuses_leaves_the_later_local_files_as_they_were(bindir, area,
                                                                             tmp_path):
    """globus-gridftp-server serves as nobody and cannot read the second file:
    the first arrives, the batch stops there, and the local files from the
    refused one on are untouched; none is left behind empty."""
    local = tmp_path / "copy" / "tree"
    local.mkdir(parents=True)
    server = GridFtpServer().start()
    try:
        tree, order = listed_tree(area, server.port, 4)
        (tree / order[1]).chmod(0)
        for name in order[1:3]:
            (local / name).write_bytes(b"kept")
        done = xfer(bindir, "-p", "2", server.url(tree), str(local.parent),
                    journal=tmp_path / "journal")
    finally:
        server.stop()
    assert done.returncode == 1, done.stderr
    assert f"RETR {tree / order[1]}" in done.stderr, done.stderr
    assert_no_sanitizer_report(done.stderr)
    assert (local / order[0]).read_bytes() == (tree / order[0]).read_bytes()
    assert [(local / name).read_bytes() for name in order[1:3]] == [b"kept", b"kept"]
    assert not (local / order[3]).exists()


def test_a_local_file_that_cannot_be_opened_changes_no_other(bindir, xferd, area, tmp_path):
    """The last file of the batch cannot be opened (a directory stands in its
    place): nothing moves, the file before it keeps its bytes, and the ones
    this run would have created are not left behind empty."""
    tree, order = listed_tree(area, xferd.port, 4)
    local = tmp_path / "copy" / "tree"
    local.mkdir(parents=True)
    (local / order[0]).write_bytes(b"kept")
    (local / order[3]).mkdir()
    done = xfer(bindir, "-p", "2", xferd.url(tree), str(local.parent),
                journal=tmp_path / "journal")
    assert done.returncode == 1, done.stderr
    assert f"{local / order[3]}: Is a directory" in done.stderr, done.stderr
    assert_no_sanitizer_report(done.stderr)
    assert (local / order[0]).read_bytes() == b"kept"
    assert sorted(path.name for path in local.iterdir()) == sorted([order[0], order[3]])


@pytest.fixture
def small_disk(area):
    """An 8 MiB tmpfs, grown later with a remount."""
    mount = area / "small-disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0777", "tmpfs", str(mount)],
                   check=True)
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def grow(mount: Path) -> None:
    subprocess.run(["mount", "-o", "remount,size=80m", str(mount)], check=True)


def test_a_full_disk_on_the_server_is_a_clear_error_and_resumes(bindir, xferd, small_disk,
                                                              big, tmp_path):
    journal, target = tmp_path / "journal", small_disk / "stored"
    url = xferd.url(target, user="alice")
    done = xfer(bindir, "-p", "4", str(big), url, journal=journal)
    assert done.returncode == 1, done.stderr
    assert "No space left on device; the partial file is kept for a restart" in done.stderr
    assert "run again with --resume" in done.stderr
    assert 0 < target.stat().st_size
    assert " CODE=452 " in xferd.transfer_log.read_text()

    grow(small_disk)
    summary = resume(bindir, journal, str(big), url)
    assert sha256(target) == sha256(big)
    assert summary["bytes"] < SIZE


def test_a_full_disk_on_the_client_is_a_clear_error_and_resumes(bindir, xferd, small_disk,
                                                              big, tmp_path):
    journal, local = tmp_path / "journal", small_disk / "big"
    done = xfer(bindir, "-p", "4", xferd.url(big), str(local),
                journal=journal)
    assert done.returncode == 1, done.stderr
    assert "No space left on device" in done.stderr and "--resume" in done.stderr, done.stderr
    assert 0 < local.stat().st_size

    grow(small_disk)
    summary = resume(bindir, journal, xferd.url(big), str(local))
    assert sha256(local) == sha256(big)
    assert summary["bytes"] < SIZE


def test_a_terminal_gets_a_progress_line_and_a_pipe_does_not(bindir, paced_xferd, big, tmp_path):
    import pty
    master, slave = pty.openpty()
    proc = subprocess.Popen(xfer_command(bindir, "-p", "4", paced_xferd.url(big),
                                         str(tmp_path / "tty"), journal=tmp_path / "j1"),
                            stdout=subprocess.PIPE, stderr=slave, env=xfer_env())
    os.close(slave)
    drawn = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:          # EIO: the child closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    proc.wait(timeout=60)
    os.close(master)
    assert proc.returncode == 0
    lines = [part for part in drawn.decode(errors="replace").split("\r") if "ETA" in part]
    assert len(lines) >= 4, drawn[-500:]          # redrawn while the paced transfer ran
    assert "/ 64.0 MiB" in lines[-1] and "Gbit/s" in lines[-1], lines[-1]
    quiet = xfer(bindir, "-p", "4", paced_xferd.url(big), str(tmp_path / "pipe"),
                 journal=tmp_path / "j2", timeout=60)
    assert quiet.returncode == 0 and "\r" not in quiet.stderr and "ETA" not in quiet.stderr
