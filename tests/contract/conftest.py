"""Conformance fixtures: every test runs with the official SDK and with our adapter, against
the local server always and against the real Sprites API when SPRITES_TOKEN is set."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import AsyncIterator, Iterator

import pytest

from lattice_adapters.sprites import RetryPolicy, SpritesAdapter, credentials_from_env
from tests.support.contract_drivers import AdapterDriver, Driver, SdkDriver
from tests.support.contract_target import REAL_SKIP, Target, local_target
from tests.support.sprites_server import LocalSprites, sprites_server


@pytest.fixture(scope="session")
def local_sprites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSprites]:
    with sprites_server(tmp_path_factory.mktemp("sprites-local")) as server:
        yield server


@pytest.fixture(params=["local", "real"])
def target(request: pytest.FixtureRequest) -> Target:
    if request.param == "real":
        if not os.environ.get("SPRITES_TOKEN"):
            pytest.skip(REAL_SKIP)
        return Target("real", credentials_from_env(), "/home/sprite", None)
    return local_target(request.getfixturevalue("local_sprites"))


@pytest.fixture(params=["sdk", "adapter"])
async def driver(request: pytest.FixtureRequest, target: Target) -> AsyncIterator[Driver]:
    client: Driver = (
        SdkDriver(target.credentials)
        if request.param == "sdk"
        else AdapterDriver(target.credentials)
    )
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def sprite(driver: Driver, target: Target) -> AsyncIterator[str]:
    """A fresh sprite for the test, deleted afterwards."""
    name = f"ct-{driver.kind}-{secrets.token_hex(4)}"
    await driver.create_sprite(name)
    try:
        yield name
    finally:
        if target.local is not None:
            target.local.reset_faults()
        with contextlib.suppress(Exception):  # already deleted by the test
            await driver.delete_sprite(name)


@pytest.fixture
async def adapter(target: Target) -> AsyncIterator[SpritesAdapter]:
    """Our adapter alone, one attempt per call: for the modules that pick their client."""
    async with SpritesAdapter(target.credentials, retry=RetryPolicy(max_attempts=1)) as adapter:
        yield adapter


@pytest.fixture
async def adapter_sprite(adapter: SpritesAdapter) -> AsyncIterator[str]:
    """A fresh sprite made and deleted through `adapter` (such modules' `sprite`)."""
    name = f"ct-a-{secrets.token_hex(4)}"
    await adapter.create_sprite(name)
    yield name
    await adapter.delete_sprite(name)
