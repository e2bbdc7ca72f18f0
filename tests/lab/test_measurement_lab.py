"""Measurement and security points in the lab, after site.yml (test_lab_cycle): the
post-rollout check probes real paths and fails when the ACL is wrong, the SPAN's
flow records hold the WAN's traffic, the Zeek sensor is set up, and the NetControl
bridge turns a signed drop into a border block through respond.yml while refusing
forged, replayed and collaborator requests."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from conftest import ROOT, VENV_BIN, kit_env, playbook, podman_exec

sys.path.insert(0, str(ROOT / "python" / "sdmz-netcontrol-bridge"))
import sdmz_netcontrol_bridge as bridge  # noqa: E402

ROGUE = "198.18.3.66"
DTN2 = "198.18.2.11"
REPORT = ROOT / "build" / "reports" / "verify" / "site_a.json"
KEY = ROOT / "build" / "lab" / "ssh" / "sdmz-netcontrol-bridge.key"
BRIDGE_URL = "http://198.18.0.1:8740/v1/block"


@pytest.fixture(scope="module")
def rolled_out(lab):
    """site.yml's measurement and security plays on the lab (idempotent when test_lab_cycle ran)."""
    result = playbook("playbooks/network.yml", "playbooks/measurement.yml", "playbooks/security.yml", timeout=1800)
    assert result.returncode == 0, result.stdout[-4000:]
    return result


def test_verify_probes_every_path_and_reports(rolled_out):
    result = playbook("playbooks/verify.yml")
    assert result.returncode == 0, result.stdout[-4000:]
    report = json.loads(REPORT.read_text())
    checks = report["checks"]
    assert all(c["ok"] for c in checks)
    rogue = [c for c in checks if c["from"] == "rogue"]
    assert rogue and all(c["expect"] == "drop" and c["got"] in ("filtered", "drop") for c in rogue)
    collaborator = [c for c in checks if c["from"] == "dtn2" and c["check"] == "acl"]
    assert {c["to"].split()[0] for c in collaborator} == {"dtn1", "gw1", "ps1"}
    iperf3 = {c["from"]: c for c in checks if c["check"] == "iperf3"}
    assert set(iperf3) == {"dtn1", "dtn2", "gw2"} and all(c["bits_per_second"] > 0 for c in iperf3.values())
    assert {c["from"] for c in checks if c["check"] == "acl"} == {"dtn2", "gw2", "rogue"}
    mtu = [c for c in checks if c["check"] == "path-mtu"]
    assert {(c["from"], c["to"].split()[0]) for c in mtu} >= {("dtn1", "dtn2"), ("ps1", "dtn2")}
    assert any(n["protocol"] == "udp" and "UDP" in n["reason"] for n in report["not_probed"])


def test_verify_fails_when_the_acl_lets_a_non_collaborator_in(rolled_out):
    hole = podman_exec("border", "nft", "insert", "rule", "inet", "sdmz", "forward", "ip", "saddr", ROGUE, "accept")
    assert hole.returncode == 0, hole.stderr
    try:
        result = playbook("playbooks/verify.yml")
        assert result.returncode != 0
        assert "FAIL acl      rogue  -> dtn1" in result.stdout
    finally:
        repaired = playbook("playbooks/network.yml")
        assert repaired.returncode == 0, repaired.stdout[-3000:]
    assert ROGUE not in podman_exec("border", "nft", "list", "chain", "inet", "sdmz", "forward").stdout


def test_flow_records_of_the_span_hold_wan_traffic(rolled_out):
    marker_port = 47123
    # A connection attempt from site B to dtn1 crosses the WAN link the SPAN copies.
    podman_exec("dtn2", "timeout", "2", "bash", "-c", "exec 3<>/dev/tcp/198.18.1.11/%d" % marker_port)
    # softflowd reads through libpcap's packet ring, which hands over full blocks: on an
    # otherwise idle link, some bulk traffic (iperf3 to ps1, permitted) flushes the marker.
    bulk = podman_exec("dtn2", "iperf3", "--client", "198.18.1.13", "--time", "2")
    assert bulk.returncode == 0, bulk.stdout + bulk.stderr
    ctl = "/run/sdmz-softflowd/span0.ctl"
    assert podman_exec("zeek1", "softflowctl", "-c", ctl, "expire-all").returncode == 0
    query = "src host %s and dst port %d" % (DTN2, marker_port)
    for _ in range(30):
        time.sleep(1)
        flows = podman_exec("zeek1", "nfdump", "-R", "/var/cache/nfdump/sdmz", "-q", "-o", "csv", query).stdout
        if DTN2 in flows:
            break
    assert "%s,198.18.1.11," % DTN2 in flows and ",%d,TCP," % marker_port in flows, flows


def test_the_zeek_sensor_is_set_up(rolled_out):
    link = json.loads(podman_exec("zeek1", "ip", "-j", "link", "show", "dev", "span0").stdout)[0]
    assert "PROMISC" in link["flags"] and "UP" in link["flags"]
    installed = podman_exec("zeek1", "cat", "/opt/zeek/etc/node.cfg").stdout
    assert installed == (ROOT / "build" / "security" / "zeek" / "node.cfg").read_text()
    assert "lb_method=af_packet" in installed and "interface=span0" in installed
    mode = podman_exec("zeek1", "stat", "-c", "%a %U", "/etc/sdmz/netcontrol-bridge.key").stdout.split()
    assert mode == ["600", "root"]
    local = podman_exec("zeek1", "cat", "/opt/zeek/share/zeek/site/sdmz/netcontrol.zeek").stdout
    assert "const bridge_enabled = T" in local


@pytest.fixture()
def running_bridge(rolled_out):
    env = kit_env()
    process = subprocess.Popen(
        [str(VENV_BIN / "python"), str(ROOT / "python" / "sdmz-netcontrol-bridge" / "sdmz_netcontrol_bridge.py"),
         "serve", "--listen", "198.18.0.1:8740", "--key-file", str(KEY), "--inventory", "inventories/lab",
         "--ansible-playbook", str(VENV_BIN / "ansible-playbook")],
        cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    for _ in range(50):
        try:
            socket.create_connection(("198.18.0.1", 8740), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield process
    process.terminate()
    process.wait(timeout=10)


def send_from_zeek1(address, ttl, key_file="/etc/sdmz/netcontrol-bridge.key"):
    return podman_exec("zeek1", "/usr/local/libexec/sdmz-netcontrol-send", "send", "--url", BRIDGE_URL,
                       "--key-file", key_file, "--ttl", str(ttl), "--reason", "SDMZ::Scan_Of_DMZ", address,
                       timeout=600)


def post(body, signature):
    request = urllib.request.Request(BRIDGE_URL, data=body, method="POST",
                                     headers={"Content-Type": "application/json", bridge.SIGNATURE_HEADER: signature})
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_netcontrol_bridge_blocks_through_respond_and_refuses_forgeries(running_bridge):
    key = bridge.read_key(str(KEY))
    # A forged request (another key) and a replayed one change nothing.
    podman_exec("zeek1", "bash", "-c", "umask 077; head -c 48 /dev/urandom | base64 > /root/wrong.key")
    forged = send_from_zeek1(ROGUE, 30, key_file="/root/wrong.key")
    assert forged.returncode == 2 and "bad signature" in forged.stderr
    body = bridge.block_request("not-an-address", 30, "replay test")
    assert post(body, bridge.sign(key, body)) == 400
    assert post(body, bridge.sign(key, body)) == 409
    # A collaborator is never blocked: respond.yml refuses, and the sender says so.
    collaborator = send_from_zeek1(DTN2, 30)
    assert collaborator.returncode == 2 and "422" in collaborator.stderr, collaborator.stderr
    # rogue answers dtn1 until the signed drop reaches the border.
    assert podman_exec("dtn1", "ping", "-c", "1", "-W", "2", ROGUE).returncode == 0
    start = time.monotonic()
    blocked = send_from_zeek1(ROGUE, 30)
    assert blocked.returncode == 0, blocked.stderr
    assert json.loads(blocked.stdout)["result"] == "blocked"
    assert podman_exec("dtn1", "ping", "-c", "1", "-W", "2", ROGUE).returncode != 0
    time.sleep(max(0.0, 32 - (time.monotonic() - start)))
    pruned = playbook("playbooks/respond.yml")
    assert pruned.returncode == 0, pruned.stdout[-3000:]
    assert podman_exec("dtn1", "ping", "-c", "1", "-W", "2", ROGUE).returncode == 0
