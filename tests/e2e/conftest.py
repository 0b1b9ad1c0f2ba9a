"""Fixtures of the end-to-end tests: a local Sprites server and an operator on the cluster."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from lattice_adapters.sprites import SpritesAdapter
from tests.support.cluster import Cluster
from tests.support.operator_slot import OperatorSlot
from tests.support.sprites_server import LocalSprites
from tests.support.stack import Stack


@pytest.fixture(scope="session")
def operator_slot(
    cluster: Cluster, local_sprites: LocalSprites, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorSlot]:
    """The worker's shared operator, started when a module first asks for `stack`."""
    log_dir: Path = tmp_path_factory.mktemp("operator")
    with OperatorSlot(cluster, local_sprites, log_dir) as slot:
        yield slot


@pytest.fixture(scope="module")
def stack(operator_slot: OperatorSlot) -> Iterator[Stack]:
    """The operator (cluster-wide, standalone) against the local Sprites server, shared with
    the worker's other modules that use it; its `log()` starts with this module."""
    s = operator_slot.acquire()
    yield s
    # Per module: is it alive after this module? (A dead one is replaced for the next.)
    if not s.operator.alive():
        raise AssertionError(f"the operator died:\n{s.operator.log()[-5000:]}")


@pytest.fixture
async def sprite(local_sprites: LocalSprites) -> AsyncIterator[tuple[SpritesAdapter, str]]:
    """A sprite of the local server for the test alone, and an adapter to it (FileOps tests)."""
    name = f"fo-{secrets.token_hex(4)}"
    async with SpritesAdapter(local_sprites.credentials) as adapter:
        await adapter.create_sprite(name)
        try:
            yield adapter, name
        finally:
            await adapter.delete_sprite(name)
