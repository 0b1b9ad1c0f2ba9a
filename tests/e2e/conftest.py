"""Fixtures of the end-to-end tests: a local Sprites server and an operator on the cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

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
