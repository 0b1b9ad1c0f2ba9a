"""WAITING and resume: a checkpoint to resume from (the sprite's, or one the operator takes),
a resume checked against what the WAITING expects, recorded durably, then applied: restore,
resume.json, and the continuation's session. Every step is safe to repeat after a crash."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from lattice_operator.api.v1alpha1 import Run
from lattice_operator.api.v1alpha1.run import ResumeStatus
from lattice_operator.clock import Clock
from lattice_operator.lifeloop.dispatch import DispatchPlan
from lattice_operator.lifeloop.mapping import RunTransition
from lattice_operator.ports import AdapterError, CheckpointInfo, SpriteBackend
from lattice_operator.reconcilers.run.agent import agent_status, resume_plan
from lattice_operator.reconcilers.run.decisions import (
    RESUME_PATH,
    resume_context,
    resume_problems,
)
from lattice_operator.reconcilers.run.files import ProtocolFiles
from lattice_operator.reconcilers.run.reasons import Reason
from lattice_operator.reconcilers.run.recorder import RunRecorder
from lattice_operator.reconcilers.run.stopping import Stopper

log = logging.getLogger(__name__)

CHECKPOINT_ATTEMPTS = 3
"""Tries at taking a checkpoint for a WAITING before the pass gives up (and is retried)."""


class Resumer:
    """The WAITING → checkpoint → resume steps of one Run."""

    def __init__(
        self,
        *,
        backend: SpriteBackend,
        recorder: RunRecorder,
        files: ProtocolFiles,
        clock: Clock,
        stopper: Stopper,
        on_restored: Callable[[Run], Awaitable[None]] | None = None,
    ) -> None:
        self._on_restored = on_restored
        """Called once the checkpoint is back (the driver delivers credentials again)."""
        self._backend = backend
        self._recorder = recorder
        self._files = files
        self._clock = clock
        self._stopper = stopper

    async def enter_waiting(self) -> None:
        """The session ended on WAITING: make sure its checkpoint exists, then wait."""
        recorder = self._recorder
        engine = recorder.require_engine()
        waiting = engine.status().waiting
        if waiting is None:
            raise RuntimeError("enter_waiting without a WAITING")
        checkpoint = waiting.checkpoint_id
        resume = recorder.status.resume or ResumeStatus()
        resume.checkpoint_id = checkpoint
        resume.synthesized = False
        unlisted: str | None = None
        try:
            known = {
                c.id for c in await self._backend.list_checkpoints(self._files.require_sprite())
            }
        except AdapterError as exc:
            known, unlisted = set(), str(exc)
            log.warning("run %s: cannot list checkpoints: %s", recorder.ref.name, exc)
        if checkpoint not in known:
            # Take a checkpoint now, so that a resume is always possible (a synthesized
            # capability; the receipt says so). Only a listing that worked and lacks the
            # checkpoint is the sprite's fault.
            if unlisted is None:
                recorder.violation(
                    "checkpoint_missing",
                    f"WAITING names checkpoint {checkpoint!r}, which the backend does not have",
                )
            info = await self._synthesize_checkpoint()
            resume.checkpoint_id = info.id
            resume.synthesized = True
            evidence = (
                f"WAITING named {checkpoint!r}; the operator took {info.id}"
                if unlisted is None
                else f"checkpoints could not be listed ({unlisted}); the operator took {info.id}"
            )
            recorder.emit(
                recorder.receipts.for_transition(
                    RunTransition.CHECKPOINT_SYNTHESIZED,
                    key=f"{recorder.tag()}:{info.id}",
                    evidence=evidence,
                )
            )
        recorder.status.resume = resume
        recorder.finish_attempt("Waiting", f"waiting: {waiting.reason}")
        recorder.set("Unknown", Reason.WAITING, f"waiting for input: {waiting.reason}")
        await recorder.flush(force=True)

    async def _synthesize_checkpoint(self) -> CheckpointInfo:
        """A checkpoint taken by the operator, retried a few times before giving up (the
        daemon then retries the whole pass: the session is over, so it comes back here)."""
        delay = 0.5
        for attempt in range(1, CHECKPOINT_ATTEMPTS + 1):
            try:
                return await self._backend.create_checkpoint(
                    self._files.require_sprite(),
                    f"lattice: synthesized for WAITING of {self._recorder.ref.name}",
                )
            except AdapterError as exc:
                if attempt == CHECKPOINT_ATTEMPTS:
                    self._recorder.set(
                        "Unknown",
                        Reason.CHECKPOINT_PENDING,
                        f"the WAITING needs a checkpoint and taking one failed: {exc}",
                    )
                    await self._recorder.flush(force=True)
                    raise
                await self._stopper.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    async def request(self, run: Run, digest: str) -> bool:
        """`spec.resume` checked: accepted and recorded (True), or refused with the reasons
        in `status.resume.message` (False, the Run keeps waiting)."""
        recorder = self._recorder
        waiting = recorder.require_engine().status().waiting
        state = recorder.status.resume or ResumeStatus()
        problems = resume_problems(run, state, waiting)
        if problems:
            state.refused_digest = digest
            state.message = "resume refused: " + "; ".join(problems)[:900]
            recorder.status.resume = state
            recorder.changed()
            await recorder.flush(force=True)
            return False
        assert run.spec.resume is not None
        await self.begin(digest, dict(run.spec.resume.inputs), answer=None)
        return True

    async def begin(self, digest: str, inputs: dict[str, Any], *, answer: str | None) -> None:
        """Record the resume durably (a crash from here on repeats it)."""
        state = self._recorder.status.resume or ResumeStatus()
        state.requested_digest = digest
        state.inputs = inputs
        state.answer = answer
        state.message = None
        self._recorder.status.resume = state
        self._recorder.set("Unknown", Reason.RESUMING, f"resuming from {state.checkpoint_id}")
        await self._recorder.flush(force=True)

    async def restore(self, run: Run, argv: list[str]) -> DispatchPlan:
        """Restore the checkpoint and write resume.json (raises the backend's error), then
        count the resume and reopen the attempt that reached WAITING. Returns the plan of
        the continuation `argv` (spec.agent: negotiated, the resume payload placed); a
        refused one restores nothing."""
        recorder = self._recorder
        engine = recorder.require_engine()
        status = recorder.status
        state = status.resume
        if state is None:
            raise RuntimeError("restore without a recorded resume")
        waiting = engine.status().waiting
        checkpoint = state.checkpoint_id or (waiting.checkpoint_id if waiting else None)
        if checkpoint is None:
            raise RuntimeError("restore without a checkpoint")
        context, undelivered = resume_context(
            recorder.ref.name, status.session_segment, state.answer, status.action_results
        )
        payload = {
            "work_item_id": run.work_item_id(),
            "checkpoint_id": waiting.checkpoint_id if waiting else checkpoint,
            "inputs": state.inputs or {},
            "context": context,
        }
        body = json.dumps(payload, indent=2)
        plan = resume_plan(run, argv, body, status.session_segment + 1)
        status.agent = agent_status(run, plan, "resume", status.agent)
        recorder.emit(
            recorder.receipts.for_transition(
                RunTransition.RESUME_STARTING, key=f"{recorder.tag()}:resume", plan=plan
            )
        )
        if plan.refusal is not None:
            return plan
        await self._backend.restore_checkpoint(self._files.require_sprite(), checkpoint)
        # resume.json is the sprite protocol's, written whatever the placement.
        await self._files.write_resume(body.encode())
        await self._files.write_payloads(
            {p: b for p, b in plan.delivery.files.items() if p != RESUME_PATH}
        )
        if self._on_restored is not None:
            await self._on_restored(run)
        outbox_size = await self._files.outbox_size()
        if waiting is not None:
            engine.resumed(waiting.checkpoint_id, outbox_size=outbox_size)
        status.session_segment += 1
        state.applied_digest = state.requested_digest
        state.applied_at = self._clock.now()
        state.count += 1
        for result in undelivered:
            result.resumed = True
        recorder.begin_attempt(resume=True)
        return plan


__all__ = ["CHECKPOINT_ATTEMPTS", "Resumer"]
