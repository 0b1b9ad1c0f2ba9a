from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.run_harness import Harness, run_doc


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    """A Run named `job` running `agent` on Sprite `box` (programs registered by the test)."""
    h = Harness(run_doc())
    try:
        yield h
    finally:
        await h.close()
