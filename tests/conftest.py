"""Shared helpers: every test drives the kit the way a user does (make,
ansible-playbook, molecule) from the project root, with the project's venv."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = ROOT / ".venv" / "bin"


def kit_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = "%s:%s:%s" % (VENV_BIN, ROOT / "build" / "tools" / "bin", env.get("PATH", ""))
    env["TF_CLI_CONFIG_FILE"] = str(ROOT / "build" / "terraform" / "cli.tfrc")
    env["CHECKPOINT_DISABLE"] = "1"
    env["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")
    env["ANSIBLE_HOME"] = str(ROOT / "build" / "ansible-home")
    env["ANSIBLE_LOCAL_TEMP"] = str(ROOT / "build" / "ansible-tmp")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env.update(extra)
    return env


def run(args: list[str], timeout: int = 900, **extra_env: str) -> subprocess.CompletedProcess:
    """Run a command from the project root; output captured as text."""
    return subprocess.run(args, cwd=ROOT, env=kit_env(**extra_env), capture_output=True,
                          text=True, timeout=timeout, check=False)


def playbook(*args: str, timeout: int = 900, **extra_env: str) -> subprocess.CompletedProcess:
    return run([str(VENV_BIN / "ansible-playbook"), *args], timeout=timeout, **extra_env)


def recap(output: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP lines -> {host: {ok: n, changed: n, ...}} (the last recap wins)."""
    result: dict[str, dict[str, int]] = {}
    for line in output.splitlines():
        if " : ok=" in line:
            host, _, counts = line.partition(" : ")
            result[host.strip()] = {k: int(v) for k, v in (p.split("=") for p in counts.split())}
    return result


LAB_HOSTS = ["dtn1", "dtn2", "gw1", "gw2", "ps1", "zeek1", "border", "wan", "rogue"]


def podman_exec(host: str, *cmd: str, timeout: int = 60) -> subprocess.CompletedProcess:
    return run(["podman", "exec", "sdmz-" + host, *cmd], timeout=timeout)


def lab_leftovers() -> list[str]:
    """Everything carrying the lab's prefix: containers, namespaces, links, images."""
    left = []
    containers = json.loads(run(["podman", "ps", "-a", "--format", "json"]).stdout or "[]")
    left += ["container " + c["Names"][0] for c in containers if "sdmz.lab" in (c.get("Labels") or {})]
    left += ["netns " + n["name"] for n in json.loads(run(["ip", "-j", "netns", "list"]).stdout or "[]")
             if n["name"].startswith("sdmz-")]
    left += ["link " + link["ifname"] for link in json.loads(run(["ip", "-j", "link", "show"]).stdout)
             if link["ifname"].startswith("sdmz-") or link.get("ifalias", "").startswith("sdmz:")]
    images = json.loads(run(["podman", "images", "--format", "json"]).stdout or "[]")
    left += ["image " + i["Id"][:12] for i in images if "sdmz.lab" in (i.get("Labels") or {})]
    return left


@pytest.fixture(scope="session")
def lab():
    """The lab, up once for every lab test; down at the end with nothing left behind."""
    up = playbook("playbooks/lab.yml", "-e", "lab_state=present", timeout=1800)
    assert up.returncode == 0, up.stdout[-4000:] + up.stderr[-2000:]
    try:
        yield up
    finally:
        down = playbook("playbooks/lab.yml", "-e", "lab_state=absent")
        assert down.returncode == 0, down.stdout[-4000:]
        assert lab_leftovers() == []


@pytest.fixture(scope="session")
def site(lab):
    """site.yml applied to the lab, once per session: the state the tests of a
    single playbook start from (its border ACL, its tuned DTNs), whichever
    test module runs first."""
    applied = playbook("playbooks/site.yml", timeout=1800)
    assert applied.returncode == 0, applied.stdout[-4000:]
    return applied


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


sys.path.insert(0, str(ROOT / "filter_plugins"))
sys.path.insert(0, str(ROOT / "modules"))
