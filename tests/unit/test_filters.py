"""The inventory filters: apt mirror discovery and the lab topology view."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from sdmz_inventory import sdmz_apt_mirror, sdmz_inventory_view, sdmz_lab_nodes

DEB822 = """Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
"""


def test_mirror_from_deb822_skips_updates_and_security():
    assert sdmz_apt_mirror([DEB822]) == {"mirror": "http://deb.debian.org/debian", "suite": "bookworm"}


def test_mirror_from_one_line_format_with_options():
    text = ("# comment\ndeb-src http://src.example/debian bookworm main\n"
            "deb [arch=amd64 signed-by=/k.gpg] http://mirror.example.edu/debian/ trixie main\n")
    assert sdmz_apt_mirror([text]) == {"mirror": "http://mirror.example.edu/debian", "suite": "trixie"}


def test_security_only_sources_are_an_error_naming_the_override():
    with pytest.raises(AnsibleFilterError, match="lab_image_mirror and lab_image_suite"):
        sdmz_apt_mirror(["deb http://security.debian.org/debian-security bookworm-security main\n"])


HOSTVARS = {
    "r1": {"group_names": ["network_devices"], "sdmz_forwarding": True, "sdmz_platform": "sdmz_linux",
           "sdmz_collaborators": [{"name": "x"}],
           "sdmz_interfaces": [{"name": "wan0", "role": "wan", "lab_segment": "wan", "mtu": 9000,
                                "ipv4": "198.18.100.1/29"}],
           "sdmz_routes": [{"to": "default", "via": "198.18.100.2"}], "ansible_host": "c-r1"},
    "h1": {"group_names": ["dtn"], "sdmz_interfaces": [{"name": "dmz0", "lab_segment": "dmz", "mtu": 9000,
                                                        "ipv6": "fd00::1/64"}]},
}


def test_lab_nodes_carry_wiring_only():
    nodes = sdmz_lab_nodes(HOSTVARS, ["r1", "h1"])
    assert nodes[0] == {"name": "r1", "forwarding": True,
                        "interfaces": [{"name": "wan0", "segment": "wan", "mtu": 9000, "ipv4": "198.18.100.1/29"}],
                        "routes": [{"to": "default", "via": "198.18.100.2"}]}
    assert nodes[1]["forwarding"] is False and nodes[1]["routes"] == []
    assert nodes[1]["interfaces"] == [{"name": "dmz0", "segment": "dmz", "mtu": 9000, "ipv6": "fd00::1/64"}]


def test_inventory_view_keeps_per_host_sdmz_vars_and_groups():
    view = sdmz_inventory_view(HOSTVARS, ["r1"])
    assert view["r1"]["groups"] == ["network_devices"]
    assert set(view["r1"]["vars"]) == {"sdmz_forwarding", "sdmz_platform", "sdmz_interfaces", "sdmz_routes"}
