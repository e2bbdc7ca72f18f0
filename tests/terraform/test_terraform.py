"""The Terraform side, offline: fmt, validate, tflint, `terraform test` with a
mocked OpenStack provider, the security-group policy compared with the Ansible
side's flows, and the generated inventory run through validate.yml."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, playbook, run

TOOLS = ROOT / "build" / "tools" / "bin"
TF = str(TOOLS / "terraform")
TFLINT = str(TOOLS / "tflint")
CLI_CONFIG = str(ROOT / "build" / "terraform" / "cli.tfrc")
ROOTS = ["terraform/modules/sdmz_policy", "terraform/modules/sdmz_inventory", "terraform/modules/sdmz_testbed",
         "terraform/envs/chameleon", "terraform/envs/jetstream2"]
FIXTURES = Path(__file__).parent / "fixtures"
CATALOGUE = ROOT / "policy" / "services.yml"

def _version(text: str) -> tuple:
    return tuple(int(p) for p in text.split("-")[0].split(".")[:3])


TOOLS_ENV = dict(line.split("=", 1) for line in (ROOT / "packages" / "tools.env").read_text().splitlines()
                 if "=" in line and not line.startswith("#"))
POLICIES = {
    "testbed": ROOT / "terraform" / "envs" / "testbed-policy.yml",
    "lab": ROOT / "inventories" / "lab" / "group_vars" / "all" / "site.yml",
    "example-campus": ROOT / "inventories" / "example-campus" / "group_vars" / "all" / "site.yml",
}


def tf(args: list[str], data_dir: Path, cwd: Path, timeout: int = 600):
    """terraform with the project's offline CLI config and a private data dir."""
    return run([TF, "-chdir=%s" % cwd, *args], timeout=timeout,
               TF_CLI_CONFIG_FILE=CLI_CONFIG, TF_DATA_DIR=str(data_dir), TF_IN_AUTOMATION="1",
               CHECKPOINT_DISABLE="1")


def apply_fixture(name: str, tmp_path: Path, variables: dict) -> dict:
    data, state = tmp_path / "tfdata", tmp_path / "terraform.tfstate"
    init = tf(["init", "-backend=false", "-input=false"], data, FIXTURES / name)
    assert init.returncode == 0, init.stdout + init.stderr
    args = ["apply", "-auto-approve", "-input=false", "-state=%s" % state]
    args += ["-var=%s=%s" % item for item in variables.items()]
    applied = tf(args, data, FIXTURES / name)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    out = tf(["output", "-json", "-state=%s" % state], data, FIXTURES / name)
    assert out.returncode == 0, out.stderr
    return {k: v["value"] for k, v in json.loads(out.stdout).items()}


def test_fmt():
    result = run([TF, "fmt", "-check", "-recursive", "-diff", "terraform", "tests/terraform"])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("root", ROOTS)
def test_validate(root, tmp_path):
    init = tf(["init", "-backend=false", "-input=false"], tmp_path, ROOT / root)
    assert init.returncode == 0, init.stdout + init.stderr
    result = tf(["validate", "-no-color"], tmp_path, ROOT / root)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("root", ROOTS)
def test_tflint(root):
    result = run([TFLINT, "--chdir=%s" % root, "--config=%s" % (ROOT / "terraform" / ".tflint.hcl"),
                  "--no-color", "--minimum-failure-severity=notice"])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("root", ["terraform/modules/sdmz_testbed", "terraform/envs/chameleon",
                                  "terraform/envs/jetstream2"])
def test_terraform_test_with_mock_provider(root, tmp_path):
    version = json.loads(run([TF, "version", "-json"]).stdout)["terraform_version"]
    if _version(version) < _version(TOOLS_ENV["TERRAFORM_MOCK_TESTS_MIN_VERSION"]):
        pytest.skip("terraform %s binds mock_provider \"openstack\" to hashicorp/openstack; the mocked suites "
                    "need %s+ (packages/tools.env)" % (version, TOOLS_ENV["TERRAFORM_MOCK_TESTS_MIN_VERSION"]))
    init = tf(["init", "-backend=false", "-input=false"], tmp_path, ROOT / root)
    assert init.returncode == 0, init.stdout + init.stderr
    result = tf(["test", "-no-color"], tmp_path, ROOT / root, timeout=900)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " 0 failed" in result.stdout or "Success!" in result.stdout, result.stdout[-2000:]


def ansible_flows(policy_file: Path) -> list[tuple]:
    from sdmz_policy import sdmz_policy_flows
    policy = yaml.safe_load(policy_file.read_text())
    catalogue = yaml.safe_load(CATALOGUE.read_text())["sdmz_service_catalogue"]
    return sorted((f["destination_group"], f["family"], f["protocol"], f["port_min"], f["port_max"], f["source"])
                  for f in sdmz_policy_flows(policy["sdmz_collaborators"], catalogue))


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_security_groups_equal_the_ansible_policy(policy, tmp_path):
    outputs = apply_fixture("policy", tmp_path, {"policy_file": POLICIES[policy], "catalogue_file": CATALOGUE})
    terraform_flows = sorted((f["destination_group"], f["family"], f["protocol"], f["port_min"], f["port_max"],
                              f["source"]) for f in outputs["flows"])
    expected = ansible_flows(POLICIES[policy])
    assert expected, "the policy derives no flows at all"
    assert terraform_flows == expected
    assert len(outputs["security_group_rules"]) == len(expected)


def test_generated_inventory_passes_validate(tmp_path):
    outputs = apply_fixture("inventory", tmp_path, {"policy_file": POLICIES["testbed"]})
    inventory = tmp_path / "inventories" / "testbed"
    inventory.mkdir(parents=True)
    (inventory / "hosts.yml").write_text(outputs["inventory"])
    parsed = yaml.safe_load(outputs["inventory"])
    groups = parsed["all"]["children"]["testbed"]["children"]
    assert set(groups) == {"dtn", "gateway", "perfsonar", "zeek", "wan_emulator"}
    assert groups["dtn"]["hosts"]["dtn1"]["sdmz_interfaces"][1] == {
        "name": "ens4", "role": "dmz", "ipv4": "10.52.0.10/24", "mtu": 9000, "speed_gbps": 10}
    result = playbook("playbooks/validate.yml", "-i", str(inventory))
    assert result.returncode == 0, result.stdout[-3000:]
    assert "inventory_check (ok)" in result.stdout


def test_generated_inventory_with_bad_values_is_rejected(tmp_path):
    """The pipeline does not paper over bad input: a zero NIC speed reaches validate.yml and fails there."""
    outputs = apply_fixture("inventory", tmp_path, {"policy_file": POLICIES["testbed"], "dtn_nic_speed_gbps": 0})
    inventory = tmp_path / "inv"
    inventory.mkdir()
    (inventory / "hosts.yml").write_text(outputs["inventory"])
    result = playbook("playbooks/validate.yml", "-i", str(inventory))
    assert result.returncode != 0
    assert "host dtn1: sdmz_nic_speed_gbps: 0 is less than or equal to the minimum of 0" in result.stdout


def test_tools_are_the_pinned_ones():
    version = json.loads(run([TF, "version", "-json"]).stdout)["terraform_version"]
    assert _version(version) >= _version(TOOLS_ENV["TERRAFORM_MIN_VERSION"])
    provider = list((ROOT / "build" / "terraform" / "mirror").rglob("terraform-provider-openstack_v1.54.1"))
    assert provider and provider[0].stat().st_size > 1_000_000
    assert shutil.which(TFLINT)
