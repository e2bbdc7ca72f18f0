"""The lab cycle, as `make demo` and `make lab-down` run it: up, idempotent,
truthful in check mode, carrying real traffic, site.yml twice with no change
the second time, then down with nothing left behind."""
from __future__ import annotations

import json
import subprocess

import pytest

from conftest import LAB_HOSTS, ROOT, VENV_BIN, lab_leftovers, playbook, podman_exec, recap, run


def test_check_mode_on_an_absent_lab_creates_nothing():
    """Runs first, before the lab exists: --check --diff tells what it would build, builds nothing."""
    # make setup builds the base image; anything else means a lab is up already.
    running = [x for x in lab_leftovers() if not x.startswith("image ")]
    if running:
        pytest.skip("a lab is already up: %s" % ", ".join(running[:3]))
    check = playbook("playbooks/lab.yml", "-e", "lab_state=present", "--check", "--diff", timeout=1800)
    assert check.returncode == 0, check.stdout[-4000:]
    assert "ip netns add sdmz-dtn1" in check.stdout
    assert "mirred egress mirror dev zeek1.span0" in check.stdout
    # The container would be created (podman_container's check mode, or the notice when
    # the base image is not imported yet).
    assert "changed: [localhost] => (item=border)" in check.stdout
    assert [x for x in lab_leftovers() if not x.startswith("image ")] == []


def test_lab_up_twice_changes_nothing(lab):
    again = playbook("playbooks/lab.yml", "-e", "lab_state=present")
    assert again.returncode == 0, again.stdout[-3000:]
    assert recap(again.stdout)["localhost"]["changed"] == 0, again.stdout[-3000:]


def test_lab_check_mode_changes_nothing(lab):
    check = playbook("playbooks/lab.yml", "-e", "lab_state=present", "--check", "--diff")
    assert check.returncode == 0, check.stdout[-3000:]
    assert recap(check.stdout)["localhost"]["changed"] == 0


def test_every_lab_host_answers_through_its_connection(lab):
    result = run([str(VENV_BIN / "ansible"), "lab_hosts", "-m", "ansible.builtin.command", "-a", "hostname"])
    assert result.returncode == 0, result.stdout[-3000:]
    for host in LAB_HOSTS:
        assert "%s | CHANGED | rc=0 >>\n%s" % (host, host) in result.stdout


def test_jumbo_frames_cross_the_border_unfragmented(lab):
    ping = podman_exec("dtn1", "ping", "-c", "2", "-W", "2", "-M", "do", "-s", "8972", "198.18.2.11")
    assert ping.returncode == 0, ping.stdout + ping.stderr
    too_big = podman_exec("dtn1", "ping", "-c", "1", "-W", "2", "-M", "do", "-s", "8973", "198.18.2.11")
    assert too_big.returncode != 0


def test_management_network_stays_at_1500(lab):
    fits = podman_exec("dtn1", "ping", "-c", "1", "-W", "2", "-M", "do", "-s", "1472", "198.18.0.21")
    assert fits.returncode == 0, fits.stdout + fits.stderr
    too_big = podman_exec("dtn1", "ping", "-c", "1", "-W", "2", "-M", "do", "-s", "1473", "198.18.0.21")
    assert too_big.returncode != 0


def test_ipv6_routes_across_the_wan(lab):
    ping = podman_exec("dtn2", "ping", "-c", "1", "-W", "2", "fd53:444d:1::11")
    assert ping.returncode == 0, ping.stdout + ping.stderr


SNIFF = r"""
import socket, struct, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
s.bind(("span0", 0)); s.settimeout(0.5)
seen = []
end = time.time() + 8
while time.time() < end:
    try:
        frame = s.recv(65535)
    except OSError:
        continue
    if len(frame) == 14 + 20 + 8 + 1234:
        seen.append(socket.inet_ntoa(frame[26:30]))
print(",".join(seen))
"""


def test_zeek1_receives_a_copy_of_wan_traffic(lab):
    sniffer = subprocess.Popen(["podman", "exec", "sdmz-zeek1", "python3", "-c", SNIFF],
                               stdout=subprocess.PIPE, text=True)
    try:
        subprocess.run(["sleep", "2"], check=True)
        ping = podman_exec("dtn1", "ping", "-c", "3", "-i", "0.3", "-s", "1234", "198.18.2.11")
        assert ping.returncode == 0
        out, _ = sniffer.communicate(timeout=30)
    finally:
        sniffer.kill()
    sources = out.strip().split(",")
    # Each echo request and each reply crosses the WAN link once: both directions copied.
    assert sources.count("198.18.1.11") == 3 and sources.count("198.18.2.11") == 3, sources


def test_site_runs_and_second_run_changes_nothing(site):
    second = playbook("playbooks/site.yml", timeout=1800)
    assert second.returncode == 0, second.stdout[-4000:]
    counts = recap(second.stdout)
    assert counts, second.stdout[-2000:]
    assert {h: c["changed"] for h, c in counts.items() if c["changed"]} == {}
    summary = (ROOT / "build" / "summary" / "site.md").read_text()
    assert "| host | address | groups |" in summary and "| dtn1 | 198.18.0.11 |" in summary


def test_dtn_audit_after_site_shows_no_drift(lab):
    """After site.yml, an audit of dtn1 and dtn2 finds every supported setting in place,
    and reports what the lab cannot take as unsupported, with the reason."""
    audit = playbook("playbooks/dtn.yml", "--limit", "dtn1,dtn2", "-e", "dtn_tuning_audit=true")
    assert audit.returncode == 0, audit.stdout[-4000:]
    assert all(c["changed"] == 0 for c in recap(audit.stdout).values()), audit.stdout[-3000:]
    for host in ("dtn1", "dtn2"):
        report = json.loads((ROOT / "build" / "audit" / "dtn_tuning" / ("%s.json" % host)).read_text())
        assert report["mode"] == "audit"
        statuses = {(i["scope"], i["setting"]): i for i in report["items"]}
        assert [k for k, i in statuses.items() if i["status"] == "drift"] == []
        assert statuses[("sysctl", "net.ipv4.tcp_rmem")]["status"] == "ok"
        assert statuses[("dmz0", "mtu")]["current"] == "9000"
        unsupported = statuses[("dmz0", "qdisc")]
        assert unsupported["status"] == "unsupported" and "fq" in unsupported["reason"]
    # The setting really is in the kernel of the host, not only in the report.
    rmem = podman_exec("dtn2", "sysctl", "-n", "net.ipv4.tcp_rmem")
    assert rmem.stdout.split() == statuses[("sysctl", "net.ipv4.tcp_rmem")]["recommended"].split()
