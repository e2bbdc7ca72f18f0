"""dtn_tuning_plan's arithmetic against hand-worked cases, and its errors."""
from __future__ import annotations

import json
import sys

import pytest

from conftest import ROOT, VENV_BIN, run

sys.path.insert(0, str(ROOT))
from module_utils.dtn_tuning_math import MAX_BUFFER, PlanError, plan  # noqa: E402

CC = ["reno", "cubic", "bbr"]


def test_tutorial_example_10g_70ms():
    p = plan(10, max_rtt_ms=70, streams=1, mtu=9000, available_congestion_control=CC)
    assert p["bdp_bytes"] == 87_500_000                      # 83.4 MiB, the tutorial's figure
    assert round(p["bdp_bytes"] / 2**20, 1) == 83.4
    # 2 x BDP = 175,000,000 -> next power of two 268,435,456 (above the 32 MiB floor)
    assert p["tcp_max_bytes"] == 268_435_456
    assert p["sysctl"]["net.ipv4.tcp_rmem"] == "4096 87380 268435456"
    assert p["sysctl"]["net.ipv4.tcp_wmem"] == "4096 65536 268435456"
    assert p["sysctl"]["net.core.rmem_max"] == "268435456"
    assert p["sysctl"]["net.ipv4.tcp_mtu_probing"] == "1"
    assert p["sysctl"]["net.ipv4.tcp_congestion_control"] == "bbr"
    assert p["streams_needed"] == 1


def test_streams_share_the_buffer():
    # 2 x 87.5 MB / 8 = 21,875,000 -> 33,554,432 (power of two; equals the 10G floor)
    p = plan(10, max_rtt_ms=70, streams=8, available_congestion_control=CC)
    assert p["tcp_max_bytes"] == 33_554_432
    # the core maximum never drops below the 10G tier floor (64 MiB)
    assert p["sysctl"]["net.core.rmem_max"] == "67108864"


def test_tiny_link_gets_the_tier_floor():
    # 1 Gbit/s x 1 ms = 125,000 B; 2 x BDP = 250,000 -> 262,144, below the 10G-tier floor
    p = plan(1, max_rtt_ms=1, available_congestion_control=CC)
    assert p["bdp_bytes"] == 125_000
    assert p["tcp_max_bytes"] == 33_554_432
    assert p["tier_gbps"] == 10


def test_huge_bdp_is_clamped_and_asks_for_streams():
    # 400 Gbit/s x 200 ms = 10,000,000,000 B: no single buffer (max 2^31-1) can hold it
    p = plan(400, max_rtt_ms=200, streams=1, available_congestion_control=CC)
    assert p["bdp_bytes"] == 10_000_000_000
    assert p["tcp_max_bytes"] == MAX_BUFFER
    assert p["sysctl"]["net.core.rmem_max"] == str(MAX_BUFFER)
    assert p["streams_needed"] == 5                          # ceil(1e10 / 2,147,483,647)
    assert "Clamped" in p["explain"]["tcp_max_bytes"]


def test_100g_tier_floors_and_backlog():
    p = plan(100, max_rtt_ms=1, streams=4, available_congestion_control=CC)
    assert p["tcp_max_bytes"] == 536_870_912
    assert p["sysctl"]["net.core.rmem_max"] == str(MAX_BUFFER)
    assert p["sysctl"]["net.core.netdev_max_backlog"] == "250000"


def test_largest_collaborator_rtt_is_used():
    collabs = [{"name": "near", "rtt_ms": 5}, {"name": "far", "rtt_ms": 150}, {"name": "mid", "rtt_ms": 35}]
    p = plan(10, collaborators=collabs, available_congestion_control=CC)
    assert p["rtt_ms"] == 150 and p["bdp_bytes"] == 187_500_000
    assert "collaborator far" in p["explain"]["bdp_bytes"]


def test_pacing_10g_four_streams_is_2_gbit_per_flow():
    p = plan(10, max_rtt_ms=70, streams=4, available_congestion_control=CC)
    assert p["pacing"]["per_flow_bps"] == 2_000_000_000
    assert p["pacing"]["total_bps"] == 8_000_000_000
    assert p["pacing"]["tc_maxrate"] == "2000mbit"


def test_measurement_hosts_are_not_paced():
    p = plan(10, max_rtt_ms=70, host_role="measurement", available_congestion_control=CC)
    assert p["pacing"]["enabled"] is False and p["pacing"]["tc_maxrate"] is None


def test_critical_rtt_of_an_8_mib_port_at_10g():
    p = plan(10, max_rtt_ms=70, port_buffer_bytes=8 * 2**20, available_congestion_control=CC)
    assert p["critical_rtt_ms"] == pytest.approx(6.711, abs=0.001)
    assert "below the 70.0 ms path" in p["explain"]["critical_rtt_ms"]


def test_standard_mtu_disables_probing():
    assert plan(10, max_rtt_ms=10, mtu=1500, available_congestion_control=CC)["sysctl"]["net.ipv4.tcp_mtu_probing"] == "0"


@pytest.mark.parametrize("offered,expected", [
    (["reno", "cubic", "bbr"], "bbr"),
    (["reno", "cubic", "htcp"], "htcp"),
    (["reno", "cubic"], "cubic"),
    ([], "cubic"),
])
def test_auto_congestion_control_preference(offered, expected):
    assert plan(10, max_rtt_ms=10, available_congestion_control=offered)["congestion_control"] == expected


def test_every_value_is_explained():
    p = plan(10, max_rtt_ms=70, port_buffer_bytes=1 << 23, available_congestion_control=CC)
    for key in list(p["sysctl"]) + ["bdp_bytes", "tcp_max_bytes", "streams_needed", "pacing", "critical_rtt_ms"]:
        assert p["explain"].get(key), key


@pytest.mark.parametrize("kwargs,message", [
    ({"nic_speed_gbps": 0, "max_rtt_ms": 10}, "nic_speed_gbps must be a number > 0 (got 0)"),
    ({"nic_speed_gbps": 10, "max_rtt_ms": -1}, "max_rtt_ms must be a number > 0 (got -1)"),
    ({"nic_speed_gbps": 10}, "give max_rtt_ms or collaborators"),
    ({"nic_speed_gbps": 10, "collaborators": [{"name": "x", "rtt_ms": 0}]},
     "collaborators[0] (x): rtt_ms must be a number > 0 (got 0)"),
    ({"nic_speed_gbps": 10, "max_rtt_ms": 10, "streams": 0}, "streams must be an integer >= 1 (got 0)"),
    ({"nic_speed_gbps": 10, "max_rtt_ms": 10, "mtu": 9217}, "mtu must be an integer from 1280 to 9216 (got 9217)"),
    ({"nic_speed_gbps": 10, "max_rtt_ms": 10, "congestion_control": "vegas"}, "congestion_control must be one of"),
])
def test_bad_input_names_the_parameter(kwargs, message):
    with pytest.raises(PlanError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        plan(**kwargs)


def test_module_standalone_through_ansible():
    result = run([str(VENV_BIN / "ansible"), "localhost", "-m", "dtn_tuning_plan", "-a",
                  "nic_speed_gbps=10 max_rtt_ms=70 streams=1 mtu=9000 host_role=dtn", "-o"])
    assert result.returncode == 0, result.stdout + result.stderr
    payload = json.loads(result.stdout.split("=>", 1)[1])
    assert payload["bdp_bytes"] == 87_500_000 and payload["changed"] is False


def test_module_rejects_unknown_congestion_control():
    result = run([str(VENV_BIN / "ansible"), "localhost", "-m", "dtn_tuning_plan", "-a",
                  "nic_speed_gbps=10 max_rtt_ms=70 congestion_control=vegas", "-o"])
    assert result.returncode != 0
    assert "congestion_control" in result.stdout and "vegas" in result.stdout
