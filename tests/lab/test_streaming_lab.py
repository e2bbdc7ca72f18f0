"""The stream proxy in the lab: site.yml put sdmz-proxy on gw1 and gw2 with the
inventory's lab-beamline request. Real traffic: pyzmq and iperf3 from dtn1
through gw1 -> gw2 to dtn2; a gateway restart; a non-collaborator refused."""
from __future__ import annotations

import json
import subprocess
import time

import pytest

from conftest import ROOT, playbook, podman_exec, recap, run

pytestmark = pytest.mark.usefixtures("lab")

CONSUMER = r"""
import sys, zmq
ctx = zmq.Context()
pull = ctx.socket(zmq.PULL)
pull.bind("tcp://198.18.2.11:6000")
pull.setsockopt(zmq.RCVTIMEO, 30000)
n = int(sys.argv[1])
got = [pull.recv() for _ in range(n)]
ok = all(m == (b"%06d:" % i) + bytes([i % 251]) * (i % 3000) for i, m in enumerate(got))
print("intact-in-order" if ok else "CORRUPT")
"""

PRODUCER = r"""
import sys, time, zmq
ctx = zmq.Context()
push = ctx.socket(zmq.PUSH)
push.connect("tcp://198.18.1.12:5100")
for i in range(int(sys.argv[1])):
    push.send((b"%06d:" % i) + bytes([i % 251]) * (i % 3000))
push.setsockopt(zmq.LINGER, 30000)
push.close()
ctx.term()
"""


def streamctl(host: str, *args: str) -> dict:
    result = podman_exec(host, "sdmz-streamctl", "--json", *args)
    assert result.returncode == 0, result.stderr + result.stdout
    return json.loads(result.stdout)


def install_pyzmq(host: str) -> None:
    """The producer and consumer applications' library: the venv's pyzmq wheel
    (its libzmq bundled; same Python 3.11 as the lab image) copied in."""
    site = next((ROOT / ".venv" / "lib").glob("python3*/site-packages"))
    target = "sdmz-%s:/usr/local/lib/python3.11/dist-packages/" % host
    assert podman_exec(host, "mkdir", "-p", "/usr/local/lib/python3.11/dist-packages").returncode == 0
    for name in ["zmq"] + [p.name for p in site.glob("pyzmq*.libs")]:
        copied = run(["podman", "cp", str(site / name), target])
        assert copied.returncode == 0, copied.stderr


@pytest.fixture(scope="module")
def deployed(site):
    run_ = playbook("playbooks/streaming.yml", timeout=900)
    assert run_.returncode == 0, run_.stdout[-4000:]
    for host in ("dtn1", "dtn2"):
        install_pyzmq(host)
    return run_


def zmq_stream(count: int) -> str:
    consumer = subprocess.Popen(["podman", "exec", "sdmz-dtn2", "python3", "-c", CONSUMER,
                                 str(count)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    time.sleep(1.0)
    producer = podman_exec("dtn1", "python3", "-c", PRODUCER, str(count), timeout=120)
    assert producer.returncode == 0, producer.stderr
    out, err = consumer.communicate(timeout=120)
    assert consumer.returncode == 0, err
    return out.strip()


def test_requests_are_held_on_both_gateways_and_rerun_changes_nothing(deployed):
    assert recap(deployed.stdout)["gw1"]["changed"] == 0  # site.yml already applied it
    for host, side in (("gw1", "producer"), ("gw2", "consumer")):
        items = streamctl(host, "list")["items"]
        assert [(i["id"], i["side"], i["channels"]) for i in items] == [("lab-beamline", side, 2)]
    assert streamctl("gw2", "list")["items"][0]["allow"] == "198.18.1.12/32"
    # The WAN leg is TLS: gw1 connects with it, gw2 listens with it; each names the other.
    assert {k: streamctl("gw1", "list")["items"][0].get(k) for k in ("tls", "tls-peer")} == \
        {"tls": "connect", "tls-peer": "gw2"}
    assert {k: streamctl("gw2", "list")["items"][0].get(k) for k in ("tls", "tls-peer")} == \
        {"tls": "listen", "tls-peer": "gw1"}
    key = podman_exec("gw1", "stat", "-c", "%U:%G %a", "/etc/sdmz-proxy/tls-key.pem")
    assert key.stdout.strip() == "root:sdmz-proxy 640"
    unit = podman_exec("gw1", "systemctl", "show", "sdmz-proxy", "-p", "User", "-p",
                       "CapabilityBoundingSet", "-p", "ProtectSystem", "-p", "ActiveState")
    assert "User=sdmz-proxy" in unit.stdout and "ProtectSystem=strict" in unit.stdout
    assert "ActiveState=active" in unit.stdout and "CapabilityBoundingSet=\n" in unit.stdout + "\n"


def test_pyzmq_stream_arrives_intact_and_in_order_through_both_gateways(deployed):
    assert zmq_stream(2000) == "intact-in-order"
    stats = streamctl("gw2", "stats", "--id", "lab-beamline")["items"]
    assert int(stats[0]["bytes_forward"]) > 2000 * 1000
    assert int(stats[0]["tls_failures"]) == 0
    journal = podman_exec("gw2", "journalctl", "-u", "sdmz-proxy", "--no-pager", "-o", "cat")
    assert "lab-beamline ch0: TLSv1.3 with gw1" in journal.stdout, journal.stdout[-2000:]


def test_iperf3_through_the_same_path(deployed):
    server = subprocess.Popen(["podman", "exec", "sdmz-dtn2", "iperf3", "-s", "-1", "-p", "6001",
                               "-B", "198.18.2.11"], stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)
    client = podman_exec("dtn1", "iperf3", "-c", "198.18.1.12", "-p", "5101", "-t", "3", "-J",
                         timeout=60)
    server.communicate(timeout=30)
    assert client.returncode == 0, client.stdout[-2000:]
    assert json.loads(client.stdout)["end"]["sum_received"]["bytes"] > 10 * 1024 * 1024


def test_a_gateway_restart_keeps_the_request_and_the_stream_resumes(deployed):
    # As after a reboot: the table is gone; the unit loads it again at start.
    assert podman_exec("gw1", "nft", "delete", "table", "inet", "sdmz_stream_proxy").returncode == 0
    assert podman_exec("gw1", "systemctl", "restart", "sdmz-proxy").returncode == 0
    table = podman_exec("gw1", "nft", "list", "table", "inet", "sdmz_stream_proxy")
    assert table.returncode == 0 and "198.18.1.0/24 accept" in table.stdout
    deadline = time.monotonic() + 20
    while podman_exec("gw1", "test", "-S", "/run/sdmz-proxy/control.sock").returncode != 0:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert [i["id"] for i in streamctl("gw1", "list")["items"]] == ["lab-beamline"]
    assert zmq_stream(500) == "intact-in-order"


def test_a_non_collaborator_cannot_use_a_gateway(deployed):
    probe = podman_exec("rogue", "python3", "-c",
                        "import socket; s = socket.socket(); s.settimeout(3); "
                        "print(s.connect_ex(('198.18.2.12', 5100)))")
    assert probe.returncode == 0, probe.stderr
    assert int(probe.stdout) == 111  # ECONNREFUSED: the gateway's table refuses, as a closed port
    table = podman_exec("gw2", "nft", "list", "table", "inet", "sdmz_stream_proxy")
    assert "198.18.1.12 accept" in table.stdout and "reject with tcp reset" in table.stdout


def test_busy_polling_out_of_range_is_one_error_before_any_change(deployed):
    """A busy_poll_us the daemon would refuse stops the role where every
    config key is checked (the template's `sdmz-proxy check`), naming the
    key, and the gateway's file and service stay as they were."""
    before = podman_exec("gw1", "sha256sum", "/etc/sdmz-proxy/proxy.conf").stdout
    main_pid = podman_exec("gw1", "systemctl", "show", "sdmz-proxy", "-p", "MainPID").stdout
    assert main_pid.strip() not in ("", "MainPID=0"), main_pid
    assert "busy_poll_us = 0" in podman_exec("gw1", "cat", "/etc/sdmz-proxy/proxy.conf").stdout
    refused = playbook("playbooks/streaming.yml", "-e", "stream_proxy_busy_poll_us=20000",
                       timeout=900)
    assert refused.returncode != 0
    assert "busy_poll_us: microseconds, 0-10000 (0: workers sleep when idle)" in refused.stdout, \
        refused.stdout[-3000:]
    assert all(c["changed"] == 0 for c in recap(refused.stdout).values()), refused.stdout[-3000:]
    assert podman_exec("gw1", "sha256sum", "/etc/sdmz-proxy/proxy.conf").stdout == before
    # Same process: the daemon was not restarted.
    assert podman_exec("gw1", "systemctl", "show", "sdmz-proxy", "-p",
                       "MainPID").stdout == main_pid
