"""The sprite's side of a forge workspace, driven by the operator through the Sprites API:
the base bundle written and cloned into `/workspace/repo` on the sprite's branch, the
context (issue, plan, review comments) written beside it, and the sprite's branch read back
as a bundle. No credential is involved: the sprite sees a bundle and files, never a remote.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shlex
from typing import Any

from lattice_operator.ports.errors import AdapterError, OperationFailed, PayloadTooLarge
from lattice_operator.ports.forge import PreparedWorkspace
from lattice_operator.ports.sprites import SpriteBackend

FORGE_DIR = "/workspace/.lattice/forge"
REPO_DIR = "/workspace/repo"
BASE_BUNDLE = f"{FORGE_DIR}/base.bundle"
OUT_BUNDLE_PREFIX = f"{FORGE_DIR}/out-"
"""Each read of the branch writes its own bundle, `out-<random>.bundle`, and deletes it."""
STALE_BUNDLE_MINUTES = 60
CONTEXT_FILE = f"{FORGE_DIR}/context.json"
"""What the agent reads: the repository, the issue or pull request, the plan, the review."""
OUTPUT_LIMIT = 64 * 1024


async def run_in_sprite(
    backend: SpriteBackend, sprite: str, script: str, *, timeout_note: str
) -> tuple[int, str]:
    """`sh -c script` in the sprite: its exit status and (bounded) output."""
    session = await backend.exec(
        sprite, ["sh", "-c", script], stdin=False, max_run_after_disconnect=60
    )
    output = bytearray()
    async with session:
        async for chunk in session:
            if len(output) < OUTPUT_LIMIT:
                output.extend(chunk.data[: OUTPUT_LIMIT - len(output)])
        code = session.exit_code
    if code is None:
        raise OperationFailed(f"{timeout_note}: the sprite's command ended without a status")
    return code, output.decode("utf-8", "replace")


def clone_script(base_branch: str, head_branch: str) -> str:
    q = shlex.quote
    return (
        f"set -e; rm -rf {REPO_DIR}; "
        f"git clone --quiet --branch {q(base_branch)} {BASE_BUNDLE} {REPO_DIR}; "
        f"cd {REPO_DIR}; git remote remove origin; "
        f"git checkout --quiet -B {q(head_branch)}; "
        "git config user.name 'Lattice sprite'; git config user.email sprite@lattice.invalid; "
        # No background gc or maintenance: a detached git process outliving the agent's
        # session would hold locks when the operator bundles the branch.
        "git config gc.auto 0; git config maintenance.auto false; git config gc.autoDetach false"
    )


def bundle_script(base_sha: str, head_branch: str, out_path: str) -> str:
    q = shlex.quote
    # A bundle path of its own per read: git writes it through `<path>.lock`, and a checkpoint
    # the agent takes meanwhile keeps that lock file; restored, a fixed path's stale lock
    # would refuse every later bundle ("File exists"). Leftovers (such locks, a read that died
    # before its delete) are swept once they are an hour old; a bundle being written is newer.
    # Every local branch goes in: the operator refuses a bundle that carries more than the
    # one it may push, and says so, rather than silently leaving the others out.
    return (
        f"set -e; cd {REPO_DIR}; "
        f"find {FORGE_DIR} -maxdepth 1 -name 'out*.bundle*' -mmin +{STALE_BUNDLE_MINUTES} "
        "-exec rm -f {} + 2>/dev/null || true; "
        f"git rev-parse --verify --quiet {q('refs/heads/' + head_branch)} >/dev/null; "
        f"git -c gc.auto=0 bundle create --quiet {q(out_path)} --branches ^{q(base_sha)}"
    )


async def write_workspace(
    backend: SpriteBackend,
    sprite: str,
    workspace: PreparedWorkspace,
    head_branch: str,
    context: dict[str, Any],
) -> None:
    """Write the base bundle and the context into the sprite and clone the branch."""
    await backend.write_file(sprite, BASE_BUNDLE, workspace.bundle)
    await write_context(backend, sprite, context)
    code, output = await run_in_sprite(
        backend,
        sprite,
        clone_script(workspace.base_branch, head_branch),
        timeout_note="preparing the workspace",
    )
    if code != 0:
        raise OperationFailed(f"preparing the workspace failed ({code}): {output[-500:]}")


async def write_context(backend: SpriteBackend, sprite: str, context: dict[str, Any]) -> None:
    data = json.dumps(context, indent=2, sort_keys=True).encode()
    await backend.write_file(sprite, CONTEXT_FILE, data)


async def read_branch_bundle(
    backend: SpriteBackend, sprite: str, base_sha: str, head_branch: str, max_bytes: int
) -> bytes:
    """The sprite's branches since `base_sha`, as a bundle its own git made (untrusted)."""
    out_path = f"{OUT_BUNDLE_PREFIX}{secrets.token_hex(8)}.bundle"
    try:
        code, output = await run_in_sprite(
            backend,
            sprite,
            bundle_script(base_sha, head_branch, out_path),
            timeout_note="bundling the branch",
        )
        if code != 0:
            raise OperationFailed(
                f"the sprite's branch {head_branch} could not be bundled ({code}): {output[-300:]}"
            )
        size = (await backend.stat(sprite, out_path)).size
        if size > max_bytes:
            raise PayloadTooLarge(f"the sprite's bundle has {size} bytes, over {max_bytes}")
        return await backend.read_file(sprite, out_path)
    finally:
        # Best effort: what is left behind is swept by a later read.
        with contextlib.suppress(AdapterError):
            await backend.delete_file(sprite, out_path)


__all__ = [
    "BASE_BUNDLE",
    "CONTEXT_FILE",
    "FORGE_DIR",
    "OUT_BUNDLE_PREFIX",
    "REPO_DIR",
    "read_branch_bundle",
    "run_in_sprite",
    "write_context",
    "write_workspace",
]
