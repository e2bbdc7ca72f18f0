"""The dtn_tuning decision filter: ok / drift / unsupported, with reasons."""
from __future__ import annotations

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT))
from module_utils.dtn_tuning_math import plan  # noqa: E402
from dtn_tuning import dtn_tuning_items, dtn_tuning_link_env  # noqa: E402

SETTINGS = {"interfaces": ["eth0"], "mtu": 9000, "txqueuelen": 10000, "rings": "max",
            "offloads": {"gro": True, "lro": False}, "cpu_governor": "performance",
            "tuned_profile": "network-throughput", "irq_affinity": False}


def probe(**sysctl_overrides):
    sysctl = {
        "net.ipv4.tcp_rmem": {"present": True, "value": "4096 87380 33554432", "writable": True},
        "net.core.rmem_max": {"present": True, "value": "4194304", "writable": False,
                              "reason": "the kernel refused the write (Permission denied)"},
    }
    sysctl.update(sysctl_overrides)
    return {
        "sysctl": sysctl,
        "fq": {"supported": False, "reason": "the kernel has no fq qdisc"},
        "interfaces": {"eth0": {"exists": True, "mtu": 1500, "max_mtu": 65535, "txqueuelen": 10000,
                                "qdisc": "noqueue", "rings": {"supported": False, "reason": "no rings"},
                                "offloads": {"gro": {"on": True, "fixed": False},
                                             "lro": {"on": False, "fixed": True}}}},
        "cpufreq": {"supported": False, "reason": "no cpufreq driver", "governors": {}, "available": []},
        "tuned": {"installed": False}, "irqbalance": {"installed": False, "active": False},
    }


def by_setting(items):
    return {(i["scope"], i["setting"]): i for i in items}


def test_statuses_and_reasons():
    p = plan(10, max_rtt_ms=50, streams=4, available_congestion_control=["reno", "cubic", "bbr"])
    items = by_setting(dtn_tuning_items(p, probe(), SETTINGS))
    assert items[("sysctl", "net.ipv4.tcp_rmem")]["status"] == "ok"
    assert items[("sysctl", "net.core.rmem_max")]["status"] == "unsupported"
    assert "refused" in items[("sysctl", "net.core.rmem_max")]["reason"]
    assert items[("eth0", "mtu")]["status"] == "drift"            # 1500 now, 9000 wanted
    assert items[("eth0", "qdisc")]["status"] == "unsupported"
    assert items[("eth0", "offload_lro")]["status"] == "ok"       # fixed off, wanted off
    assert items[("cpu", "cpu_governor")]["status"] == "unsupported"
    assert ("tuned", "tuned_profile") not in items                # only where tuned is installed


def test_congestion_control_the_kernel_does_not_offer_is_unsupported():
    p = plan(10, max_rtt_ms=50, congestion_control="htcp", available_congestion_control=["reno", "cubic", "bbr"])
    p["available_congestion_control"] = ["reno", "cubic", "bbr"]
    state = {"net.ipv4.tcp_congestion_control": {"present": True, "value": "bbr", "writable": True}}
    item = by_setting(dtn_tuning_items(p, probe(**state), SETTINGS))[("sysctl", "net.ipv4.tcp_congestion_control")]
    assert item["status"] == "unsupported"
    assert item["reason"] == "the kernel does not offer htcp (it offers reno cubic bbr)"


def test_link_env_carries_only_supported_settings():
    p = plan(10, max_rtt_ms=50, streams=4, available_congestion_control=["bbr"])
    env = dtn_tuning_link_env(dtn_tuning_items(p, probe(), SETTINGS), "eth0")
    assert env == {"DTN_TUNING_MTU": "9000", "DTN_TUNING_TXQUEUELEN": "10000", "DTN_TUNING_OFFLOADS": "gro on lro off"}
