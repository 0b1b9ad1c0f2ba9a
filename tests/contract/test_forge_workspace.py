"""The forge workspace in a real sprite of the local server: the base cloned on the sprite's
branch, the branch read back as a bundle, and what a checkpoint restored mid-bundle leaves."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lattice_adapters.sprites import RetryPolicy, SpritesAdapter
from lattice_operator.forge.workspace import (
    FORGE_DIR,
    REPO_DIR,
    read_branch_bundle,
    run_in_sprite,
    write_workspace,
)
from lattice_operator.ports.forge import PreparedWorkspace
from tests.support.github.git_http import git
from tests.support.sprites_server import LocalSprites

pytestmark = pytest.mark.contract

HEAD = "lattice/work"


@pytest.fixture
def base(tmp_path: Path) -> PreparedWorkspace:
    repo = tmp_path / "base"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "README.md").write_text("base\n")
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "base", cwd=repo)
    git("bundle", "create", "-q", str(tmp_path / "base.bundle"), "main", cwd=repo)
    return PreparedWorkspace(
        bundle=(tmp_path / "base.bundle").read_bytes(),
        base_branch="main",
        base_sha=git("rev-parse", "HEAD", cwd=repo),
    )


@pytest.fixture
async def sprite(local_sprites: LocalSprites) -> AsyncIterator[tuple[SpritesAdapter, str]]:
    adapter = SpritesAdapter(local_sprites.credentials, retry=RetryPolicy(max_attempts=1))
    name = f"ct-forge-{secrets.token_hex(4)}"
    await adapter.create_sprite(name)
    try:
        yield adapter, name
    finally:
        await adapter.delete_sprite(name)
        await adapter.aclose()


async def _sh(adapter: SpritesAdapter, name: str, script: str) -> str:
    code, output = await run_in_sprite(adapter, name, script, timeout_note="test")
    assert code == 0, output
    return output


async def test_a_lock_left_by_a_restored_checkpoint_does_not_stop_the_bundle(
    sprite: tuple[SpritesAdapter, str], base: PreparedWorkspace, tmp_path: Path
) -> None:
    """An agent checkpoints before WAITING while the operator's git writes the bundle through
    its `.lock` file; the Run resumes from that checkpoint, so the lock comes back with it."""
    adapter, name = sprite
    await write_workspace(adapter, name, base, HEAD, {"kind": "test"})
    await _sh(adapter, name, f"cd {REPO_DIR} && echo work >> README.md && git commit -qam work")
    # What the checkpoint kept: the locks of the bundles being written when it was taken, the
    # one a fixed bundle path used and (an hour old now) one of ours; a fresh one stays.
    await _sh(
        adapter,
        name,
        f"cd {FORGE_DIR} && echo partial > out.bundle.lock && echo partial > out-old.bundle.lock"
        " && touch -d '2 hours ago' out.bundle.lock out-old.bundle.lock"
        " && echo partial > out-fresh.bundle.lock",
    )
    checkpoint = await adapter.create_checkpoint(name, "mid-bundle")
    await adapter.restore_checkpoint(name, checkpoint.id)

    data = await read_branch_bundle(adapter, name, base.base_sha, HEAD, 10 * 1024 * 1024)

    (tmp_path / "out.bundle").write_bytes(data)
    listed = git("bundle", "list-heads", str(tmp_path / "out.bundle"), cwd=tmp_path / "base")
    assert listed.endswith(f"refs/heads/{HEAD}")
    sha = listed.split()[0]
    assert sha == (await _sh(adapter, name, f"git -C {REPO_DIR} rev-parse {HEAD}")).strip()
    # The read deleted its own bundle and swept the old leftovers; the fresh one is not ours
    # to take (a bundle may be being written through it).
    left = (await _sh(adapter, name, f"ls -A {FORGE_DIR}")).split()
    assert sorted(f for f in left if f.startswith("out")) == ["out-fresh.bundle.lock"]


async def test_reads_at_once_each_get_their_bundle(
    sprite: tuple[SpritesAdapter, str], base: PreparedWorkspace
) -> None:
    adapter, name = sprite
    await write_workspace(adapter, name, base, HEAD, {"kind": "test"})
    await _sh(adapter, name, f"cd {REPO_DIR} && echo work >> README.md && git commit -qam work")
    reads = await asyncio.gather(
        *(read_branch_bundle(adapter, name, base.base_sha, HEAD, 10**7) for _ in range(4))
    )
    assert all(r.startswith(b"# v2 git bundle") or r.startswith(b"# v3 git bundle") for r in reads)
    assert len(set(reads)) == 1
    left = (await _sh(adapter, name, f"ls -A {FORGE_DIR}")).split()
    assert [f for f in left if f.startswith("out")] == []
