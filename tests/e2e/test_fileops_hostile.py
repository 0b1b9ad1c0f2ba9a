"""Hostile FileOps requests in a real local sprite (issue 27): files too large to read, and
symlinks planted by an earlier request or by a command in the sprite to carry writes out of
the writable roots."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest

from lattice_adapters.sprites import SpritesAdapter
from lattice_operator.api.v1alpha1.fileops import FileOpsRequest
from lattice_operator.fileops.executor import execute
from lattice_operator.fileops.response import FileOpsResponse
from lattice_operator.fileops.tree import FILE_BYTES
from lattice_operator.ports.sprites import FileStat, SpriteBackend
from tests.support.fileops_requests import fileops_request

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ALWAYS = {"changedFiles": True, "diffSummary": True, "commandOutputs": "always"}


def request(ops: list[dict[str, Any]], **extra: Any) -> FileOpsRequest:
    return fileops_request(ops, report=extra.pop("report", ALWAYS), **extra)


class Counted:
    """The adapter, with every file read through it recorded: (path, limit, bytes received)."""

    def __init__(self, inner: SpritesAdapter) -> None:
        self.inner = inner
        self.reads: list[tuple[str, int | None, int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def read_file(
        self, name: str, path: str, *, offset: int = 0, limit: int | None = None
    ) -> bytes:
        data = await self.inner.read_file(name, path, offset=offset, limit=limit)
        self.reads.append((path, limit, len(data)))
        return data


class GrowsAfterStat(Counted):
    """Sizes reported as they were a moment ago: every file looks empty."""

    async def stat(self, name: str, path: str) -> FileStat:
        info = await self.inner.stat(name, path)
        return info.model_copy(update={"size": 0})


async def run(
    sprite: tuple[SpritesAdapter, str],
    ops: list[dict[str, Any]],
    backend: object | None = None,
    **extra: Any,
) -> FileOpsResponse:
    adapter, name = sprite
    through = cast(SpriteBackend, backend if backend is not None else adapter)
    return await execute(through, name, request(ops, **extra), now=NOW)


async def shell(sprite: tuple[SpritesAdapter, str], cmd: str) -> str:
    """A command in the sprite, outside FileOps; its stdout."""
    res = await run(sprite, [{"op": "run", "cmd": cmd}], id="shell")
    assert res.status == "ok", res.wire()
    return str(res.wire()["proof"]["commands"][0]["stdout"])


LIMIT = f"the limit is {FILE_BYTES:,} bytes, FILE_BYTES"


async def test_a_file_over_the_limit_is_refused_from_its_size_without_reading_it(
    sprite: tuple[SpritesAdapter, str],
) -> None:
    await shell(sprite, "truncate -s 150M big.txt")  # the report's 150 MB file (sparse)
    adapter, _ = sprite
    counted = Counted(adapter)
    patch = "*** Begin Patch\n*** Update File: big.txt\n@@\n-a\n+b\n*** End Patch"
    for op in ({"op": "read_file", "path": "big.txt"}, {"op": "apply_patch", "patch": patch}):
        res = await run(sprite, [op], counted)
        wire = res.wire()
        assert wire["status"] == "fail", wire
        assert (
            "big.txt is too large for FileOps (157,286,400 bytes; " + LIMIT
            in (wire["fail"]["reason"])
        )
        assert wire["fail"]["hint"]
    assert [r for r in counted.reads if r[0].endswith("big.txt")] == []


async def test_a_file_that_grew_after_its_size_was_read_is_read_no_further_than_the_limit(
    sprite: tuple[SpritesAdapter, str],
) -> None:
    await shell(sprite, "truncate -s 150M big.txt")
    adapter, _ = sprite
    lying = GrowsAfterStat(adapter)
    res = await run(sprite, [{"op": "read_file", "path": "big.txt"}], lying)
    wire = res.wire()
    assert wire["status"] == "fail", wire
    assert (
        f"big.txt is too large for FileOps (over {FILE_BYTES:,} bytes; " + LIMIT
        in (wire["fail"]["reason"])
    )
    # The ranged read stopped at limit + 1: that much crossed the wire, no more.
    assert lying.reads == [("/workspace/big.txt", FILE_BYTES + 1, FILE_BYTES + 1)]


PLANT = (
    "mkdir -p src/real docs && printf 'keep\\n' > docs/target.txt && printf 'a\\n' > src/a.txt"
    " && ln -s ../docs src/out && ln -s ../docs/target.txt src/link.txt"
)
ADD = "*** Begin Patch\n*** Add File: src/out/new.txt\n+escaped\n*** End Patch"
UPDATE = "*** Begin Patch\n*** Update File: src/link.txt\n@@\n-keep\n+escaped\n*** End Patch"
DELETE = "*** Begin Patch\n*** Delete File: src/link.txt\n*** End Patch"
MOVE = "*** Begin Patch\n*** Update File: src/a.txt\n*** Move to: src/out/a.txt\n*** End Patch"


@pytest.mark.parametrize(
    ("op", "link"),
    [
        ({"op": "write_file", "path": "src/out/new.txt", "content": "escaped"}, "src/out"),
        ({"op": "write_json", "path": "src/out/new.json", "value": {"a": 1}}, "src/out"),
        ({"op": "apply_patch", "patch": ADD}, "src/out"),
        ({"op": "apply_patch", "patch": UPDATE}, "src/link.txt"),
        ({"op": "apply_patch", "patch": DELETE}, "src/link.txt"),
        ({"op": "apply_patch", "patch": MOVE}, "src/out"),
        ({"op": "triflow_state_preflight", "path": "src/out/state.json"}, "src/out"),
    ],
    ids=["write_file", "write_json", "add", "update", "delete", "move", "triflow"],
)
async def test_a_symlink_planted_by_an_earlier_request_does_not_carry_writes_out_of_the_roots(
    sprite: tuple[SpritesAdapter, str], op: dict[str, Any], link: str
) -> None:
    planted = await run(sprite, [{"op": "run", "cmd": PLANT}], id="earlier")
    assert planted.status == "ok", planted.wire()
    res = await run(sprite, [op], constraints={"writable_roots": ["src"]})
    wire = res.wire()
    assert wire["status"] == "fail", wire
    assert f"{link} is a symlink" in wire["fail"]["reason"]
    assert wire["fail"]["hint"]
    # docs/ (outside the root) as it was, and so is src/.
    assert await shell(sprite, "ls -A docs src; cat docs/target.txt src/a.txt") == (
        "docs:\ntarget.txt\n\nsrc:\na.txt\nlink.txt\nout\nreal\nkeep\na\n"
    )
    # A path without a link is written as before.
    fine = await run(
        sprite,
        [{"op": "write_file", "path": "src/real/new.txt", "content": "in"}],
        constraints={"writable_roots": ["src"]},
    )
    assert fine.status == "ok", fine.wire()


async def test_a_writable_root_swapped_for_a_link_by_a_command_in_the_sprite_is_refused(
    sprite: tuple[SpritesAdapter, str],
) -> None:
    adapter, name = sprite
    session = await adapter.exec(
        name,
        ["sh", "-c", "mkdir -p docs && ln -s /workspace/docs src"],
        workdir="/workspace",
        max_run_after_disconnect=0,
    )
    async with session:
        assert await session.wait() == 0
    res = await run(
        sprite,
        [{"op": "write_file", "path": "src/a.txt", "content": "escaped"}],
        constraints={"writable_roots": ["src"]},
    )
    wire = res.wire()
    assert wire["status"] == "fail", wire
    assert "src/a.txt: src is a symlink" in wire["fail"]["reason"]
    assert await shell(sprite, "ls -A docs") == ""


async def test_a_link_planted_where_outputs_are_kept_is_not_written_through(
    sprite: tuple[SpritesAdapter, str],
) -> None:
    await shell(sprite, "mkdir -p src .lattice/fileops && ln -s /workspace/src .lattice/fileops/S7")
    res = await run(
        sprite,
        [{"op": "run", "cmd": "head -c 20000 /dev/zero | tr '\\0' x"}],
        id="S7",
        constraints={"writable_roots": ["docs"]},
    )
    wire = res.wire()
    assert wire["status"] == "fail", wire
    assert ".lattice/fileops/S7 is a symlink" in wire["fail"]["reason"]
    assert await shell(sprite, "ls -A src") == ""  # neither the output nor response.json
