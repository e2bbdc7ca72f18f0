"""Every Molecule scenario under molecule/<role>/, with the shared config
molecule/config.yml: create -> converge -> idempotence -> verify -> destroy."""
from __future__ import annotations

import pytest

from conftest import ROOT, VENV_BIN, run

SCENARIOS = sorted(p.parent.name for p in (ROOT / "molecule").glob("*/molecule.yml"))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario):
    result = run([str(VENV_BIN / "molecule"), "-c", "molecule/config.yml", "test", "-s", scenario],
                 timeout=1800)
    assert result.returncode == 0, (result.stdout + result.stderr)[-8000:]
