"""The NetControl bridge's checks: a request is
refused before anything runs when its signature, freshness, nonce or fields are wrong.
(The accepted path runs respond.yml against the lab: tests/lab/test_measurement_lab.py.)"""
from __future__ import annotations

import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "python" / "sdmz-netcontrol-bridge"))
import sdmz_netcontrol_bridge as bridge  # noqa: E402

KEY = b"k" * 40


def verifier(now=1_000_000):
    return bridge.Verifier(KEY, window=60, max_ttl=3600, clock=lambda: now)


def test_a_good_request_passes_once_and_its_replay_is_refused():
    check = verifier()
    body = bridge.block_request("203.0.113.7", 600, "SDMZ::Scan_Of_DMZ", now=1_000_000)
    assert check.verify(body, bridge.sign(KEY, body)) == {"address": "203.0.113.7/32", "ttl": 600,
                                                          "reason": "SDMZ::Scan_Of_DMZ"}
    with pytest.raises(bridge.RequestError) as error:
        check.verify(body, bridge.sign(KEY, body))
    assert error.value.status == 409


@pytest.mark.parametrize("mutate, status, reason", [
    (lambda b: (b, bridge.sign(b"x" * 40, b)), 401, "bad signature"),
    (lambda b: (b.replace(b"600", b"601"), bridge.sign(KEY, b)), 401, "bad signature"),
    (lambda b: (b, ""), 401, "bad signature"),
])
def test_forged_and_tampered_requests_are_refused(mutate, status, reason):
    body = bridge.block_request("203.0.113.7", 600, "scan", now=1_000_000)
    body, signature = mutate(body)
    with pytest.raises(bridge.RequestError) as error:
        verifier().verify(body, signature)
    assert (error.value.status, error.value.reason) == (status, reason)


@pytest.mark.parametrize("address, ttl, reason, message", [
    ("203.0.113.7", 600, "scan", None),
    ("203.0.113.7", 7200, "scan", "ttl: must be 1-3600 seconds"),
    ("203.0.113.7; rm -rf /", 600, "scan", "address:"),
    ("203.0.113.7", 600, "$(reboot)", "reason:"),
    ("203.0.113.0/33", 600, "scan", "address:"),
])
def test_fields_are_checked(address, ttl, reason, message):
    body = bridge.block_request(address, ttl, reason, now=1_000_000)
    if message is None:
        assert verifier().verify(body, bridge.sign(KEY, body))["address"] == "203.0.113.7/32"
        return
    with pytest.raises(bridge.RequestError) as error:
        verifier().verify(body, bridge.sign(KEY, body))
    assert error.value.status == 400 and error.value.reason.startswith(message)


def test_stale_requests_are_refused():
    body = bridge.block_request("203.0.113.7", 600, "scan", now=1_000_000 - 61)
    with pytest.raises(bridge.RequestError) as error:
        verifier().verify(body, bridge.sign(KEY, body))
    assert error.value.status == 401 and "stale" in error.value.reason


def test_the_playbook_argv_is_fixed_and_carries_fields_as_one_json_argument():
    class Args:
        ansible_playbook, inventory, project = "ansible-playbook", "inventories/lab", "/kit"
    argv = bridge.respond_argv(Args, {"address": "203.0.113.7/32", "ttl": 600, "reason": "scan"})
    assert argv[:4] == ["ansible-playbook", "-i", "inventories/lab", "/kit/playbooks/respond.yml"]
    assert argv[4] == "-e" and len(argv) == 6
    assert '"block": "203.0.113.7/32"' in argv[5] and '"ttl": "600s"' in argv[5]


def test_a_key_file_others_can_read_is_refused(tmp_path):
    key = tmp_path / "bridge.key"
    key.write_text("a" * 64)
    os.chmod(key, 0o644)
    with pytest.raises(SystemExit) as error:
        bridge.read_key(str(key))
    assert "must not be readable by others" in str(error.value)
    os.chmod(key, 0o600)
    assert bridge.read_key(str(key)) == b"a" * 64
