"""Cold starts seen by Runs: a session start on a sprite the backend reports cold is counted
in lattice_run_cold_starts_total; one on a warm or running sprite, or with the state
unknown, is not, and the Run runs all the same."""

from __future__ import annotations

import pytest

from lattice_operator.api.v1alpha1.sprite import BackendStatus
from lattice_operator.metrics import REGISTRY
from lattice_operator.ports.errors import TransportError
from tests.support.fake_backend import FakeProcess
from tests.support.run_harness import BACKEND_SPRITE, Harness


def _cold_starts() -> float:
    return REGISTRY.get_sample_value("lattice_run_cold_starts_total") or 0.0


@pytest.mark.parametrize(("state", "counted"), [("cold", 1), ("warm", 0), ("running", 0)])
async def test_a_session_start_on_a_cold_sprite_is_counted(
    harness: Harness, state: BackendStatus, counted: int
) -> None:
    harness.backend.sprite_status = state

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        pass

    before = _cold_starts()
    harness.start()
    status = await harness.finished()
    assert status["phase"] == "Succeeded"
    assert _cold_starts() - before == counted
    # Read once, before the session's first call to the sprite (which would wake it).
    assert harness.backend.status_reads == [BACKEND_SPRITE]


async def test_an_unknown_state_counts_nothing_and_the_run_goes_on(harness: Harness) -> None:
    harness.backend.sprite_status = "cold"
    harness.backend.fail("get_sprite", TransportError("connection reset"))

    @harness.backend.program("agent")
    async def agent(p: FakeProcess) -> None:
        pass

    before = _cold_starts()
    harness.start()
    status = await harness.finished()
    assert status["phase"] == "Succeeded"
    assert _cold_starts() == before
