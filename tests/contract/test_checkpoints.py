"""Checkpoint conformance: create, list, restore really rolls files back."""

from __future__ import annotations

import pytest

from tests.support.contract_drivers import Driver
from tests.support.contract_target import Target

pytestmark = pytest.mark.contract


async def test_checkpoint_create_list_restore(driver: Driver, sprite: str, target: Target) -> None:
    kept = f"{target.scratch}/kept.txt"
    later = f"{target.scratch}/later.txt"
    await driver.write(sprite, kept, b"version 1")
    checkpoint_id = await driver.checkpoint(sprite, "before changes")
    assert checkpoint_id in await driver.list_checkpoints(sprite)

    await driver.write(sprite, kept, b"version 2")
    await driver.write(sprite, later, b"created after the checkpoint")
    await driver.restore(sprite, checkpoint_id)

    assert await driver.read(sprite, kept) == b"version 1"
    with pytest.raises(driver.errors.not_found):
        await driver.read(sprite, later)


async def test_checkpoint_ids_are_new_each_time(driver: Driver, sprite: str) -> None:
    first = await driver.checkpoint(sprite, "one")
    second = await driver.checkpoint(sprite, "two")
    assert first != second
    listed = await driver.list_checkpoints(sprite)
    assert listed.index(second) < listed.index(first)  # newest first


async def test_restore_terminates_running_sessions(driver: Driver, sprite: str) -> None:
    checkpoint_id = await driver.checkpoint(sprite, "base")
    session_id = await driver.start_detached(sprite, ["sleep", "60"])
    assert session_id in [str(s["id"]) for s in await driver.list_sessions(sprite)]
    await driver.restore(sprite, checkpoint_id)
    assert session_id not in [str(s["id"]) for s in await driver.list_sessions(sprite)]


async def test_checkpoint_delete(driver: Driver, sprite: str, target: Target) -> None:
    kept = f"{target.scratch}/kept.txt"
    await driver.write(sprite, kept, b"old")
    old = await driver.checkpoint(sprite, "old")
    await driver.write(sprite, kept, b"new")
    new = await driver.checkpoint(sprite, "new")

    await driver.delete_checkpoint(sprite, old)

    assert old not in await driver.list_checkpoints(sprite)
    with pytest.raises(driver.errors.not_found):
        await driver.delete_checkpoint(sprite, old)
    await driver.write(sprite, kept, b"newer")
    await driver.restore(sprite, new)  # the other one is whole
    assert await driver.read(sprite, kept) == b"new"
