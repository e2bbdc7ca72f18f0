"""What the perfsonar and zeek roles generate, derived from real inventories and
checked with the ecosystem's own validators: perfSONAR's pSConfig JSON schema,
zeek-script parse (zeekscript), and zeekctl's node.cfg rules."""
from __future__ import annotations

import configparser
import importlib.util
import json
import os
import subprocess
from pathlib import Path

import jsonschema
import pytest

from conftest import ROOT, VENV_BIN, playbook

# perfSONAR's schema is test data beside the project, never copied into it: next to the
# checkout, at the workspace's shared folder, or where SDMZ_PSCONFIG_SCHEMA says.
_CANDIDATES = [Path(p) for p in (os.environ.get("SDMZ_PSCONFIG_SCHEMA"),) if p] + [
    ROOT.parent / "shared" / "schemas" / "psconfig-schema.json",
    Path("/work/shared/schemas/psconfig-schema.json")]
PSCONFIG_SCHEMA = next((p for p in _CANDIDATES if p.is_file()), _CANDIDATES[0])


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "module_utils" / ("%s.py" % name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sdmz_zeek = _load("sdmz_zeek")
sdmz_psconfig = _load("sdmz_psconfig")


def render(tmp_path, inventory, *extra):
    out = tmp_path / "out"
    result = playbook("-i", "inventories/%s" % inventory, "tests/fixtures/measurement/render.yml",
                      "-e", "perfsonar_output_dir=%s" % out, "-e", "zeek_output_dir=%s" % (out / "zeek"),
                      "-e", "zeek_sensor_cpus=16", *extra)
    return result, out


@pytest.fixture(scope="module", params=["lab", "example-campus"])
def rendered(request, tmp_path_factory):
    result, out = render(tmp_path_factory.mktemp(request.param), request.param)
    assert result.returncode == 0, result.stdout[-4000:]
    site = {"lab": "site_a", "example-campus": "campus"}[request.param]
    return request.param, out, site


def psconfig_schema():
    if not PSCONFIG_SCHEMA.is_file():
        pytest.skip("perfSONAR's pSConfig schema is in none of %s: schema validation NOT run"
                    % ", ".join(str(p) for p in _CANDIDATES))
    return json.loads(PSCONFIG_SCHEMA.read_text())


def test_psconfig_template_passes_perfsonars_schema(rendered):
    inventory, out, site = rendered
    template = json.loads((out / ("%s-sdmz.json" % site)).read_text())
    jsonschema.Draft4Validator(psconfig_schema()).validate(template)
    assert set(template["tests"]) == {"throughput", "latencybg", "trace"}
    assert template["schedules"]["every-throughput"] == {"repeat": "PT4H", "slip": "PT2H", "sliprand": True}
    assert template["tests"]["throughput"]["spec"] == {"source": "{% address[0] %}", "dest": "{% address[1] %}",
                                                       "duration": "PT30S"}
    mesh = template["groups"]["%s-mesh" % site]
    if inventory == "lab":
        assert [a["name"] for a in mesh["addresses"]] == ["ps1", "ps1-v6"]
        assert template["addresses"]["ps1"] == {"address": "198.18.1.13"}
        assert "%s-collaborators" % site not in template["groups"]  # the lab's collaborator lists no perfSONAR
    else:
        remote = template["groups"]["campus-collaborators"]["b-addresses"]
        assert {r["name"] for r in remote} == {"neutron_lab-198.51.100.10", "climate_center-198.51.100.130",
                                               "climate_center-2001.db8.b000..130"}
        assert all(template["addresses"][r["name"]]["no-agent"] for r in remote)
        assert template["tasks"]["campus-collaborators-throughput"] == {
            "group": "campus-collaborators", "test": "throughput", "schedule": "every-throughput"}


def test_the_schema_catches_a_broken_template(rendered):
    _, out, site = rendered
    template = json.loads((out / ("%s-sdmz.json" % site)).read_text())
    template["schedules"]["every-throughput"]["repeat"] = "4 hours"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(psconfig_schema()).validate(template)


ZEEK_SCRIPTS = ["local.zeek", "sdmz/__load__.zeek", "sdmz/main.zeek", "sdmz/scan.zeek", "sdmz/elephant.zeek",
                "sdmz/netcontrol.zeek"]


@pytest.mark.parametrize("script", ZEEK_SCRIPTS)
def test_every_generated_zeek_script_parses(rendered, script):
    _, out, _ = rendered
    result = subprocess.run([str(VENV_BIN / "zeek-script"), "parse", str(out / "zeek" / script)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_zeek_script_parse_rejects_a_broken_script(rendered, tmp_path):
    _, out, _ = rendered
    broken = tmp_path / "broken.zeek"
    broken.write_text((out / "zeek" / "sdmz" / "main.zeek").read_text().replace("return a in collaborator_nets;",
                                                                             "return a in collaborator_nets"))
    result = subprocess.run([str(VENV_BIN / "zeek-script"), "parse", str(broken)], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 2, result.stderr


def test_node_cfg_follows_zeekctls_rules(rendered):
    inventory, out, _ = rendered
    text = (out / "zeek" / "node.cfg").read_text()
    assert sdmz_zeek.check_node_cfg(text, None) == []
    cfg = configparser.ConfigParser()
    cfg.read_string(text)
    workers = [cfg[s] for s in cfg.sections() if cfg[s]["type"] == "worker"]
    assert all(w["lb_method"] == "af_packet" for w in workers)
    fanouts = [(w["host"], w["af_packet_fanout_id"]) for w in workers]
    assert len(fanouts) == len(set(fanouts))
    if inventory == "example-campus":
        assert sorted(s for s in cfg.sections() if cfg[s]["type"] != "worker") == [
            "logger-zeek-mgr", "manager-zeek-mgr", "proxy-zeek-mgr"]
        assert [w["lb_procs"] for w in workers] == ["15", "15"]  # 16 CPUs, one kept back
        assert workers[0]["pin_cpus"] == ",".join(str(c) for c in range(1, 16))
        assert [w["af_packet_fanout_id"] for w in workers] == ["21", "22"]
    else:
        assert [w["interface"] for w in workers] == ["span0"]


def test_networks_and_policy_come_from_the_inventory(rendered):
    inventory, out, _ = rendered
    networks = (out / "zeek" / "networks.cfg").read_text()
    main = (out / "zeek" / "sdmz" / "main.zeek").read_text()
    if inventory == "lab":
        assert "198.18.1.0/24\tScience DMZ site_a (dmz_a)" in networks
        assert "[fd53:444d:1::]/64" in networks or "fd53:444d:1::/64" in networks
        assert "198.18.2.0/24," in main and "[fd53:444d:2::]/64," in main
        assert "198.18.1.11," in main and "198.18.1.12," in main and "198.18.1.13," not in main
        assert "PortRange($proto=tcp, $lo=50000, $hi=51000)" in main
        assert "PortRange($proto=tcp, $lo=5100, $hi=5199)" in main
    else:
        assert "192.0.2.0/26\t" in networks
        assert "198.51.100.0/25," in main and "[2001:db8:c000::]/48," in main
        assert "192.0.2.11," in main and "[2001:db8:100::11]," in main
        assert "PortRange($proto=tcp, $lo=2811, $hi=2811)" in main


@pytest.mark.parametrize("extra, message", [
    (["-e", "zeek_lb_procs=64"], "zeek_lb_procs: 64 workers on each of 1 capture interface(s) need 64 CPUs; the host has 16"),
    (["-e", '{"zeek_capture_interfaces": ["mgmt0"]}'], "zeek_capture_interfaces: 'mgmt0' is the management interface"),
    (["-e", '{"perfsonar_tests": {"owamp": {"type": "owping", "interval": "PT1H"}}}'],
     "perfsonar_tests.owamp.type: unknown test type 'owping'"),
    (["-e", '{"perfsonar_tests": {"bw": {"type": "throughput", "interval": "4h"}}}'],
     "perfsonar_tests.bw.interval: '4h' is not an ISO 8601 duration"),
    (["-e", '{"perfsonar_tests": {"bw": {"type": "throughput", "interval": "PT1H", "spec": {"duration": "30"}}}}'],
     "perfsonar_tests.bw.spec.duration: '30' is not an ISO 8601 duration"),
])
def test_bad_input_is_one_clear_error_naming_the_key(tmp_path, extra, message):
    result, out = render(tmp_path, "lab", *extra)
    assert result.returncode != 0
    assert message in result.stdout, result.stdout[-3000:]


def test_node_cfg_checker_applies_zeekctls_rules():
    good = "[manager]\ntype=manager\nhost=10.0.0.1\n[proxy-1]\ntype=proxy\nhost=10.0.0.1\n"
    assert sdmz_zeek.check_node_cfg(good) == []
    cases = {
        "[w]\ntype=worker\nhost=h\ninterface=eth1\nlb_procs=4\n": "lb_procs needs an lb_method",
        "[w]\ntype=worker\nhost=h\ninterface=eth1\nlb_method=af_packet\n": "lb_method needs lb_procs",
        "[w]\ntype=worker\nhost=h\ninterface=eth1\nlb_method=rss\nlb_procs=2\n": "unknown lb_method 'rss'",
        ("[w1]\ntype=worker\nhost=h\ninterface=eth1\nlb_method=af_packet\nlb_procs=2\naf_packet_fanout_id=21\n"
         "[w2]\ntype=worker\nhost=h\ninterface=eth2\nlb_method=af_packet\nlb_procs=2\naf_packet_fanout_id=21\n"):
            "af_packet_fanout_id 21 is already used by [w1]",
        "[w]\ntype=worker\nhost=h\ninterface=eth1\nlb_method=af_packet\nlb_procs=4\npin_cpus=1,2\naf_packet_fanout_id=1\n":
            "pin_cpus names 2 CPUs for 4 processes",
    }
    for body, message in cases.items():
        problems = sdmz_zeek.check_node_cfg(good + body)
        assert any(message in p for p in problems), (message, problems)
    assert any("exactly one manager" in p for p in sdmz_zeek.check_node_cfg("[proxy]\ntype=proxy\nhost=h\n"))


def test_iso_durations():
    assert all(sdmz_psconfig.is_duration(d) for d in ("PT30S", "PT4H", "P1D", "P1W", "PT0.5S", "P1DT2H"))
    assert not any(sdmz_psconfig.is_duration(d) for d in ("P", "PT", "4h", "PT4", "30", "P1DT", ""))
