"""The adapter calls the SDK-driven suite does not reach: labels, iteration, lstat, delete,
non-atomic writes with a mode, relative renames, session listing and the wire's field forms.

These pin what the adapter did through sprites-py before it spoke the whole API itself
(issue 31 §4), so the change shows here if it changed behaviour."""

from __future__ import annotations

import secrets

import pytest

from lattice_adapters.sprites import SpritesAdapter
from lattice_operator.ports import errors
from tests.support.contract_target import Target

pytestmark = pytest.mark.contract


@pytest.fixture
def sprite(adapter_sprite: str) -> str:
    """One sprite per test, through our adapter (these tests pick their client themselves)."""
    return adapter_sprite


async def _sh(adapter: SpritesAdapter, sprite: str, script: str) -> bytes:
    session = await adapter.exec(sprite, ["sh", "-c", script], stdin=False)
    out = bytearray()
    async with session:
        async for chunk in session:
            out += chunk.data
    assert session.exit_code == 0, bytes(out)
    return bytes(out)


async def test_labels_url_auth_and_iteration(adapter: SpritesAdapter) -> None:
    prefix = f"ct-it-{secrets.token_hex(3)}-"
    names = [f"{prefix}{i}" for i in range(3)]
    for name in names:
        created = await adapter.create_sprite(name, url_auth="public", labels=["team-a"])
        assert (created.name, created.url_auth, created.labels) == (name, "public", ("team-a",))
        assert created.status == "cold"
        assert created.id
    try:
        updated = await adapter.update_sprite(names[0], labels=["team-b", "x"])
        assert updated.labels == ("team-b", "x")
        assert updated.url_auth == "public"  # labels alone leave the URL auth
        again = await adapter.update_sprite(names[0], url_auth="sprite")
        assert (again.url_auth, again.labels) == ("sprite", ("team-b", "x"))
        unchanged = await adapter.update_sprite(names[1])
        assert unchanged.labels == ("team-a",)
        seen = [s.name async for s in adapter.iter_sprites(prefix=prefix)]
        assert sorted(seen) == names
        page = await adapter.list_sprites(prefix=prefix, page_size=2)
        assert (len(page.sprites), page.has_more) == (2, True)
        assert page.cold + page.warm + page.running >= 3
    finally:
        for name in names:
            await adapter.delete_sprite(name)
    with pytest.raises(errors.NotFound):
        await adapter.get_sprite(names[0])
    with pytest.raises(errors.NotFound):
        await adapter.delete_sprite(names[0])


async def test_lstat_stat_and_links(adapter: SpritesAdapter, sprite: str, target: Target) -> None:
    base = f"{target.scratch}/links"
    await adapter.write_file(sprite, f"{base}/a.txt", b"abc")
    await _sh(adapter, sprite, f"ln -s a.txt {base}/out && mkdir {base}/sub")
    link = await adapter.lstat(sprite, f"{base}/out")
    assert (link.is_symlink, link.is_dir, link.name, link.path) == (
        True,
        False,
        "out",
        f"{base}/out",
    )
    file = await adapter.lstat(sprite, f"{base}/a.txt")
    assert (file.is_symlink, file.size, file.is_dir) == (False, 3, False)
    assert file.mod_time is not None
    followed = await adapter.stat(sprite, f"{base}/a.txt")
    assert (followed.size, followed.is_dir, followed.name) == (3, False, "a.txt")
    directory = await adapter.stat(sprite, base)
    assert (directory.is_dir, directory.path, directory.name) == (True, base, "links")
    sub = await adapter.lstat(sprite, f"{base}/sub")
    assert sub.is_dir
    with pytest.raises(errors.NotFound):
        await adapter.lstat(sprite, f"{base}/none")
    with pytest.raises(errors.NotFound):
        await adapter.stat(sprite, f"{base}/none")


async def test_delete_file_and_a_missing_one(
    adapter: SpritesAdapter, sprite: str, target: Target
) -> None:
    path = f"{target.scratch}/gone.txt"
    await adapter.write_file(sprite, path, b"x")
    await adapter.delete_file(sprite, path)
    with pytest.raises(errors.NotFound):
        await adapter.stat(sprite, path)
    # What the callers rely on (the run's credential removal logs it, fileops reports it).
    with pytest.raises(errors.NotFound):
        await adapter.delete_file(sprite, path)


async def test_writes_keep_their_mode_and_leave_no_temporary_file(
    adapter: SpritesAdapter, sprite: str, target: Target
) -> None:
    base = f"{target.scratch}/modes"
    await adapter.write_file(sprite, f"{base}/direct", b"1", mode=0o600, atomic=False)
    await adapter.write_file(sprite, f"{base}/atomic", b"22", mode=0o640)
    await adapter.write_file(sprite, f"{base}/atomic", b"333", mode=0o640)
    assert (await adapter.stat(sprite, f"{base}/direct")).mode == "0600"
    atomic = await adapter.stat(sprite, f"{base}/atomic")
    assert (atomic.mode, atomic.size) == ("0640", 3)
    listing = await _sh(adapter, sprite, f"ls -A {base}")
    assert listing.split() == [b"atomic", b"direct"]
    # A relative path is taken from the root, and normalised.
    await adapter.write_file(sprite, f"{base.lstrip('/')}/./rel", b"r")
    assert await adapter.read_file(sprite, f"{base}/rel") == b"r"


async def test_rename_to_a_sibling_by_relative_name(
    adapter: SpritesAdapter, sprite: str, target: Target
) -> None:
    base = f"{target.scratch}/ren"
    await adapter.write_file(sprite, f"{base}/one", b"1")
    await adapter.rename(sprite, f"{base}/one", "two")
    assert await adapter.read_file(sprite, f"{base}/two") == b"1"
    await adapter.rename(sprite, f"{base}/two", f"{target.scratch}/three")
    assert await adapter.read_file(sprite, f"{target.scratch}/three") == b"1"
    with pytest.raises(errors.NotFound):
        await adapter.rename(sprite, f"{base}/two", "four")


async def test_sessions_are_listed_with_their_fields(adapter: SpritesAdapter, sprite: str) -> None:
    session = await adapter.exec(
        sprite, ["sleep", "30"], workdir="/", stdin=False, max_run_after_disconnect=0
    )
    await session.detach()
    try:
        listed = {s.id: s for s in await adapter.list_sessions(sprite)}
        info = listed[session.session_id]
        assert "sleep" in info.command
        assert info.tty is False
        assert info.created is not None
    finally:
        await adapter.kill_session(sprite, session.session_id, signal="SIGKILL", grace=0)


async def test_checkpoints_are_listed_newest_first_with_their_source(
    adapter: SpritesAdapter, sprite: str, target: Target
) -> None:
    await adapter.write_file(sprite, f"{target.scratch}/c.txt", b"1")
    first = await adapter.create_checkpoint(sprite, "first")
    second = await adapter.create_checkpoint(sprite)
    listed = await adapter.list_checkpoints(sprite)
    ids = [c.id for c in listed]
    assert ids.index(second.id) < ids.index(first.id)
    by_id = {c.id: c for c in listed}
    assert by_id[first.id].comment == "first"
    assert by_id[second.id].comment == ""
    assert all(c.create_time is not None for c in listed)
    with pytest.raises(errors.NotFound):
        await adapter.restore_checkpoint(sprite, "v999")
