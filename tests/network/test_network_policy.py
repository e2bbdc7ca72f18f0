"""The network devices' policy without any device: golden renderings of every platform
from the example-campus inventory, the policy rules themselves, and bad input that stops
network.yml before any device is touched."""
from __future__ import annotations

import datetime
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, playbook

GOLDEN = ROOT / "tests" / "golden" / "network"
CAMPUS = ROOT / "inventories" / "example-campus"
spec = importlib.util.spec_from_file_location("sdmz_acl", ROOT / "module_utils" / "sdmz_acl.py")
sdmz_acl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sdmz_acl)

RENDERED = ["border.junos.set", "border2.iosxr.cfg", "dmz-sw1.eos.cfg", "dmz-sw2.nxos.cfg",
            "testbed-rtr.nft.conf"]


@pytest.fixture(scope="module")
def campus_render(tmp_path_factory):
    out = tmp_path_factory.mktemp("render")
    result = playbook("playbooks/network.yml", "-i", str(CAMPUS), "-e", "network_device_render_only=true",
                      "-e", "network_device_config_dir=%s/configs" % out, "-e", "network_device_audit_dir=%s/audit" % out,
                      "-e", "network_device_blocklist_file=%s/none.yml" % out)
    assert result.returncode == 0, result.stdout[-4000:]
    return out, result


@pytest.mark.parametrize("name", RENDERED + ["acl-border.md", "acl-testbed-rtr.md", "acl-dmz-sw2.md"])
def test_render_matches_golden_file(campus_render, name):
    out, _ = campus_render
    rendered = (out / ("audit" if name.startswith("acl-") else "configs") / name).read_text()
    golden = GOLDEN / name
    if os.environ.get("SDMZ_UPDATE_GOLDEN"):
        golden.write_text(rendered)
    assert rendered == golden.read_text(), "%s differs from %s (SDMZ_UPDATE_GOLDEN=1 rewrites it)" % (name, golden)


def test_render_only_contacts_no_device(campus_render):
    """The example campus's addresses are unreachable documentation ranges: rendering worked
    anyway, and no NAPALM or Netmiko task ran."""
    _, result = campus_render
    assert "Load, diff, commit" not in result.stdout
    assert "Read queue/buffer and ACL counters" not in result.stdout
    assert "Install the agent" not in result.stdout


def test_shallow_buffer_platform_reports_its_critical_rtt(campus_render):
    _, result = campus_render
    text = " ".join((result.stdout + result.stderr).split())
    assert ("dmz-sw2: port Ethernet1/4: 10 Gbit/s x 150 ms wants a 187500000-byte buffer, but the platform "
            "offers at most 10485760 bytes per port: at line rate it serves an RTT of up to 8.389 ms") in text


def test_eos_mtu_is_capped_at_the_platform_maximum(campus_render):
    out, _ = campus_render
    eos = (out / "configs" / "dmz-sw1.eos.cfg").read_text()
    assert "mtu 9214" in eos and "mtu 9216" not in eos


def test_nftables_rendering_is_accepted_by_nft(campus_render, tmp_path):
    """nft itself checks the rendered table (nft -c changes nothing)."""
    if not shutil.which("nft"):
        pytest.skip("nft is not installed")
    text = (campus_render[0] / "configs" / "testbed-rtr.nft.conf").read_text()
    table = text[text.index("table inet sdmz"):]
    path = tmp_path / "t.nft"
    path.write_text(table)
    result = subprocess.run(["nft", "-c", "-f", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


# --- the policy rules ---------------------------------------------------------

def lab_view():
    hosts_doc = yaml.safe_load((ROOT / "inventories" / "lab" / "hosts.yml").read_text())
    view = {}

    def walk(group, groups):
        for name, hvars in (group.get("hosts") or {}).items():
            entry = view.setdefault(name, {"groups": [], "vars": {}})
            entry["groups"] = sorted(set(entry["groups"]) | set(groups))
            entry["vars"].update(hvars or {})
        for child, sub in (group.get("children") or {}).items():
            walk(sub, groups + [child])
    walk(hosts_doc["all"], [])
    site = yaml.safe_load((ROOT / "inventories" / "lab" / "group_vars" / "all" / "site.yml").read_text())
    catalogue = yaml.safe_load((ROOT / "policy" / "services.yml").read_text())["sdmz_service_catalogue"]
    return view, site["sdmz_collaborators"], catalogue


NOW = datetime.datetime(2026, 11, 21, 12, 0, tzinfo=datetime.timezone.utc)
OPTIONS = {"link_rules": [{"protocol": "icmp"}]}


def border_policy(collaborators=None, catalogue=None, blocklist=(), hosts=None):
    view, collabs, cat = lab_view()
    return sdmz_acl.device_policy("border", hosts or view, collaborators if collaborators is not None else collabs,
                                  catalogue or cat, list(blocklist), NOW, OPTIONS)


def test_lab_acl_permits_exactly_the_collaborators_services():
    acl = border_policy()["acl"]["ipv4"]
    flows = {(e["source"], e["destination"], e["protocol"], e["port_min"], e["port_max"])
             for e in acl if e["kind"] == "flow"}
    assert ("198.18.2.0/24", "198.18.1.11/32", "tcp", 2811, 2812) in flows      # gridftp + sdmz_transfer merged
    assert ("198.18.2.0/24", "198.18.1.11/32", "tcp", 50000, 51000) in flows
    assert ("198.18.2.0/24", "198.18.1.12/32", "tcp", 5100, 5199) in flows      # stream proxy on gw1
    assert ("198.18.2.0/24", "198.18.1.13/32", "tcp", 861, 862) in flows        # OWAMP + TWAMP control
    # Only site A's hosts are destinations; dtn2 (site B) never is.
    assert not [e for e in acl if e["destination"].startswith("198.18.2.")]
    assert acl[-1]["kind"] == "default" and acl[-1]["action"] == "deny" and acl[-1]["counter"] == "deny"
    assert [e["seq"] for e in acl] == sorted(e["seq"] for e in acl)


def test_blocklist_entries_come_first_and_expired_ones_are_dropped():
    policy = border_policy(blocklist=[
        {"address": "198.18.3.66/32", "expiry": "2026-11-21T13:00:00Z", "reason": "scan"},
        {"address": "203.0.113.0/24", "expiry": "2026-11-21T11:00:00Z", "reason": "old"}])
    acl = policy["acl"]["ipv4"]
    assert acl[0]["kind"] == "block" and acl[0]["source"] == "198.18.3.66/32"
    assert not [e for e in acl if e["source"] == "203.0.113.0/24"]
    assert policy["blocklist_expired"][0]["address"] == "203.0.113.0/24"


@pytest.mark.parametrize("case,change,expected", [
    ("invalid-prefix", lambda c, k: c[0].update(prefixes_v4=["198.18.2.1/24"]),
     "collaborator siteb: prefixes_v4[0]: '198.18.2.1/24' is not a valid network: 198.18.2.1/24 has host bits set"),
    ("reversed-ports", lambda c, k: k["gridftp"]["rules"][0].update(ports="2811-2800"),
     "services catalogue gridftp.rules[0]: ports '2811-2800' is reversed (2811 > 2800)"),
    ("unknown-service", lambda c, k: c[0]["services"].append("telnet"),
     "collaborator siteb: services: unknown service 'telnet'"),
    ("no-prefixes", lambda c, k: c[0].update(prefixes_v4=[], prefixes_v6=[]),
     "collaborator siteb: prefixes_v4/prefixes_v6: has no prefixes"),
    ("shadowed", lambda c, k: c.append({"name": "sitec", "contact": "x@y", "prefixes_v4": ["198.18.2.128/25"],
                                         "services": ["gridftp"]}),
     "collaborator sitec: prefixes_v4[0] 198.18.2.128/25 overlaps collaborator siteb's prefixes_v4[0] 198.18.2.0/24"),
])
def test_bad_policy_input_is_one_clear_error(case, change, expected):
    _, collabs, cat = lab_view()
    change(collabs, cat)
    with pytest.raises(sdmz_acl.PolicyError) as err:
        border_policy(collabs, cat)
    assert len(err.value.problems) == 1, err.value.problems
    assert expected in err.value.problems[0], err.value.problems


def test_shadowed_entry_is_reported():
    """A rule no packet can reach (here: an any-source link rule before a collaborator flow)."""
    view, collabs, cat = lab_view()
    options = {"link_rules": []}
    policy = sdmz_acl.device_policy("border", view, collabs, cat, [], NOW, options)
    acl = policy["acl"]["ipv4"]
    flow = next(e for e in acl if e["kind"] == "flow")
    broad = dict(flow, kind="link", source="198.18.0.0/16", seq=1, reasons=[{"inventory": "test"}])
    problems = sdmz_acl.shadow_problems("border", {"ipv4": [broad] + acl})
    assert problems and "is shadowed by entry 1" in problems[0]


def test_unknown_platform_is_refused():
    view, collabs, cat = lab_view()
    view["border"]["vars"]["sdmz_platform"] = "ios_classic"
    with pytest.raises(sdmz_acl.PolicyError) as err:
        sdmz_acl.device_policy("border", view, collabs, cat, [], NOW, OPTIONS)
    assert "sdmz_platform: unknown platform 'ios_classic'" in err.value.problems[0]


def test_network_yml_stops_before_any_device_on_a_blocklist_overlapping_a_collaborator(tmp_path):
    blocklist = tmp_path / "blocklist.yml"
    blocklist.write_text(yaml.safe_dump({"sdmz_acl_blocklist_dynamic": [
        {"address": "198.18.2.11/32", "expiry": "2099-01-01T00:00:00Z", "reason": "false positive"}]}))
    result = playbook("playbooks/network.yml", "-e", "network_device_blocklist_file=%s" % blocklist,
                      "-e", "network_device_config_dir=%s" % tmp_path, "-e", "network_device_audit_dir=%s" % tmp_path)
    assert result.returncode != 0
    assert "no device was touched" in result.stdout
    assert ("acl_blocklist[0].address: 198.18.2.11/32 overlaps collaborator siteb's prefixes_v4[0] 198.18.2.0/24"
            in result.stdout)
    plays = [line for line in result.stdout.splitlines() if line.startswith("PLAY [")]
    assert len(plays) == 1, plays


def test_respond_refuses_to_block_a_collaborator(tmp_path):
    blocklist = tmp_path / "blocklist.yml"
    result = playbook("playbooks/respond.yml", "-e", "block=198.18.2.11", "-e", "reason=test",
                      "-e", "network_device_blocklist_file=%s" % blocklist)
    assert result.returncode != 0
    assert "block: 198.18.2.11/32 overlaps collaborator siteb's prefixes_v4[0] 198.18.2.0/24" in result.stdout
    assert not blocklist.exists()
