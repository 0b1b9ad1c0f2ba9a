"""Filesystem conformance: write, read from an offset, rename, stat, big files, confinement."""

from __future__ import annotations

import os

import pytest

from tests.support.contract_drivers import Driver
from tests.support.contract_target import Target

pytestmark = pytest.mark.contract


async def test_write_read_offset_rename_stat(driver: Driver, sprite: str, target: Target) -> None:
    path = f"{target.scratch}/.lattice/outbox.jsonl"
    first = b'{"event_type":"INFO"}\n'
    await driver.write(sprite, path, first)
    assert await driver.read(sprite, path) == first
    more = b'{"event_type":"COMPLETED"}\n'
    await driver.write(sprite, path, first + more)
    # Tail from the last consumed byte: only the new line comes back.
    assert await driver.read(sprite, path, offset=len(first)) == more
    assert await driver.read(sprite, path, offset=len(first + more)) == b""
    moved = f"{target.scratch}/.lattice/outbox.old"
    await driver.rename(sprite, path, moved)
    assert await driver.stat(sprite, moved) == (len(first + more), False)
    with pytest.raises(driver.errors.not_found):
        await driver.stat(sprite, path)


async def test_read_missing_file_is_not_found(driver: Driver, sprite: str, target: Target) -> None:
    with pytest.raises(driver.errors.not_found):
        await driver.read(sprite, f"{target.scratch}/no/such/file")


async def test_binary_file_over_one_mebibyte(driver: Driver, sprite: str, target: Target) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    path = f"{target.scratch}/big.bin"
    await driver.write(sprite, path, data)
    assert await driver.read(sprite, path) == data
    assert await driver.read(sprite, path, offset=1024 * 1024) == data[1024 * 1024 :]
    assert (await driver.stat(sprite, path))[0] == len(data)


async def test_file_written_by_api_is_seen_by_processes(
    driver: Driver, sprite: str, target: Target
) -> None:
    await driver.write(sprite, f"{target.scratch}/.lattice/resume.json", b'{"inputs":{}}')
    result = await driver.run(sprite, ["cat", f"{target.scratch}/.lattice/resume.json"])
    assert result.stdout == b'{"inputs":{}}'


async def test_write_over_16_mib_is_refused(driver: Driver, sprite: str, target: Target) -> None:
    with pytest.raises(driver.errors.too_large):
        await driver.write(sprite, f"{target.scratch}/huge.bin", b"\0" * (16 * 1024 * 1024 + 1))
