"""The transfer daemon in the lab: site.yml put sdmz-xferd on dtn1 and dtn2
(roles/transfer_daemon). Real transfers from dtn2, at the collaborator site,
to and from dtn1 across the WAN and the border's ACL; the host firewall and
the border refusing a non-collaborator; the hardened unit; the transfer log."""
from __future__ import annotations

import pytest

from conftest import playbook, podman_exec, recap

pytestmark = pytest.mark.usefixtures("lab")

CONNECT = ("import socket, sys; s = socket.socket(); s.settimeout(3); "
           "s.bind((sys.argv[1], 0)) if sys.argv[1] else None; "
           "print(s.connect_ex((sys.argv[2], 2812)))")


@pytest.fixture(scope="module")
def deployed(site):
    run_ = playbook("playbooks/transfer.yml", timeout=900)
    assert run_.returncode == 0, run_.stdout[-4000:]
    return run_


def test_rerun_and_check_mode_change_nothing(deployed):
    assert recap(deployed.stdout)["dtn1"]["changed"] == 0  # site.yml already applied it
    check = playbook("playbooks/transfer.yml", "--check", "--diff", timeout=900)
    assert check.returncode == 0, check.stdout[-4000:]
    assert all(r["changed"] == 0 for r in recap(check.stdout).values())


def test_a_file_moves_between_dtn2_and_dtn1_through_the_border(deployed):
    check = playbook("playbooks/transfer-check.yml", timeout=900)
    assert check.returncode == 0, check.stdout[-4000:]
    assert "ok transfer dtn2 -> dtn1: 268435456 bytes" in check.stdout
    assert "ok transfer dtn2 <- dtn1: 268435456 bytes" in check.stdout
    assert check.stdout.count("sha256 verified") == 2
    # The daemon's transfer log: one GridFTP-format line per file and direction.
    log = podman_exec("dtn1", "cat", "/var/log/sdmz-xferd/transfer.log").stdout
    lines = [l for l in log.splitlines() if "transfer-check-from-dtn2.bin" in l]
    assert any("TYPE=STOR" in l and "USER=lab" in l and "CODE=226" in l for l in lines), log
    assert any("TYPE=RETR" in l and "NBYTES=268435456" in l and "STREAMS=4" in l for l in lines), log


def test_the_unit_runs_unprivileged_and_hardened(deployed):
    unit = podman_exec("dtn1", "systemctl", "show", "sdmz-xferd", "-p", "User", "-p",
                       "CapabilityBoundingSet", "-p", "ProtectSystem", "-p", "NoNewPrivileges",
                       "-p", "ActiveState", "-p", "ReadWritePaths")
    out = unit.stdout + "\n"
    assert "User=sdmz-xfer" in out and "ProtectSystem=strict" in out, out
    assert "NoNewPrivileges=yes" in out and "ActiveState=active" in out, out
    assert "CapabilityBoundingSet=\n" in out, out
    assert "ReadWritePaths=/srv/sdmz-data /var/log/sdmz-xferd" in out, out
    tokens = podman_exec("dtn1", "stat", "-c", "%U %a", "/etc/sdmz-xferd/tokens")
    assert tokens.stdout.strip() == "sdmz-xfer 600"
    owner = podman_exec("dtn1", "ps", "-o", "user=", "-C", "sdmz-xferd")
    assert set(owner.stdout.split()) == {"sdmz-xfer"}, owner.stdout


def test_a_non_collaborator_is_refused(deployed):
    # rogue -> dtn1: the border's ACL drops it (a timeout, 11 EAGAIN).
    to_dtn1 = podman_exec("rogue", "python3", "-c", CONNECT, "", "198.18.1.11")
    assert to_dtn1.returncode == 0, to_dtn1.stderr
    assert int(to_dtn1.stdout) == 11
    # rogue -> dtn2 (no border in front of site B's hosts in the lab): dtn2's
    # host firewall answers with a reset, as from a closed port.
    to_dtn2 = podman_exec("rogue", "python3", "-c", CONNECT, "", "198.18.2.11")
    assert int(to_dtn2.stdout) == 111
    table = podman_exec("dtn2", "nft", "list", "table", "inet", "sdmz_transfer").stdout
    assert "198.18.2.0/24 accept" in table and "198.18.1.0/24 accept" in table, table
    assert "not a transfer peer" in table
    # A source of dtn1's own outside the allowed prefixes (its management
    # address) meets the same reset.
    own = podman_exec("dtn1", "python3", "-c", CONNECT, "198.18.0.11", "198.18.1.11")
    assert int(own.stdout) == 111
