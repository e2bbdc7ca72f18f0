"""playbooks/validate.yml against the shipped inventories and a set of broken
ones: each broken inventory must fail with one line naming host/collaborator
and key, and nothing else in the play may run."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, playbook

LAB = ROOT / "inventories" / "lab"


def host(doc: dict, name: str) -> dict:
    """Find a host's variables anywhere in a YAML inventory tree."""
    stack = [doc["all"]]
    while stack:
        group = stack.pop()
        if name in (group.get("hosts") or {}):
            return group["hosts"][name]
        stack.extend((group.get("children") or {}).values())
    raise KeyError(name)


def iface(doc: dict, name: str, ifname: str) -> dict:
    return next(i for i in host(doc, name)["sdmz_interfaces"] if i["name"] == ifname)


def collaborator(site: dict) -> dict:
    return site["sdmz_collaborators"][0]


# (case id, mutation of (hosts.yml, group_vars/all/site.yml), expected line)
CASES = [
    ("wrong-type", lambda h, s: host(h, "dtn1").update(sdmz_nic_speed_gbps="fast"),
     'host dtn1: sdmz_nic_speed_gbps: \'fast\' is not of type \'number\''),
    ("invalid-ip", lambda h, s: iface(h, "dtn1", "dmz0").update(ipv4="198.18.1.300/24"),
     'host dtn1: sdmz_interfaces[1].ipv4: "198.18.1.300/24" is not a valid IPv4 interface address'),
    ("ip-without-prefix", lambda h, s: iface(h, "gw1", "dmz0").update(ipv4="198.18.1.12"),
     'host gw1: sdmz_interfaces[1].ipv4: "198.18.1.12" is not a valid IPv4 interface address'),
    ("invalid-ipv6", lambda h, s: iface(h, "ps1", "dmz0").update(ipv6="fd53:444d:1::zz/64"),
     'host ps1: sdmz_interfaces[1].ipv6: "fd53:444d:1::zz/64" is not a valid IPv6 interface address'),
    ("cidr-host-bits", lambda h, s: collaborator(s).update(prefixes_v4=["198.18.2.1/24"]),
     'collaborator siteb: prefixes_v4[0]: "198.18.2.1/24" is not a valid IPv4 network (no host bits set)'),
    ("mtu-too-large", lambda h, s: iface(h, "dtn2", "dmz0").update(mtu=9217),
     "host dtn2: sdmz_interfaces[1].mtu: 9217 is greater than the maximum of 9216"),
    ("mtu-too-small", lambda h, s: iface(h, "dtn2", "dmz0").update(mtu=576),
     "host dtn2: sdmz_interfaces[1].mtu: 576 is less than the minimum of 1280"),
    ("lab-segment-mtu", lambda h, s: s["sdmz_lab_segments"][1].update(mtu=9300),
     "site: sdmz_lab_segments[1].mtu: 9300 is greater than the maximum of 9216"),
    ("nic-speed-zero", lambda h, s: host(h, "gw2").update(sdmz_nic_speed_gbps=0),
     "host gw2: sdmz_nic_speed_gbps: 0 is less than or equal to the minimum of 0"),
    ("rtt-negative", lambda h, s: collaborator(s).update(rtt_ms=-5),
     "collaborator siteb: rtt_ms: -5 is less than or equal to the minimum of 0"),
    ("unknown-platform", lambda h, s: host(h, "border").update(sdmz_platform="ios_classic"),
     'host border: sdmz_platform: "ios_classic" is not one of eos, junos, nxos_ssh, iosxr, sdmz_linux'),
    ("duplicate-address", lambda h, s: iface(h, "gw1", "dmz0").update(ipv4="198.18.1.11/24"),
     "address 198.18.1.11 is already used by host"),
    ("group-requires-var", lambda h, s: host(h, "dtn1").pop("sdmz_nic_speed_gbps"),
     "host dtn1: sdmz_nic_speed_gbps: missing (hosts in group 'dtn' require it)"),
    ("device-requires-platform", lambda h, s: host(h, "border").pop("sdmz_platform"),
     "host border: sdmz_platform: missing (hosts in group 'network_devices' require it)"),
    ("collaborator-without-prefixes",
     lambda h, s: (collaborator(s).pop("prefixes_v4"), collaborator(s).pop("prefixes_v6")),
     "collaborator siteb: prefixes_v4/prefixes_v6: has no prefixes: give at least one in prefixes_v4 or prefixes_v6"),
    ("collaborator-empty-prefixes",
     lambda h, s: collaborator(s).update(prefixes_v4=[], prefixes_v6=[]),
     "collaborator siteb: prefixes_v4/prefixes_v6: has no prefixes"),
    ("unknown-service", lambda h, s: collaborator(s).update(services=["gridftp", "telnet"]),
     "collaborator siteb: services: unknown service 'telnet'"),
    ("reversed-port-range",
     lambda h, s: s.update(sdmz_services={"xfer": {"offered_by": ["dtn"], "rules": [{"protocol": "tcp", "ports": "51000-50000"}]}}),
     'site: sdmz_services.xfer.rules[0].ports: "51000-50000" is not a valid port or port range '
     "(range is reversed (51000 > 50000))"),
    ("typo-variable", lambda h, s: host(h, "ps1").update(sdmz_nic_sped_gbps=10),
     "host ps1: sdmz_nic_sped_gbps: is not a variable the kit knows (a typo?)"),
    ("undeclared-lab-segment", lambda h, s: iface(h, "dtn1", "dmz0").update(lab_segment="dmz_z"),
     "host dtn1: sdmz_interfaces[1].lab_segment: 'dmz_z' is not in sdmz_lab_segments"),
    ("overlapping-collaborators",
     lambda h, s: s["sdmz_collaborators"].append({"name": "sitec", "contact": "noc@sitec.example.org",
                                                   "prefixes_v4": ["198.18.2.128/25"], "services": ["gridftp"]}),
     "collaborator sitec: prefixes_v4[0] 198.18.2.128/25 overlaps collaborator siteb's prefixes_v4[0] 198.18.2.0/24"),
    ("blocklist-overlaps-collaborator",
     lambda h, s: s.update(sdmz_acl_blocklist=[{"address": "198.18.2.5/32", "expiry": "2099-01-01T00:00:00Z",
                                                 "reason": "false positive"}]),
     "acl_blocklist[0].address: 198.18.2.5/32 overlaps collaborator siteb's prefixes_v4[0] 198.18.2.0/24"),
    ("blocklist-expiry-without-zone",
     lambda h, s: s.update(sdmz_acl_blocklist=[{"address": "203.0.113.5/32", "expiry": "2099-01-01T00:00:00",
                                                 "reason": "scan"}]),
     "site: sdmz_acl_blocklist[0].expiry: "),
    ("bad-route", lambda h, s: host(h, "dtn1")["sdmz_routes"].append({"to": "10.0.0.0/33", "via": "198.18.1.1"}),
     "host dtn1: sdmz_routes[2].to: \"10.0.0.0/33\" must be 'default', 'default6' or a network in CIDR notation"),
]


def broken_inventory(tmp_path: Path, mutate) -> Path:
    inv = tmp_path / "inventory"
    shutil.copytree(LAB, inv)
    hosts = yaml.safe_load((inv / "hosts.yml").read_text())
    site_file = inv / "group_vars" / "all" / "site.yml"
    site = yaml.safe_load(site_file.read_text())
    mutate(hosts, site)
    (inv / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    site_file.write_text(yaml.safe_dump(site, sort_keys=False))
    return inv


@pytest.mark.parametrize("inventory", ["lab", "example-campus"])
def test_shipped_inventories_are_valid(inventory):
    result = playbook("playbooks/validate.yml", "-i", str(ROOT / "inventories" / inventory))
    assert result.returncode == 0, result.stdout[-3000:]
    assert "inventory_check (ok)" in result.stdout


@pytest.mark.parametrize("case,mutate,expected", CASES, ids=[c[0] for c in CASES])
def test_broken_inventory_is_rejected_with_its_message(tmp_path, case, mutate, expected):
    inv = broken_inventory(tmp_path, mutate)
    result = playbook("playbooks/validate.yml", "-i", str(inv))
    assert result.returncode != 0, "validate.yml accepted a broken inventory (%s)" % case
    problems = [line.strip()[2:] for line in result.stdout.splitlines()
                if line.startswith("  - ")]
    assert any(expected in p for p in problems), "\n".join(problems) or result.stdout[-3000:]
    # One clear line for the one thing that is wrong.
    assert len(problems) == 1, "\n".join(problems)


def test_site_stops_at_validation(tmp_path):
    """A broken inventory stops site.yml before any other play runs."""
    inv = broken_inventory(tmp_path, CASES[0][1])
    result = playbook("playbooks/site.yml", "-i", str(inv))
    assert result.returncode != 0
    plays = [line for line in result.stdout.splitlines() if line.startswith("PLAY [")]
    assert len(plays) == 1 and plays[0].startswith("PLAY [Validate the inventory]"), plays
