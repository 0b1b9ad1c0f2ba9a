"""Sprite resource conformance: create/get/update/delete, paging, error answers."""

from __future__ import annotations

import secrets

import pytest
from pydantic import SecretStr

from lattice_adapters.sprites import SpritesCredentials
from tests.support.contract_drivers import AdapterDriver, Driver, SdkDriver
from tests.support.contract_drivers import http_status as _status
from tests.support.contract_target import Target

pytestmark = pytest.mark.contract


async def test_create_get_update_delete(driver: Driver, target: Target) -> None:
    name = f"ct-crud-{secrets.token_hex(4)}"
    created = await driver.create_sprite(name, url_auth="public", labels=("team-a",))
    try:
        assert created.name == name
        assert created.status in ("cold", "warm", "running")
        assert created.url_auth == "public"
        assert created.labels == ["team-a"]
        fetched = await driver.get_sprite(name)
        assert fetched.name == name
        updated = await driver.set_url_auth(name, "sprite")
        assert updated.url_auth == "sprite"
        assert (await driver.get_sprite(name)).url_auth == "sprite"
    finally:
        await driver.delete_sprite(name)
    with pytest.raises(driver.errors.not_found):
        await driver.get_sprite(name)


async def test_paging_with_prefix(driver: Driver, target: Target) -> None:
    prefix = f"ct-page-{secrets.token_hex(3)}-"
    names = [f"{prefix}{i}" for i in range(5)]
    for name in names:
        await driver.create_sprite(name)
    try:
        seen: list[str] = []
        token: str | None = None
        pages = 0
        while True:
            page, token = await driver.list_page(prefix, 2, token)
            pages += 1
            assert len(page) <= 2
            seen += page
            if token is None:
                break
        assert sorted(seen) == sorted(names)
        assert pages == 3
    finally:
        for name in names:
            await driver.delete_sprite(name)


async def test_unknown_sprite_is_not_found(driver: Driver) -> None:
    with pytest.raises(driver.errors.not_found):
        await driver.get_sprite(f"ct-missing-{secrets.token_hex(4)}")


async def test_bad_token_is_unauthorized(driver: Driver, target: Target) -> None:
    bad = SpritesCredentials(
        token=SecretStr("org/id/definitely-not-the-token"), api_url=target.credentials.api_url
    )
    other = SdkDriver(bad) if driver.kind == "sdk" else AdapterDriver(bad)
    try:
        with pytest.raises(driver.errors.unauthorized):
            await other.get_sprite("anything")
        # The exec upgrade is refused too (the SDK reports the parsed 401 as an APIError).
        with pytest.raises(driver.errors.upgrade_refused) as caught:
            await other.run("anything", ["true"])
        assert _status(caught.value) == 401
    finally:
        await other.aclose()
