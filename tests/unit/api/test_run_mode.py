"""spec.mode at admission: the default, and the combinations that cannot work."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from lattice_operator.api.v1alpha1 import Run


def _run(**spec: Any) -> Run:
    return Run.model_validate(
        {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "Run",
            "metadata": {"name": "r", "namespace": "ns"},
            "spec": {"spriteRef": {"name": "box"}, "command": ["true"], **spec},
        }
    )


def test_mode_defaults_to_the_exec_websocket() -> None:
    assert _run().spec.mode == "exec_ws"


@pytest.mark.parametrize("mode", ["exec_post", "service"])
def test_a_terminal_needs_the_exec_websocket(mode: str) -> None:
    assert _run(mode=mode).spec.mode == mode
    with pytest.raises(ValidationError, match=r"spec\.tty: mode .* has no terminal"):
        _run(mode=mode, tty=True)


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValidationError, match="mode"):
        _run(mode="ssh")
