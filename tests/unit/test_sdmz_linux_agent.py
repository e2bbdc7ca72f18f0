"""The sdmz_linux driver's pure parts: the agent's configuration parser and the
driver's merge of a candidate into the running configuration."""
from __future__ import annotations

import pytest

from conftest import ROOT  # noqa: F401  (puts the project on sys.path)
from napalm_sdmz_linux import driver
from napalm_sdmz_linux import netconf_agent as agent

CONFIG = """# comment
interface wan0 mtu 9000
interface wan0 shaper tbf rate 10000000000 burst 5000000 limit 25000000
interface dmz0 shaper none
table inet sdmz {
\tchain input {
\t}
}
"""


def test_parse_reads_interfaces_and_table():
    parsed = agent.parse(CONFIG)
    assert parsed["interfaces"]["wan0"] == {"mtu": 9000, "shaper": {"rate": 10000000000, "burst": 5000000,
                                                                     "limit": 25000000}}
    assert parsed["interfaces"]["dmz0"] == {"shaper": None}
    assert parsed["nft"].startswith("table inet sdmz {")


@pytest.mark.parametrize("text,message", [
    ("interface wan0 mtu jumbo\n", "line 1: interface wan0: cannot read 'mtu jumbo'"),
    ("interface wan0 mtu 20\n", "line 1: interface wan0: cannot read 'mtu 20'"),
    ("iface wan0 mtu 9000\n", "line 1: expected 'interface NAME mtu N|shaper ...'"),
    ("interface wan0;rm mtu 9000\n", "line 1: expected"),
    ("table ip filter {\n}\n", "only 'table inet sdmz' may be configured, found 'table ip filter'"),
    ("table inet sdmz {\n}\ntable inet other {\n}\n", "found 'table inet other'"),
])
def test_parse_refuses_what_it_does_not_own(text, message):
    with pytest.raises(agent.ConfigError) as err:
        agent.parse(text)
    assert message in str(err.value)


def test_merge_overlays_interface_lines_and_keeps_the_running_table():
    running = "interface wan0 mtu 1500\ninterface dmz0 mtu 9000\ntable inet sdmz {\n\tcounter a {\n\t}\n}\n"
    merged = driver.merge_configs(running, "interface wan0 mtu 9000\n")
    assert "interface wan0 mtu 9000" in merged and "interface wan0 mtu 1500" not in merged
    assert "interface dmz0 mtu 9000" in merged and "counter a" in merged


def test_merge_with_a_table_replaces_the_running_table():
    running = "interface wan0 mtu 1500\ntable inet sdmz {\n\tcounter a {\n\t}\n}\n"
    merged = driver.merge_configs(running, "table inet sdmz {\n\tcounter b {\n\t}\n}\n")
    assert "counter b" in merged and "counter a" not in merged and "interface wan0 mtu 1500" in merged


def test_shell_quoting_of_agent_arguments():
    assert driver._quote("apply") == "apply"
    assert driver._quote("a b;c") == "'a b;c'"
    assert driver._quote("it's") == "'it'\\''s'"
