"""Fixtures of the end-to-end tests: a local Sprites server and an operator on the cluster."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from lattice_adapters.sprites import SpritesAdapter
from tests.support.cluster import Cluster
from tests.support.sprites_server import LocalSprites
from tests.support.stack import Stack, operator_stack


@pytest.fixture(scope="module")
def stack(
    cluster: Cluster, local_sprites: LocalSprites, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """The operator (cluster-wide, standalone) against the local Sprites server."""
    log_dir: Path = tmp_path_factory.mktemp("operator")
    with operator_stack(cluster, local_sprites, log_dir) as s:
        yield s
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
