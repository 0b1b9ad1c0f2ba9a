"""The Sprite's environment, applied in the sprite before the agent's command.

Each step is `sh -c COMMAND` and must exit 0; the first that does not stops the others and
the Run fails (EnvironmentFailed). After every step passed, a marker named by the digest of
the steps is written in the sprite: a later Run (or a retried attempt) of the same
environment finds it and runs nothing, so applying is idempotent; a changed environment has
a new digest and runs again, whole.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence

from lattice_operator.api.v1alpha1.run import EnvironmentStepResult, RunEnvironmentStatus
from lattice_operator.api.v1alpha1.sprite import EnvironmentStep
from lattice_operator.ports import NotFound, SpriteBackend
from lattice_operator.reconcilers.run.files import LATTICE_DIR

ENV_DIR = f"{LATTICE_DIR}/env"
STEP_TIMEOUT = 900.0
"""Seconds one step may run (an install can be slow) before it is killed and failed."""
OUTPUT_KEPT = 1024
"""Characters of a failed step's output kept in the Run's status."""


def environment_digest(steps: Sequence[EnvironmentStep]) -> str:
    """sha256 of the steps as the Sprite states them (order included)."""
    wire = [s.to_wire() for s in steps]
    return hashlib.sha256(json.dumps(wire, sort_keys=True).encode()).hexdigest()


def marker_path(digest: str) -> str:
    return f"{ENV_DIR}/{digest}"


def combined(
    cluster: Sequence[EnvironmentStep], sprite: Sequence[EnvironmentStep]
) -> list[EnvironmentStep]:
    """The cluster-wide steps first, then the Sprite's own; a Sprite step named like a
    cluster-wide one is that step already (promoted into both), and runs once."""
    names = {s.name for s in cluster}
    return [*cluster, *(s for s in sprite if s.name not in names)]


NAMES_IN_RECEIPT = 16


def receipt_facts(
    applied: RunEnvironmentStatus, steps: Sequence[EnvironmentStep]
) -> dict[str, object]:
    """What an environment receipt says: the digest, the steps (the cluster-wide ones apart)
    and the failed step; names bounded, commands and output never (they are in status)."""
    cluster = set(applied.cluster_steps or ())
    facts: dict[str, object] = {
        "digest": applied.digest[:12],
        "steps": [s.name[:64] for s in steps if s.name not in cluster][:NAMES_IN_RECEIPT],
        "cluster_steps": [s.name[:64] for s in steps if s.name in cluster][:NAMES_IN_RECEIPT],
    }
    if applied.state == "Failed" and applied.steps:
        failed = applied.steps[-1]
        facts["failed_step"] = failed.name[:64]
        facts["exit_code"] = failed.exit_code
    return facts


class EnvironmentApplier:
    """Runs a Sprite's environment steps in its backend sprite."""

    def __init__(self, backend: SpriteBackend) -> None:
        self._backend = backend

    async def apply(self, sprite: str, steps: Sequence[EnvironmentStep]) -> RunEnvironmentStatus:
        """Apply `steps` once; AdapterError (the sprite could not be reached) propagates."""
        digest = environment_digest(steps)
        try:
            await self._backend.stat(sprite, marker_path(digest))
        except NotFound:
            pass
        else:
            return RunEnvironmentStatus(
                digest=digest,
                state="AlreadyApplied",
                message=f"{len(steps)} step(s) applied by an earlier Run (marker {digest[:12]})",
            )
        results: list[EnvironmentStepResult] = []
        for step in steps:
            code, output = await self._run(sprite, step.command)
            if code != 0:
                results.append(EnvironmentStepResult(name=step.name, exit_code=code, output=output))
                ended = "did not finish" if code is None else f"exited {code}"
                return RunEnvironmentStatus(
                    digest=digest,
                    state="Failed",
                    steps=results,
                    message=f"environment step {step.name} ({step.type}) {ended}: {step.command}"[
                        :OUTPUT_KEPT
                    ],
                )
            results.append(EnvironmentStepResult(name=step.name, exit_code=0))
        stamp = json.dumps({"steps": [s.name for s in steps]}).encode()
        await self._backend.write_file(sprite, marker_path(digest), stamp)
        return RunEnvironmentStatus(
            digest=digest,
            state="Applied",
            steps=results,
            message=f"{len(steps)} step(s) applied before the agent's command",
        )

    async def _run(self, sprite: str, command: str) -> tuple[int | None, str]:
        """(exit status, None when killed at the timeout; the end of its output)."""
        output = bytearray()
        # The backend's default lifetime after a lost socket (seconds, not forever): a step
        # cut off is an attempt lost, and the retry must not run beside a stray copy.
        session = await self._backend.exec(sprite, ["sh", "-c", command], stdin=False)
        code: int | None
        try:
            async with asyncio.timeout(STEP_TIMEOUT):
                async for chunk in session:
                    output.extend(chunk.data)
                    del output[:-OUTPUT_KEPT]
                code = session.exit_code
                if code is None:
                    code = await session.wait()
        except TimeoutError:
            await self._backend.kill_session(sprite, session.session_id, signal="SIGKILL", grace=0)
            code = None
        finally:
            await session.detach()
        return code, output.decode(errors="replace")[-OUTPUT_KEPT:]


__all__ = [
    "ENV_DIR",
    "NAMES_IN_RECEIPT",
    "EnvironmentApplier",
    "combined",
    "environment_digest",
    "marker_path",
    "receipt_facts",
]
