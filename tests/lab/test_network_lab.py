"""The border router of the lab, configured through NAPALM with the kit's sdmz_linux
driver: the derived ACL carries real traffic, the response plan blocks and expires,
a change that would cut the management path rolls back by itself, and NAPALM's own
getter models accept the driver's output. Runs after test_lab_cycle (site.yml pushed
the border's configuration)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, playbook, podman_exec, recap

DTN1 = "198.18.1.11"
ROGUE = "198.18.3.66"
KEY = ROOT / "build" / "lab" / "ssh" / "sdmz-netops"
KNOWN_HOSTS = ROOT / "build" / "lab" / "ssh" / "known_hosts"


def tcp_connects(host: str, address: str, port: int) -> bool:
    result = podman_exec(host, "timeout", "3", "bash", "-c", "exec 3<>/dev/tcp/%s/%d" % (address, port))
    return result.returncode == 0


def counter(name: str) -> int:
    out = podman_exec("border", "nft", "list", "counter", "inet", "sdmz", name).stdout
    return int(out.split("packets")[1].split()[0])


def table() -> str:
    return podman_exec("border", "nft", "-s", "list", "table", "inet", "sdmz").stdout


@pytest.fixture(scope="module")
def border(lab, tmp_path_factory):
    """The border as network.yml leaves it, with a listener on dtn1's GridFTP port."""
    result = playbook("playbooks/network.yml")
    assert result.returncode == 0, result.stdout[-4000:]
    listener = podman_exec("dtn1", "systemd-run", "--unit", "sdmz-test-listener", "python3", "-m", "http.server",
                           "2811", "--bind", DTN1)
    assert listener.returncode == 0, listener.stderr
    time.sleep(1)
    state = tmp_path_factory.mktemp("state")
    yield {"blocklist": state / "blocklist.yml"}
    podman_exec("dtn1", "systemctl", "stop", "sdmz-test-listener")


def test_second_push_changes_nothing(border):
    result = playbook("playbooks/network.yml")
    assert result.returncode == 0, result.stdout[-3000:]
    assert recap(result.stdout)["border"]["changed"] == 0, result.stdout[-3000:]


def test_committed_configuration_is_what_was_rendered(border):
    rendered = (ROOT / "build" / "configs" / "border.nft.conf").read_text()
    running = podman_exec("border", "/usr/local/sbin/sdmz-netconf", "running").stdout
    assert running == rendered
    assert "interface wan0 mtu 9000" in running
    assert podman_exec("border", "tc", "qdisc", "show", "dev", "wan0").stdout.startswith("qdisc tbf")


def test_collaborator_reaches_dtn_and_rogue_is_dropped_and_counted(border):
    before = counter("deny_v4")
    assert tcp_connects("dtn2", DTN1, 2811), "the collaborator (dtn2) must reach dtn1's GridFTP port"
    assert not tcp_connects("rogue", DTN1, 2811), "rogue is no collaborator and must be dropped"
    assert counter("deny_v4") > before
    # Not a service siteb uses on dtn1: dropped too.
    assert not tcp_connects("dtn2", DTN1, 22)


def test_jumbo_frames_pass_the_acl_unfragmented(border):
    """ICMP to the measurement point is a perfSONAR flow; 8972 + 28 = 9000 bytes with DF set."""
    result = podman_exec("dtn2", "ping", "-M", "do", "-s", "8972", "-c", "1", "-W", "3", "198.18.1.13")
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_mode_shows_the_change_and_changes_nothing(border, tmp_path):
    blocklist = tmp_path / "blocklist.yml"
    blocklist.write_text(yaml.safe_dump({"sdmz_acl_blocklist_dynamic": [
        {"address": ROGUE + "/32", "expiry": "2099-01-01T00:00:00Z", "reason": "check mode test"}]}))
    before = table()
    result = playbook("playbooks/network.yml", "--check", "--diff",
                      "-e", "network_device_blocklist_file=%s" % blocklist)
    assert result.returncode == 0, result.stdout[-3000:]
    assert '+\t\tip saddr %s counter name "block_v4" drop' % ROGUE in result.stdout
    assert table() == before


def test_check_mode_on_a_device_without_the_agent_says_so_and_changes_nothing(border):
    """A new sdmz_linux device: check mode cannot read its configuration before the agent
    is installed; it says so instead of failing, and installs nothing."""
    assert podman_exec("border", "mv", "/usr/local/sbin/sdmz-netconf", "/root/sdmz-netconf.away").returncode == 0
    try:
        result = playbook("playbooks/network.yml", "--check", "--diff")
        assert result.returncode == 0, result.stdout[-3000:]
        assert "check mode: border has no sdmz-netconf agent yet" in result.stdout
        assert podman_exec("border", "test", "-e", "/usr/local/sbin/sdmz-netconf").returncode != 0
    finally:
        podman_exec("border", "mv", "/root/sdmz-netconf.away", "/usr/local/sbin/sdmz-netconf")


def test_respond_blocks_an_address_and_it_passes_again_after_expiry(border):
    state = "network_device_blocklist_file=%s" % border["blocklist"]
    # rogue answers dtn1's pings (return traffic is permitted) until it is blocked.
    assert podman_exec("dtn1", "ping", "-c", "1", "-W", "2", ROGUE).returncode == 0
    start = time.monotonic()
    blocked = playbook("playbooks/respond.yml", "-e", "block=" + ROGUE, "-e", "ttl=40s",
                       "-e", "reason=lab-test", "-e", state)
    assert blocked.returncode == 0, blocked.stdout[-3000:]
    assert podman_exec("dtn1", "ping", "-c", "1", "-W", "2", ROGUE).returncode != 0
    assert counter("block_v4") > 0
    entries = yaml.safe_load(border["blocklist"].read_text())["sdmz_acl_blocklist_dynamic"]
    assert entries[0]["address"] == ROGUE + "/32" and entries[0]["reason"] == "lab-test"
    time.sleep(max(0.0, 42 - (time.monotonic() - start)))
    pruned = playbook("playbooks/respond.yml", "-e", state)
    assert pruned.returncode == 0, pruned.stdout[-3000:]
    assert yaml.safe_load(border["blocklist"].read_text())["sdmz_acl_blocklist_dynamic"] == []
    assert podman_exec("dtn1", "ping", "-c", "1", "-W", "2", ROGUE).returncode == 0


def test_a_change_that_cuts_management_rolls_back_by_itself(border):
    """mgmt0 marked as WAN-facing: the derived ACL would drop new SSH sessions. The new
    management connection after the commit fails, the commit is rolled back, and the
    device is exactly as before."""
    before = table()
    result = playbook("-i", str(ROOT / "inventories" / "lab"), "-i",
                      str(ROOT / "tests" / "fixtures" / "network" / "mgmt-cut"), "playbooks/network.yml")
    assert result.returncode != 0
    assert "the commit failed its check: a new management connection to 198.18.0.2 failed" in result.stdout
    assert "rolled back through the committing session; the device answers again" in result.stdout
    assert table() == before
    # The device is back on the last good commit: the next push finds nothing to change on
    # it (only the rendered review files, which the failed run had overwritten, change back).
    again = playbook("playbooks/network.yml")
    assert again.returncode == 0, again.stdout[-3000:]
    commit = again.stdout.split("Load, diff, commit with a confirm timer")[-1].split("TASK [")[0]
    assert "ok: [border -> localhost]" in commit, commit


def napalm_border(timeout: int = 20):
    from napalm import get_network_driver
    driver = get_network_driver("sdmz_linux")
    device = driver("198.18.0.2", "sdmz-netops", "", timeout=timeout, optional_args={
        "key_file": str(KEY), "use_keys": True, "allow_agent": False,
        "ssh_strict": True, "alt_host_keys": True, "alt_key_file": str(KNOWN_HOSTS)})
    device.open()
    return device


def test_getters_conform_to_napalm_models(border):
    from napalm.base import models
    from napalm.base.test import helpers
    device = napalm_border()
    try:
        facts = device.get_facts()
        assert helpers.test_model(models.FactsDict, facts)
        assert facts["hostname"] == "border" and "wan0" in facts["interface_list"]
        interfaces = device.get_interfaces()
        for state in interfaces.values():
            assert helpers.test_model(models.InterfaceDict, state)
        assert interfaces["wan0"]["mtu"] == 9000 and interfaces["wan0"]["is_up"]
        for counters in device.get_interfaces_counters().values():
            assert helpers.test_model(models.InterfaceCounterDict, counters)
        config = device.get_config()
        assert helpers.test_model(models.ConfigDict, config)
        assert config["startup"] == config["running"]  # converged: the boot unit re-applies what runs
        assert helpers.test_model(models.AliveDict, device.is_alive())
    finally:
        device.close()


def test_an_unconfirmed_commit_reverts_on_the_devices_own_timer(border):
    before = table()
    device = napalm_border()
    try:
        running = device.get_config(retrieve="running")["running"]
        candidate = running.replace('comment "default deny"', 'comment "default deny (unconfirmed test)"')
        assert candidate != running
        device.load_replace_candidate(config=candidate)
        assert "unconfirmed test" in device.compare_config()
        device.commit_config(revert_in=3)
        assert device.has_pending_commit()
        assert "unconfirmed test" in table()
    finally:
        device.close()
    time.sleep(6)
    assert table() == before
    device = napalm_border()
    try:
        assert not device.has_pending_commit()
        device.load_replace_candidate(config=running)
        assert device.compare_config() == ""
    finally:
        device.close()


def test_sudo_allows_the_agent_and_nothing_else(border):
    result = podman_exec("border", "runuser", "-u", "sdmz-netops", "--", "sudo", "-n", "/usr/sbin/nft", "list", "ruleset")
    assert result.returncode != 0 and "sudo:" in result.stderr, result.stdout + result.stderr
    result = podman_exec("border", "runuser", "-u", "sdmz-netops", "--", "sudo", "-n",
                         "/usr/local/sbin/sdmz-netconf", "version")
    assert result.returncode == 0 and "sdmz-netconf" in result.stdout
