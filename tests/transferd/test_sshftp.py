"""sshftp:// for real: a private sshd on loopback runs the sshftp entry
(sdmz-xferd --inetd) per session, as GridFTP's sshftp does; sdmz-xfer reaches
it through the real ssh client. The data connections come back to the
address sshd names in SSH_CONNECTION."""
from __future__ import annotations

import getpass
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from xferctl import area, bindir, builds, free_port, sha256, tree_digest, wait_port, xfer  # noqa: F401


@pytest.fixture
def sshftp_env(bindir, area, tmp_path):
    """sshd on a free loopback port, and the environment that makes
    sdmz-xfer's `ssh` reach it: an `ssh` on PATH that adds -F config (the
    real /usr/bin/ssh does the rest), and SDMZ_SSHFTP_COMMAND naming the
    entry, as the role installs it."""
    if os.geteuid() != 0 or not shutil.which("sshd", path="/usr/sbin:/usr/bin"):
        pytest.skip("a private sshd needs root and openssh-server")
    keys = tmp_path / "ssh"
    keys.mkdir(mode=0o700)
    for name in ("id", "host"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / name)],
                       check=True)
    shutil.copy(keys / "id.pub", keys / "authorized_keys")
    entry = tmp_path / "sdmz-sshftp"
    entry.write_text("#!/bin/sh\nexec %s --inetd --root %s --data-ports 46000-46999\n"
                     % (bindir / "sdmz-xferd", area))
    entry.chmod(0o755)
    port = free_port()
    Path("/run/sshd").mkdir(exist_ok=True)
    sshd = subprocess.Popen(
        ["/usr/sbin/sshd", "-D", "-e", "-f", "/dev/null", "-p", str(port), "-h", str(keys / "host"),
         "-o", "ListenAddress=127.0.0.1", "-o", "AuthorizedKeysFile=%s" % (keys / "authorized_keys"),
         "-o", "PidFile=none", "-o", "UsePAM=no", "-o", "StrictModes=no",
         "-o", "PermitRootLogin=prohibit-password"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "sshd.log", "w"))
    wait_port(port)
    config = keys / "config"
    config.write_text("Host 127.0.0.1\n  Port %d\n  IdentityFile %s\n  StrictHostKeyChecking no\n"
                      "  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n" % (port, keys / "id"))
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "ssh").write_text('#!/bin/sh\nexec /usr/bin/ssh -F %s "$@"\n' % config)
    (shim / "ssh").chmod(0o755)
    yield {"PATH": "%s:%s" % (shim, os.environ["PATH"]), "SDMZ_SSHFTP_COMMAND": str(entry)}
    sshd.terminate()
    sshd.wait(timeout=30)


def test_sshftp_gets_and_puts_files_and_trees(bindir, area, sshftp_env, tmp_path):
    user = getpass.getuser()
    big = area / "big"
    big.write_bytes(os.urandom(8 << 20))
    tree = area / "tree"
    (tree / "sub").mkdir(parents=True)
    for i in range(5):
        (tree / ("sub" if i % 2 else "") / f"f{i}").write_bytes(os.urandom(1000 * i))

    got = xfer(bindir, "-p", "4", "--verify", "sha256", f"sshftp://{user}@127.0.0.1{big}",
               str(tmp_path / "big"), env=sshftp_env)
    assert got.returncode == 0, got.stderr
    assert sha256(tmp_path / "big") == sha256(big)

    put = xfer(bindir, "-p", "4", "--verify", "sha256", str(tmp_path / "big"),
               f"sshftp://{user}@127.0.0.1{area}/uploaded", env=sshftp_env)
    assert put.returncode == 0, put.stderr
    assert sha256(area / "uploaded") == sha256(big)

    copy = tmp_path / "copy"
    copy.mkdir()
    trees = xfer(bindir, "-p", "2", f"sshftp://{user}@127.0.0.1{tree}", str(copy), env=sshftp_env)
    assert trees.returncode == 0, trees.stderr
    assert tree_digest(copy / "tree") == tree_digest(tree)


def test_sshftp_keeps_the_entry_s_roots(bindir, area, sshftp_env, tmp_path):
    user = getpass.getuser()
    done = xfer(bindir, f"sshftp://{user}@127.0.0.1/etc/hostname", str(tmp_path / "h"),
                env=sshftp_env)
    assert done.returncode == 1
    assert "550 /etc/hostname: outside the served roots" in done.stderr, done.stderr
