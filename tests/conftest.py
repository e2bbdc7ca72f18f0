"""Shared helpers: every test drives the kit the way a user does (make,
ansible-playbook, molecule) from the project root, with the project's venv."""
from __future__ import annotations

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


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


sys.path.insert(0, str(ROOT / "filter_plugins"))
sys.path.insert(0, str(ROOT / "modules"))
