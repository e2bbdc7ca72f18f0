"""Static checks over the whole tree: yamllint, ansible-lint (production
profile) and ansible-playbook --syntax-check of every playbook."""
from __future__ import annotations

import pytest

from conftest import ROOT, VENV_BIN, run

PLAYBOOKS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "playbooks").glob("*.yml"))


def test_yamllint_strict():
    result = run([str(VENV_BIN / "yamllint"), "--strict", "-f", "parsable", "."])
    assert result.returncode == 0, result.stdout + result.stderr


def test_ansible_lint_production_profile():
    result = run([str(VENV_BIN / "ansible-lint"), "--profile", "production", "--nocolor", "-q"], timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_syntax_check(playbook):
    result = run([str(VENV_BIN / "ansible-playbook"), "--syntax-check", playbook])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("inventory", ["lab", "example-campus"])
def test_syntax_check_site_with_each_inventory(inventory):
    result = run([str(VENV_BIN / "ansible-playbook"), "--syntax-check", "-i",
                  "inventories/%s" % inventory, "playbooks/site.yml"])
    assert result.returncode == 0, result.stdout + result.stderr
