"""What a `lattice` command loads before it runs: the CRD models (pydantic schemas built at
import, the larger part of a command's start-up) only when the command uses them. Every
`kubectl lattice …` and every tool that shells out to `lattice` pays its start-up."""

from __future__ import annotations

import subprocess
import sys

MODELS = "lattice_operator.api.v1alpha1"


def loaded_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint('\\n'.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return set(out.split())


def test_the_command_line_loads_no_crd_model_until_a_command_needs_one() -> None:
    assert MODELS not in loaded_after("import lattice_operator.cli")
    # Nor the dev tools: they are looked up only when the command line names one of them.
    assert "lattice_devtools" not in loaded_after("import lattice_operator.cli")
    # Reading receipts back needs the label names only, not the models that build them.
    assert MODELS not in loaded_after("import lattice_operator.receipt_reader")
    assert MODELS in loaded_after("import lattice_operator.builders")
