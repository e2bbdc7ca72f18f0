"""sdmz-xferd over the wire: confinement to its roots, read-only anonymous
access, no FTP bounce, token logins, a refused STOR that loses nothing, and
a client that listens only where the firewall opens."""
from __future__ import annotations

import ftplib
import os
import random
import socket
import subprocess

import pytest

from xferctl import TOKEN, Xferd, area, bindir, builds, xfer, xferd  # noqa: F401


def session(server, user="anonymous", password="x") -> ftplib.FTP:
    ftp = ftplib.FTP()
    ftp.connect("127.0.0.1", server.port, timeout=30)
    ftp.login(user, password)
    return ftp


def refused(ftp: ftplib.FTP, command: str) -> str:
    with pytest.raises(ftplib.error_perm) as caught:
        ftp.sendcmd(command)
    return str(caught.value)


def test_paths_outside_the_roots_are_refused(xferd, area):
    (area / "inside").write_bytes(b"ok")
    os.symlink("/etc", area / "escape")
    ftp = session(xferd)
    assert ftp.sendcmd(f"SIZE {area}/inside") == "213 2"
    assert "outside the served roots" in refused(ftp, "SIZE /etc/passwd")
    assert refused(ftp, f"SIZE {area}/../etc/passwd").startswith("553")
    assert "symbolic link leads outside" in refused(ftp, f"SIZE {area}/escape/passwd")
    assert refused(ftp, f"CWD {area}/..").startswith("553")
    ftp.quit()
    assert "path refused" in xferd.log_text()


def test_anonymous_may_read_but_not_write(xferd, area):
    ftp = session(xferd)
    ftp.sendcmd("TYPE I")
    ftp.set_pasv(True)
    with pytest.raises(ftplib.error_perm, match="may not write"):
        ftp.storbinary(f"STOR {area}/new", open(os.devnull, "rb"))
    assert "may not write" in refused(ftp, f"MKD {area}/dir")
    ftp.quit()
    assert not (area / "new").exists() and not (area / "dir").exists()


def test_data_connections_never_go_to_a_third_host(xferd):
    ftp = session(xferd)
    # 127.0.0.2 is another host as far as the control connection knows.
    assert refused(ftp, "PORT 127,0,0,2,200,10").startswith("504")
    assert refused(ftp, "EPRT |1|127.0.0.2|51210|").startswith("504")
    assert refused(ftp, "PORT 127,0,0,1,0,21").startswith("504")   # privileged port
    ftp.quit()
    assert "refused data address" in xferd.log_text()


def test_token_logins_and_the_failed_login_limit(xferd):
    ftp = session(xferd, "alice", TOKEN)
    assert ftp.sendcmd("NOOP").startswith("200")
    ftp.quit()
    ftp = ftplib.FTP()
    ftp.connect("127.0.0.1", xferd.port, timeout=30)
    for _ in range(2):
        with pytest.raises(ftplib.error_perm, match="530"):
            ftp.login("alice", "wrong")
    with pytest.raises(ftplib.error_temp, match="421"):
        ftp.login("alice", "wrong")
    assert xferd.log_text().count("login refused for alice") == 3


def test_a_token_file_others_can_read_is_refused_at_start(bindir, area, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {TOKEN}\n")
    tokens.chmod(0o644)
    r = subprocess.run([str(bindir / "sdmz-xferd"), "--root", str(area), "--listen",
                        "127.0.0.1:1", "--token-file", str(tokens), "--check"],
                       capture_output=True, text=True, timeout=30, check=False)
    assert r.returncode == 2
    assert "mode 0644 lets others read it" in r.stderr


def test_a_stor_refused_for_want_of_a_data_connection_keeps_the_old_file(xferd, area):
    (area / "precious").write_bytes(b"do not lose me")
    ftp = session(xferd, "alice", TOKEN)
    ftp.sendcmd("TYPE I")
    ftp.sendcmd("MODE E")
    with pytest.raises(ftplib.error_temp, match="425"):
        ftp.sendcmd(f"STOR {area}/precious")
    ftp.sendcmd("MODE S")
    with pytest.raises(ftplib.error_temp, match="425"):
        ftp.sendcmd(f"STOR {area}/precious")
    ftp.quit()
    assert (area / "precious").read_bytes() == b"do not lose me"


def held_port_pair() -> tuple[int, list[socket.socket]]:
    """Two consecutive loopback ports, each held by a listener."""
    for _ in range(100):
        lo = random.randint(40000, 44000)
        held = []
        try:
            for port in (lo, lo + 1):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", port))
                s.listen()
            return lo, held
        except OSError:
            for s in held:
                s.close()
    raise RuntimeError("no two free consecutive ports")


def test_gets_listen_only_in_the_data_port_range(bindir, xferd, area, tmp_path):
    """Behind a firewall that opens one range to a DTN, a get takes its data
    port from that range: --data-ports, or GLOBUS_TCP_PORT_RANGE as Globus
    tools read it. A range in use is one clear error; a bad one is refused."""
    (area / "f").write_bytes(os.urandom(100_000))
    lo, held = held_port_pair()
    try:
        r = xfer(bindir, "--data-ports", f"{lo}-{lo + 1}", xferd.url(area / "f"),
                 str(tmp_path / "a"))
        assert r.returncode == 1 and f"every data port in {lo}-{lo + 1} is in use" in r.stderr
        assert "--resume" not in r.stderr, "nothing moved, so --resume would gain nothing"
        r = xfer(bindir, xferd.url(area / "f"), str(tmp_path / "b"),
                 env={"GLOBUS_TCP_PORT_RANGE": f"{lo},{lo + 1}"})
        assert r.returncode == 1 and f"every data port in {lo}-{lo + 1} is in use" in r.stderr
        held.pop().close()   # lo + 1 is free now: the only port the get may use
        r = xfer(bindir, "-p", "2", "--data-ports", f"{lo}-{lo + 1}", xferd.url(area / "f"),
                 str(tmp_path / "c"))
        assert r.returncode == 0, r.stderr
        assert (tmp_path / "c").read_bytes() == (area / "f").read_bytes()
    finally:
        for s in held:
            s.close()
    r = xfer(bindir, "--data-ports", "80-90", xferd.url(area / "f"), str(tmp_path / "d"))
    assert r.returncode == 2 and "--data-ports 80-90: expected LO-HI" in r.stderr
    r = xfer(bindir, xferd.url(area / "f"), str(tmp_path / "d"),
             env={"GLOBUS_TCP_PORT_RANGE": "50000"})
    assert r.returncode == 2 and "GLOBUS_TCP_PORT_RANGE=50000" in r.stderr
    assert not (tmp_path / "d").exists()
