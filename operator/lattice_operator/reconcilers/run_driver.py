"""Driving one Run: exec session, event stream, status, receipts, WAITING and resume.

One `RunDriver` per active Run (a kopf daemon owns it). It follows a fixed
order of steps on every pass (after Tekton's TaskRun reconciler):
initialise → done? → canceled? → timed out? → sprite ready? → act on the phase.

Everything that must survive a restart is in the Run's status and written in
the same patch: the phase and conditions, the exec session id, the stream
cursor (outbox offset, counts, digest), the receipt ledger state, the resume
bookkeeping. A restarted operator re-attaches to a live session (the merger
drops the replayed scrollback) or, if the session ended meanwhile, recovers
from the outbox and the exit file the command wrapper leaves behind. An
unknown exit is never a success.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.api.v1alpha1 import Run, RunAttempt, RunStatus, set_condition
from lattice_operator.api.v1alpha1.run import (
    ActionResult,
    ResumeStatus,
    RunReceiptsStatus,
    SequenceRange,
)
from lattice_operator.builders import environment_change_intent
from lattice_operator.lifeloop.builder import RunReceipts
from lattice_operator.lifeloop.classes import FailureClass, RetryClass
from lattice_operator.lifeloop.mapping import RunTransition
from lattice_operator.lifeloop.receipts import LifecycleReceipt
from lattice_operator.metrics import (
    EVENTS_INGESTED,
    OUTBOX_LAG,
    REFUSED_ACTIONS,
    STATUS_PATCHES,
    VIOLATIONS,
)
from lattice_operator.pacing import PatchPacer
from lattice_operator.ports import (
    ActionServices,
    Clock,
    ReceiptPublisher,
    RunStatusWriter,
    SpriteDirectory,
)
from lattice_operator.ports.errors import AdapterError, ExitStatusUnknown, NotFound
from lattice_operator.ports.sprites import CheckpointInfo, ExecSession, SpriteBackend
from lattice_operator.protocol.engine import FeedResult, RunEventEngine
from lattice_operator.protocol.inputs import validate_resume_inputs
from lattice_operator.protocol.models import EventType
from lattice_operator.protocol.projection import ActionRequestStatus, RunEventsStatus
from lattice_operator.reconcilers.grants import decide_grants, run_policy_refusal
from lattice_operator.redaction import Redactor
from lattice_operator.settings import RunTimings

log = logging.getLogger(__name__)

LATTICE_DIR = "/workspace/.lattice"
OUTBOX_PATH = f"{LATTICE_DIR}/outbox.jsonl"
RESUME_PATH = f"{LATTICE_DIR}/resume.json"
PREVIOUS_RESUME_PATH = f"{LATTICE_DIR}/resume.previous.json"
"""Where a new Run moves the resume file an earlier Run left (never read by the operator)."""
OUTBOX_TAIL_BYTES = 64 * 1024
"""How much of the outbox's end a new Run reads to find the last complete line."""
EXIT_DIR = f"{LATTICE_DIR}/exit"
CHECKPOINT_ATTEMPTS = 3
"""Tries at taking a checkpoint for a WAITING before the pass gives up (and is retried)."""
REREAD_BYTES = 1024 * 1024
"""How much of the outbox before the cursor a restarted operator reads again."""
CREDENTIALS_DIR = f"{LATTICE_DIR}/credentials"
FORGE_ACTIONS = frozenset({"OPEN_PR", "POST_COMMENT", "LABEL_ISSUE"})

# The wrapper records the command's exit status on disk: the backend cannot tell the
# exit status of a session that ended while nobody was attached.
_WRAPPER = (
    'f="$1"; shift; mkdir -p "$(dirname "$f")"; "$@"; c=$?; '
    'printf "%s\\n" "$c" > "$f.tmp" && mv "$f.tmp" "$f"; exit "$c"'
)

Outcome = Literal["Succeeded", "Failed", "Waiting", "Canceled"]

# Failure reasons → Lifeloop failure class (one table). Retries happen only where the
# class's retry posture allows one (safe_retry, retry_after_reread).
FAILURE_CLASSES: Mapping[str, FailureClass] = {
    "ExitCode": FailureClass.INTERNAL_ERROR,
    "CompletedFailure": FailureClass.INTERNAL_ERROR,
    "SpriteError": FailureClass.INTERNAL_ERROR,
    "ExitUnknown": FailureClass.TRANSPORT_ERROR,
    "SessionLost": FailureClass.TRANSPORT_ERROR,
    "StartFailed": FailureClass.ADAPTER_UNAVAILABLE,  # unless the adapter's error says more
    "SpriteMissing": FailureClass.ADAPTER_UNAVAILABLE,
    "Timeout": FailureClass.TIMEOUT,
    "ResumeFailed": FailureClass.STATE_CONFLICT,
    "RunPolicy": FailureClass.INVALID_REQUEST,
}
RETRYABLE = frozenset({RetryClass.SAFE_RETRY, RetryClass.RETRY_AFTER_REREAD})
NOT_RETRIED = frozenset({"Timeout"})
"""A timeout is the Run's whole budget, not one attempt's: never retried."""

_UNKNOWN_PHASE_BY_REASON = {
    "Pending": "Pending",
    "SpriteNotReady": "Pending",
    "SpriteBusy": "Pending",
    "Starting": "Starting",
    "Running": "Running",
    "Reattaching": "Running",
    "Waiting": "Waiting",
    "Resuming": "Resuming",
}


def phase_of(status: RunStatus) -> str:
    """The phase, derived from the Succeeded condition (never the other way round)."""
    cond = next((c for c in status.conditions if c.type == "Succeeded"), None)
    if cond is None:
        return "Pending"
    if cond.status == "True":
        return "Succeeded"
    if cond.status == "False":
        return "Canceled" if cond.reason == "Canceled" else "Failed"
    return _UNKNOWN_PHASE_BY_REASON.get(cond.reason, "Running")


def resume_digest(checkpoint_id: str, inputs: Mapping[str, Any]) -> str:
    """Identity of a resume request: the same checkpoint and inputs are the same resume."""
    canonical = json.dumps({"c": checkpoint_id, "i": inputs}, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def wrapped_command(argv: list[str], env: Mapping[str, str], exit_file: str) -> list[str]:
    """argv run under `env` (added to the sprite's own environment) and the exit wrapper."""
    assignments = [f"{k}={v}" for k, v in env.items()]
    return ["env", *assignments, "sh", "-c", _WRAPPER, "lattice-run", exit_file, *argv]


@dataclass
class _SessionEnd:
    exit_code: int | None
    lost: bool = False
    """The session could not be followed to its end (re-attach failed)."""
    killed_for: str | None = None
    """Canceled or Timeout when the operator stopped it."""


class _Stop(Exception):
    """The daemon was told to stop (operator exit or Run deletion): detach, keep the session."""


class RunDriver:
    """Everything one Run needs while it is active."""

    def __init__(
        self,
        run: Run,
        *,
        view: Callable[[], Run],
        backend: SpriteBackend,
        sprites: SpriteDirectory,
        writer: RunStatusWriter,
        publisher: ReceiptPublisher,
        clock: Clock,
        timings: RunTimings,
        stopped: asyncio.Event,
        actions: ActionServices | None = None,
    ) -> None:
        self._actions = actions
        self._proposed: set[int] = set()
        self._view = view
        self._backend = backend
        self._sprites = sprites
        self._writer = writer
        self._publisher = publisher
        self._clock = clock
        self._timings = timings
        self._stopped = stopped
        meta = run.metadata
        self.ref = ObjectRef(
            api_version=run.api_version,
            kind="Run",
            namespace=meta.namespace or "default",
            name=meta.name,
            uid=meta.uid or meta.name,
        )
        self.status = run.status.model_copy(deep=True)
        self.generation = meta.generation
        self.sprite_name: str | None = self.status.sprite_name
        self.engine: RunEventEngine | None = None
        self.receipts = RunReceipts(
            run_key=self.ref.uid,
            work_item_id=run.work_item_id(),
            clock=clock,
            state=self.status.receipts.state if self.status.receipts else None,
        )
        self._pending_receipts: list[LifecycleReceipt] = []
        self._audited_through = self.status.receipts.audited_through if self.status.receipts else 0
        self._dropped_before = self.status.receipts.events_dropped if self.status.receipts else 0
        self._dropped_ranges_before = [
            (r.first, r.last)
            for r in (self.status.receipts.dropped_sequences if self.status.receipts else [])
        ]
        self._pacer = PatchPacer(
            clock,
            min_interval=timings.patch_interval,
            urgent=lambda old, new: old is None or old.get("phase") != new.get("phase"),
        )
        self._ack_due = False
        """A resumed session started: its first event must acknowledge the resume."""
        self._redactor = Redactor()
        """Every secret value delivered to the sprite, kept out of status and receipts."""
        self._pacer.prime(self._snapshot())
        self._outbox_lag = 0

    # -- the loop -------------------------------------------------------------------------

    async def drive(self) -> None:
        """Run until the Run is done or the daemon is stopped."""
        try:
            await self._audit_receipts()
            await self._recall_secrets(self._view())
            while not self._stopped.is_set():
                run = self._view()
                self.generation = run.metadata.generation
                if self._is_done():
                    break
                if run.spec.cancel:
                    await self._cancel(run)
                    break
                if run.has_timed_out(self._clock.now()):
                    await self._fail(
                        run, "Timeout", f"timeoutSeconds ({run.spec.timeout_seconds}) elapsed"
                    )
                    break
                await self._step(run)
        except _Stop:
            pass
        finally:
            await self._flush(force=True)
            OUTBOX_LAG.dec(self._outbox_lag)

    async def _step(self, run: Run) -> None:
        phase = phase_of(self.status)
        if phase == "Waiting":
            await self._waiting(run)
            return
        if phase == "Resuming" or (phase in ("Starting", "Running") and self.status.session_id):
            await self._follow(run)
            return
        await self._start(run)

    async def _audit_receipts(self) -> None:
        """After a restart: receipts handed out but never posted are reported as a gap."""
        if self.receipts.ledger.state.sequence == 0:
            return
        try:
            published = await self._publisher.published_sequences(self.ref)
        except Exception as exc:  # evidence only: never block the Run on it
            log.warning("run %s: cannot list its receipts: %s", self.ref.name, exc)
            return
        audited = self.status.receipts.audited_through if self.status.receipts else 0
        handed_out = self.receipts.ledger.state.sequence
        # Dropped by the rate limit (and reported then) is not lost in a crash.
        for first, last in self._dropped_ranges_before:
            published |= set(range(first, last + 1))
        if published:
            since = max(min(published), audited + 1)
            self._emit(self.receipts.audit(published, since=since))
        self._audited_through = handed_out

    # -- phases ---------------------------------------------------------------------------

    async def _start(self, run: Run) -> None:
        sprite = self._sprites.lookup(self.ref.namespace, run.spec.sprite_ref.name)
        if sprite is None or not sprite.ready or sprite.backend_name is None:
            why = sprite.reason if sprite else f"Sprite {run.spec.sprite_ref.name!r} not found"
            self._set("Unknown", "SpriteNotReady", f"waiting for the Sprite: {why}")
            await self._flush()
            await self._sleep(self._timings.sprite_wait)
            return
        refusal = run_policy_refusal(run, run.spec.sprite_ref.name, sprite.run_policy)
        if refusal is not None:  # also when admission could not check it (no webhook)
            await self._fail(run, "RunPolicy", refusal)
            return
        first = self._sprites.holder(self.ref.namespace, run.spec.sprite_ref.name, self.ref.uid)
        if first is not None:
            self._set("Unknown", "SpriteBusy", f"waiting for Run {first}, which has the Sprite")
            await self._flush()
            await self._sleep(self._timings.sprite_wait)
            return
        self.sprite_name = sprite.backend_name
        self.status.sprite_name = sprite.backend_name
        attempt = self._begin_attempt()
        self._set("Unknown", "Starting", f"attempt {attempt.number}: starting the exec session")
        self._emit(self.receipts.for_transition(RunTransition.EXEC_STARTING, key=self._tag()))
        await self._flush(force=True)
        argv = list(run.spec.command)
        try:
            await self._prepare_workspace()
            if self.status.outbox_start is None:
                await self._claim_protocol_files()
            engine = self._engine(run)
            if attempt.number > 1 or self.status.session_segment > 1:
                engine.restart_session(outbox_size=await self._outbox_size())
            session = await self._exec(run, argv)
        except AdapterError as exc:
            # Classed by what the adapter said: a dropped connection or a throttled request
            # is retried (safe_retry), a refused or unknown sprite is not.
            await self._attempt_failed(
                run, "StartFailed", f"could not start: {exc}", failure=exc.failure_class
            )
            if phase_of(self.status) == "Pending":
                await self._sleep(self._timings.start_retry_wait)
            return
        await self._run_session(run, session, resumed=False)

    async def _follow(self, run: Run) -> None:
        """After a restart, or when the session id is known: attach, or recover."""
        assert self.status.session_id is not None or phase_of(self.status) == "Resuming"
        if phase_of(self.status) == "Resuming":
            await self._apply_resume(run)
            return
        self.sprite_name = self.sprite_name or self.status.sprite_name
        self._engine(run)
        # The stdout stream was lost with the previous operator process.
        self._emit(
            self.receipts.for_transition(
                RunTransition.STDOUT_LOST,
                key=f"{self._tag()}:restart:{self._clock.monotonic()}",
                evidence="the operator restarted while the session was running",
            )
        )
        # Re-read the outbox tail before the cursor: checks the cursor's digest and lets
        # the merger recognise stdout copies of those lines in an unmarked replay.
        await self._read_outbox(reread=REREAD_BYTES)
        session = await self._reattach(run)
        if session is None:
            await self._session_over(run, _SessionEnd(await self._read_exit_code()))
            return
        self._emit(
            self.receipts.for_transition(
                RunTransition.STDOUT_RESTORED,
                key=f"{self._tag()}:restart:{self._clock.monotonic()}",
                evidence=f"re-attached to session {session.session_id} after a restart",
            )
        )
        await self._run_session(run, session, resumed=False, attached=True)

    async def _waiting(self, run: Run) -> None:
        await self._handle_actions(run)
        if await self._auto_resume(run):
            return
        resume = run.spec.resume
        if resume is not None and resume.checkpoint_id:
            digest = resume_digest(resume.checkpoint_id, resume.inputs)
            applied = self.status.resume.applied_digest if self.status.resume else None
            if digest != applied and digest != (
                self.status.resume.refused_digest if self.status.resume else None
            ):
                await self._request_resume(run, digest)
                return
        await self._flush()
        await self._sleep(self._timings.idle_poll)

    # -- sessions -------------------------------------------------------------------------

    async def _exec(self, run: Run, argv: list[str]) -> ExecSession:
        assert self.sprite_name is not None
        env = {
            "LATTICE_SPRITE_ID": self.sprite_name,
            "LATTICE_WORK_ITEM_ID": run.work_item_id(),
            "LATTICE_RUN": self.ref.name,
            "LATTICE_SESSION": str(self.status.session_segment),
            **{e.name: e.value for e in run.spec.env},
        }
        command = wrapped_command(argv, env, self._exit_file())
        session = await self._backend.exec(
            self.sprite_name,
            command,
            workdir=run.spec.working_dir,
            tty=run.spec.tty,
            stdin=False,
            max_run_after_disconnect=0,
        )
        # The session id is durable at once: a crash from here on re-attaches to it.
        self.status.session_id = session.session_id
        attempt = self.status.attempts[-1]
        attempt.session_id = session.session_id
        attempt.start_time = attempt.start_time or self._clock.now()
        if self.status.start_time is None:
            self.status.start_time = self._clock.now()
        self.receipts.set_session(session.session_id)
        return session

    async def _reattach(self, run: Run) -> ExecSession | None:
        """The session again if it is still running; None if it has ended."""
        assert self.sprite_name is not None and self.status.session_id is not None
        deadline = self._clock.monotonic() + self._timings.reattach_deadline
        delay = 0.2
        while True:
            try:
                sessions = await self._backend.list_sessions(self.sprite_name)
                if all(s.id != self.status.session_id for s in sessions):
                    return None
                return await self._backend.attach(self.sprite_name, self.status.session_id)
            except NotFound:
                return None
            except AdapterError as exc:
                if self._clock.monotonic() > deadline:
                    log.warning("run %s: giving up re-attaching: %s", self.ref.name, exc)
                    raise _SessionLostError(str(exc)) from exc
                self._set("Unknown", "Reattaching", f"re-attaching to the session: {exc}")
                await self._flush()
                await self._sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _run_session(
        self, run: Run, session: ExecSession, *, resumed: bool, attached: bool = False
    ) -> None:
        transition = RunTransition.RESUME_STARTED if resumed else RunTransition.EXEC_STARTED
        if not attached:
            self._emit(self.receipts.for_transition(transition, key=self._tag()))
        self._set("Unknown", "Running", f"session {session.session_id} is running")
        await self._flush(force=True)
        try:
            end = await self._stream(run, session)
        except _SessionLostError as exc:
            end = _SessionEnd(None, lost=True)
            log.info("run %s: session lost: %s", self.ref.name, exc)
        await self._session_over(run, end)

    async def _stream(self, run: Run, session: ExecSession) -> _SessionEnd:
        """Follow one session to its end, re-attaching when the socket drops."""
        engine = self._require_engine()
        while True:
            queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(maxsize=256)
            pump = asyncio.create_task(_pump(session, queue), name=f"pump-{self.ref.name}")
            try:
                end = await self._consume(run, session, queue)
            finally:
                pump.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await pump
                with contextlib.suppress(Exception):
                    await session.detach()
            if end is not None:
                return end
            # The socket dropped without an exit frame: the outbox still has every event.
            self._emit(
                self.receipts.for_transition(
                    RunTransition.STDOUT_LOST,
                    key=f"{self._tag()}:{self._clock.monotonic()}",
                    evidence="the exec socket closed without an exit frame",
                )
            )
            await self._read_outbox()
            reattached = await self._reattach(run)
            if reattached is None:
                return _SessionEnd(await self._read_exit_code())
            session = reattached
            engine.stdout_reattached()
            self._emit(
                self.receipts.for_transition(
                    RunTransition.STDOUT_RESTORED,
                    key=f"{self._tag()}:{self._clock.monotonic()}",
                    evidence=f"re-attached to session {session.session_id}",
                )
            )
            self._set("Unknown", "Running", f"session {session.session_id} re-attached")
            await self._flush()

    async def _consume(
        self, run: Run, session: ExecSession, queue: asyncio.Queue[tuple[str, Any]]
    ) -> _SessionEnd | None:
        """Feed output and the outbox until exit (an end) or socket loss (None)."""
        engine = self._require_engine()
        next_outbox = self._clock.monotonic()
        waiting_since: float | None = None
        while True:
            if self._stopped.is_set():
                raise _Stop
            now = self._clock.monotonic()
            wait = max(0.0, min(next_outbox - now, self._pacer_wait(), self._timings.idle_poll))
            try:
                kind, value = await asyncio.wait_for(queue.get(), timeout=wait)
            except TimeoutError:
                kind, value = "tick", None
            if kind == "out":
                self._absorb(engine.feed_stdout(value))
            elif kind == "replay":
                self._absorb(engine.feed_stdout(value, replay=True))
            elif kind == "exit":
                await self._read_outbox()
                return _SessionEnd(int(value))
            elif kind == "lost":
                return None
            if engine.outbox_behind or self._clock.monotonic() >= next_outbox:
                await self._read_outbox()
                await self._handle_actions(run)
                next_outbox = self._clock.monotonic() + self._timings.outbox_interval
            if engine.gate == "waiting":
                waiting_since = waiting_since or self._clock.monotonic()
                grace = self._timings.waiting_exit_grace
                if self._clock.monotonic() - waiting_since >= grace:
                    # The protocol: once you emit WAITING, stop. It did not: it is stopped.
                    violation = engine.record_violation(
                        "work_after_waiting",
                        f"the session was still running {grace:g}s after its WAITING: stopped",
                    )
                    VIOLATIONS.labels(category=violation.category).inc()
                    return await self._kill(session, "AfterWaiting")
            latest = self._view()
            if latest.spec.cancel:
                return await self._kill(session, "Canceled")
            if latest.has_timed_out(self._clock.now()):
                return await self._kill(session, "Timeout")
            await self._flush()

    async def _kill(self, session: ExecSession, why: str) -> _SessionEnd:
        assert self.sprite_name is not None
        with contextlib.suppress(AdapterError):
            await self._backend.kill_session(self.sprite_name, session.session_id, grace=5.0)
        await self._read_outbox()
        return _SessionEnd(None, killed_for=why)

    async def _session_over(self, run: Run, end: _SessionEnd) -> None:
        engine = self._require_engine()
        await self._read_outbox(final=True)
        self._absorb(engine.end_session(end.exit_code))
        attempt = self.status.attempts[-1] if self.status.attempts else None
        if attempt is not None:
            attempt.exit_code = end.exit_code
        if end.killed_for == "Canceled":
            await self._cancel(run, killed=True)
            return
        if end.killed_for == "Timeout":
            await self._fail(run, "Timeout", f"timeoutSeconds ({run.spec.timeout_seconds}) elapsed")
            return
        await self._handle_actions(run)
        events = engine.status()
        if events.state == "Waiting" and events.waiting is not None:
            self._emit(
                self.receipts.for_transition(
                    RunTransition.EXEC_EXITED, key=self._tag(), exit_code=end.exit_code
                )
            )
            await self._enter_waiting(run)
            return
        transition = RunTransition.EXEC_EXITED
        if events.completion is None and not events.errors and events.waiting is None:
            transition = RunTransition.EXEC_EXITED_UNANNOUNCED
        if end.lost:
            transition = RunTransition.SESSION_LOST
        self._emit(
            self.receipts.for_transition(transition, key=self._tag(), exit_code=end.exit_code)
        )
        reason, message = _judge(events, end)
        if reason is None:
            await self._remove_credentials()
            self._finish_attempt("Succeeded", message)
            self._set("True", "Completed" if events.completion else "Exited", message)
            self.status.completion_time = self._clock.now()
            await self._flush(force=True)
            return
        await self._attempt_failed(run, reason, message)

    # -- WAITING and resume -----------------------------------------------------------------

    async def _enter_waiting(self, run: Run) -> None:
        engine = self._require_engine()
        waiting = engine.status().waiting
        assert waiting is not None and self.sprite_name is not None
        checkpoint = waiting.checkpoint_id
        resume = self.status.resume or ResumeStatus()
        resume.checkpoint_id = checkpoint
        resume.synthesized = False
        unlisted: str | None = None
        try:
            known = {c.id for c in await self._backend.list_checkpoints(self.sprite_name)}
        except AdapterError as exc:
            known, unlisted = set(), str(exc)
            log.warning("run %s: cannot list checkpoints: %s", self.ref.name, exc)
        if checkpoint not in known:
            # Take a checkpoint now, so that a resume is always possible (a synthesized
            # capability; the receipt says so). Only a listing that worked and lacks the
            # checkpoint is the sprite's fault.
            if unlisted is None:
                engine.record_violation(
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
            self._emit(
                self.receipts.for_transition(
                    RunTransition.CHECKPOINT_SYNTHESIZED,
                    key=f"{self._tag()}:{info.id}",
                    evidence=evidence,
                )
            )
        self.status.resume = resume
        self._finish_attempt("Waiting", f"waiting: {waiting.reason}")
        self._set("Unknown", "Waiting", f"waiting for input: {waiting.reason}")
        await self._flush(force=True)

    async def _synthesize_checkpoint(self) -> CheckpointInfo:
        """A checkpoint taken by the operator, retried a few times before giving up (the
        daemon then retries the whole pass: the session is over, so it comes back here)."""
        assert self.sprite_name is not None
        delay = 0.5
        for attempt in range(1, CHECKPOINT_ATTEMPTS + 1):
            try:
                return await self._backend.create_checkpoint(
                    self.sprite_name, f"lattice: synthesized for WAITING of {self.ref.name}"
                )
            except AdapterError as exc:
                if attempt == CHECKPOINT_ATTEMPTS:
                    self._set(
                        "Unknown",
                        "CheckpointPending",
                        f"the WAITING needs a checkpoint and taking one failed: {exc}",
                    )
                    await self._flush(force=True)
                    raise
                await self._sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    async def _request_resume(self, run: Run, digest: str) -> None:
        engine = self._require_engine()
        resume = run.spec.resume
        assert resume is not None and resume.checkpoint_id is not None
        waiting = engine.status().waiting
        state = self.status.resume or ResumeStatus()
        problems: list[str] = []
        expected_ids = {state.checkpoint_id, waiting.checkpoint_id if waiting else None}
        if resume.checkpoint_id not in expected_ids:
            problems.append(
                f"checkpointId {resume.checkpoint_id!r} is not the one the Run waits on "
                f"({state.checkpoint_id!r})"
            )
        if waiting is not None:
            problems += [
                f"{p.field}: {p.reason}"
                for p in validate_resume_inputs(waiting.expected_inputs, resume.inputs)
            ]
        if problems:
            state.refused_digest = digest
            state.message = "resume refused: " + "; ".join(problems)[:900]
            self.status.resume = state
            await self._flush(force=True)
            return
        await self._begin_resume(run, digest, dict(resume.inputs), answer=None)

    async def _begin_resume(
        self, run: Run, digest: str, inputs: dict[str, Any], *, answer: str | None
    ) -> None:
        """Record the resume durably (a crash from here on repeats it), then apply it."""
        state = self.status.resume or ResumeStatus()
        state.requested_digest = digest
        state.inputs = inputs
        state.answer = answer
        state.message = None
        self.status.resume = state
        self._set("Unknown", "Resuming", f"resuming from {state.checkpoint_id}")
        await self._flush(force=True)
        await self._apply_resume(run)

    async def _apply_resume(self, run: Run) -> None:
        """Restore, write resume.json, re-execute: every step safe to repeat after a crash."""
        engine = self._require_engine()
        state = self.status.resume
        assert state is not None and self.sprite_name is not None
        waiting = engine.status().waiting
        checkpoint = state.checkpoint_id or (waiting.checkpoint_id if waiting else None)
        assert checkpoint is not None
        self._emit(
            self.receipts.for_transition(RunTransition.RESUME_STARTING, key=f"{self._tag()}:resume")
        )
        context: dict[str, Any] = {"run": self.ref.name, "session": self.status.session_segment + 1}
        if state.answer is not None:
            result = next(
                (r for r in self.status.action_results if r.request_id == state.answer), None
            )
            if result is not None:
                context["action_result"] = result.to_wire()
        # Every answer the sprite has not been given yet, refusals of non-blocking requests
        # included: a resume is the only way the operator can reach a running program.
        undelivered = [r for r in self.status.action_results if not r.resumed]
        if undelivered:
            context["action_results"] = [r.to_wire() for r in undelivered]
        try:
            await self._backend.restore_checkpoint(self.sprite_name, checkpoint)
            payload = {
                "work_item_id": run.work_item_id(),
                "checkpoint_id": waiting.checkpoint_id if waiting else checkpoint,
                "inputs": state.inputs or {},
                "context": context,
            }
            await self._backend.write_file(
                self.sprite_name, RESUME_PATH, json.dumps(payload, indent=2).encode(), atomic=True
            )
            outbox_size = await self._outbox_size()
        except AdapterError as exc:
            await self._attempt_failed(run, "ResumeFailed", f"resume failed: {exc}")
            return
        if waiting is not None:
            engine.resumed(waiting.checkpoint_id, outbox_size=outbox_size)
        self.status.session_segment += 1
        state.applied_digest = state.requested_digest
        state.applied_at = self._clock.now()
        state.count += 1
        for result in undelivered:
            result.resumed = True
        self._begin_attempt(resume=True)
        argv = list(run.spec.continuation_command or run.spec.command)
        try:
            session = await self._exec(run, argv)
        except AdapterError as exc:
            await self._attempt_failed(
                run,
                "StartFailed",
                f"could not start the continuation: {exc}",
                failure=exc.failure_class,
            )
            return
        self._ack_due = True
        await self._run_session(run, session, resumed=True)

    # -- what the sprite asks for -----------------------------------------------------------

    async def _handle_actions(self, run: Run) -> None:
        """Answer new ACTION_REQUESTs within the Intent's grants; turn proposals into Intents."""
        engine = self._require_engine()
        events = engine.status()
        if self._actions is None:
            return
        handled = {r.request_id for r in self.status.action_results}
        for request in events.action_requests:
            if request.state != "Pending" or request.request_id in handled:
                continue
            result = await self._answer(run, request)
            self.status.action_results = [*self.status.action_results, result][-32:]
            if result.status != "queued":
                engine.resolve_action_request(
                    request.request_id,
                    answered=result.status == "fulfilled",
                    at=self._clock.now(),
                    message=result.reason or (f"written to {result.path}" if result.path else None),
                )
        for proposal in events.proposals:
            if proposal.line in self._proposed:
                continue
            assert self.sprite_name is not None
            manifest = environment_change_intent(run, self.sprite_name, proposal)
            await self._actions.propose(manifest)
            self._proposed.add(proposal.line)
            name = manifest["metadata"]["name"]
            if name not in self.status.proposals:
                self.status.proposals = [*self.status.proposals, name][-32:]

    async def _answer(self, run: Run, request: ActionRequestStatus) -> ActionResult:
        assert self._actions is not None and self.sprite_name is not None
        action = request.action.value
        intent = run.spec.intent_ref.name if run.spec.intent_ref else None
        claimed = self._actions.grants(self.ref.namespace, intent) if intent else None
        decision = decide_grants(run, claimed)  # intentRef alone grants nothing
        grants = decision.grants

        def refuse(reason: str, why: str) -> ActionResult:
            REFUSED_ACTIONS.labels(reason=reason).inc()
            return ActionResult(
                request_id=request.request_id, action=action, status="refused", reason=why
            )

        if grants is None:
            return refuse(decision.reason, decision.message)
        if action not in grants.allowed_actions:
            return refuse("not_granted", f"{action} is not in Intent {intent}'s allowedActions")
        if action in FORGE_ACTIONS:
            return ActionResult(
                request_id=request.request_id,
                action=action,
                status="queued",
                reason="queued for the forge integration (not configured)",
            )
        parameters = request.parameters or {}
        if action == "NOTIFY_USER":
            message = str(parameters.get("message") or parameters.get("body") or "")[:1000]
            message = self._redactor.text(message)
            await self._actions.notify(self.ref.namespace, intent, self.ref.name, message)
            return ActionResult(request_id=request.request_id, action=action, status="fulfilled")
        # FETCH_CREDENTIAL
        name = parameters.get("name") or parameters.get("credential")
        if not isinstance(name, str) or name not in grants.credentials:
            return refuse(
                "credential_not_granted", f"credential {name!r} is not granted by Intent {intent}"
            )
        secret, key = grants.credentials[name]
        try:
            value = await self._actions.secret_value(self.ref.namespace, secret, key)
        except LookupError:
            return refuse("secret_missing", f"Secret {secret} has no key {key}")
        self._redactor.add(value)
        path = f"{CREDENTIALS_DIR}/{name}"
        await self._backend.write_file(self.sprite_name, path, value, mode=0o600, atomic=True)
        return ActionResult(
            request_id=request.request_id, action=action, status="fulfilled", path=path
        )

    async def _auto_resume(self, run: Run) -> bool:
        """Resume a sprite that waits on a blocking request the operator has answered."""
        events = self._require_engine().status()
        waiting = events.waiting
        if waiting is None:
            return False
        # The blocking request this WAITING follows (the projection links it only while the
        # request is still pending; the operator may have answered it before WAITING came).
        request_id = waiting.request_id or next(
            (
                r.request_id
                for r in reversed(events.action_requests)
                if r.blocking and r.session == waiting.session and r.line < waiting.line
            ),
            None,
        )
        if request_id is None:
            return False
        result = next((r for r in self.status.action_results if r.request_id == request_id), None)
        if result is None or result.status == "queued" or result.resumed:
            return False
        answer = {"status": result.status, "reason": result.reason, "path": result.path}
        inputs = {k: v for k, v in answer.items() if k in waiting.expected_inputs and v is not None}
        digest = resume_digest(waiting.checkpoint_id, {"answer": result.request_id, **inputs})
        await self._begin_resume(run, digest, inputs, answer=result.request_id)
        return True

    # -- secrets ----------------------------------------------------------------------------

    def _delivered_credentials(self) -> list[str]:
        return [
            r.path
            for r in self.status.action_results
            if r.action == "FETCH_CREDENTIAL" and r.status == "fulfilled" and r.path
        ]

    async def _remove_credentials(self) -> None:
        """A secret does not outlive its Run: every delivered file is removed before the Run's
        end is written (so a crash in between removes them again on the next pass)."""
        if self.sprite_name is None:
            return
        for path in self._delivered_credentials():
            try:
                await self._backend.delete_file(self.sprite_name, path)
            except AdapterError as exc:
                log.warning("run %s: could not remove %s: %s", self.ref.name, path, exc)

    async def _recall_secrets(self, run: Run) -> None:
        """After a restart: read again the values delivered earlier, to keep redacting them."""
        paths = self._delivered_credentials()
        if not paths or self._actions is None or run.spec.intent_ref is None:
            return
        intent = run.spec.intent_ref.name
        grants = decide_grants(run, self._actions.grants(self.ref.namespace, intent)).grants
        if grants is None:
            return
        for path in paths:
            name = path.rsplit("/", 1)[-1]
            if name not in grants.credentials:
                continue
            secret, key = grants.credentials[name]
            with contextlib.suppress(LookupError):
                self._redactor.add(
                    await self._actions.secret_value(self.ref.namespace, secret, key)
                )

    # -- endings ----------------------------------------------------------------------------

    async def _attempt_failed(
        self, run: Run, reason: str, message: str, *, failure: FailureClass | None = None
    ) -> None:
        failure = failure or FAILURE_CLASSES.get(reason, FailureClass.INTERNAL_ERROR)
        retry = failure.default_retry
        self._finish_attempt("Failed", message, failure, retry)
        attempts = len(self.status.attempts)
        if retry in RETRYABLE and reason not in NOT_RETRIED and attempts <= run.spec.retries:
            if reason == "SessionLost" and self.status.session_id and self.sprite_name:
                # It may still be running where we cannot see it: never two copies at once.
                with contextlib.suppress(AdapterError):
                    await self._backend.kill_session(
                        self.sprite_name, self.status.session_id, grace=5.0
                    )
            self.status.session_id = None
            self._set(
                "Unknown",
                "Pending",
                f"attempt {attempts} failed ({reason}: {message}); retrying ({failure}, {retry})",
            )
            await self._flush(force=True)
            return
        await self._fail(run, reason, message, failure=failure)

    async def _fail(
        self, run: Run, reason: str, message: str, *, failure: FailureClass | None = None
    ) -> None:
        await self._remove_credentials()
        if reason == "Timeout" and self.status.session_id and self.sprite_name:
            with contextlib.suppress(AdapterError):
                await self._backend.kill_session(
                    self.sprite_name, self.status.session_id, grace=5.0
                )
            self._emit(self.receipts.for_transition(RunTransition.TIMED_OUT, key=self._tag()))
        failure = failure or FAILURE_CLASSES.get(reason, FailureClass.INTERNAL_ERROR)
        if self.status.attempts and self.status.attempts[-1].completion_time is None:
            self._finish_attempt("Failed", message, failure, failure.default_retry)
        self._set("False", reason, message)
        self.status.completion_time = self._clock.now()
        await self._flush(force=True)

    async def _cancel(self, run: Run, *, killed: bool = False) -> None:
        if not killed and self.status.session_id and self.sprite_name:
            with contextlib.suppress(AdapterError):
                await self._backend.kill_session(
                    self.sprite_name, self.status.session_id, grace=5.0
                )
        await self._remove_credentials()
        self._emit(self.receipts.for_transition(RunTransition.CANCELED, key=self._tag()))
        if self.status.attempts and self.status.attempts[-1].completion_time is None:
            self._finish_attempt("Canceled", "canceled by spec.cancel")
        self._set("False", "Canceled", "canceled by spec.cancel")
        self.status.completion_time = self._clock.now()
        await self._flush(force=True)

    # -- status -----------------------------------------------------------------------------

    def _is_done(self) -> bool:
        return phase_of(self.status) in ("Succeeded", "Failed", "Canceled")

    def _set(self, status: Literal["True", "False", "Unknown"], reason: str, message: str) -> None:
        self.status.conditions = set_condition(
            self.status.conditions,
            type="Succeeded",
            status=status,
            reason=reason,
            message=message[:1024],
            observed_generation=self.generation,
            now=self._clock.now(),
        )
        self.status.observed_generation = self.generation
        self.status.phase = phase_of(self.status)  # type: ignore[assignment]

    def _begin_attempt(self, *, resume: bool = False) -> RunAttempt:
        if resume and self.status.attempts:
            # A resume continues the attempt that reached WAITING.
            attempt = self.status.attempts[-1]
            attempt.completion_time = None
            attempt.outcome = None
            attempt.exit_code = None
            return attempt
        attempt = RunAttempt(number=len(self.status.attempts) + 1, start_time=self._clock.now())
        self.status.attempts = [*self.status.attempts, attempt][-11:]
        return attempt

    def _finish_attempt(
        self,
        outcome: str,
        message: str,
        failure: FailureClass | None = None,
        retry: RetryClass | None = None,
    ) -> None:
        if not self.status.attempts:
            return
        attempt = self.status.attempts[-1]
        attempt.outcome = outcome
        attempt.message = message[:1024]
        attempt.completion_time = self._clock.now()
        attempt.failure_class = failure.value if failure else None
        attempt.retry_class = retry.value if retry else None

    def _snapshot(self) -> dict[str, Any]:
        if self.engine is not None:
            self.status.cursor = self.engine.cursor
            self.status.events = self.engine.status()
            self.status.log_tail = self.engine.log_tail()[-20:]
        self.status.receipts = RunReceiptsStatus(
            state=self.receipts.state,
            # The publisher counts since this process started; the status keeps the total.
            events_dropped=self._dropped_before + self._publisher.dropped(self.ref.uid),
            audited_through=self._audited_through,
            dropped_sequences=[
                SequenceRange(first=first, last=last)
                for first, last in (
                    self._dropped_ranges_before + self._publisher.dropped_sequences(self.ref.uid)
                )[-64:]
            ],
        )
        # Whatever the sprite echoed of a delivered secret never reaches the API server.
        return self._redactor.value(self.status.to_patch())  # type: ignore[no-any-return]

    def _pacer_wait(self) -> float:
        wait = self._pacer.wait_time(self._snapshot())
        return self._timings.idle_poll if wait is None else wait

    async def _flush(self, *, force: bool = False) -> None:
        """Write the status if it is due (or `force`), then publish the receipts it stored."""
        snapshot = self._snapshot()
        if snapshot != self._pacer.last_written and (force or self._pacer.due(snapshot)):
            await self._write(snapshot)
        elif not force:
            return
        # Receipts are published only once the ledger state that produced them is stored.
        dropped = self._publisher.dropped(self.ref.uid)
        await self._publish()
        if force and self._publisher.dropped(self.ref.uid) != dropped:
            await self._write(self._snapshot())  # the final word on what was dropped

    async def _write(self, snapshot: dict[str, Any]) -> None:
        await self._writer.write_run_status(self.ref.namespace, self.ref.name, snapshot)
        STATUS_PATCHES.labels(kind="Run").inc()
        self._pacer.written(snapshot)

    async def _publish(self) -> None:
        receipts, self._pending_receipts = self._pending_receipts, []
        if receipts:
            # Shielded: the status that produced them is stored; a cancellation must not
            # leave them half-posted.
            await asyncio.shield(self._publisher.publish(self.ref, receipts))

    def _emit(self, receipts: list[LifecycleReceipt]) -> None:
        if self._redactor.active:
            redact = self._redactor.value
            receipts = [
                r.model_copy(update={k: redact(v) for k, v in r if type(v) in (str, dict, list)})
                for r in receipts
            ]
        self._pending_receipts.extend(receipts)

    def _absorb(self, result: FeedResult) -> None:
        if self._ack_due and result.committed:
            self._ack_due = False
            first = result.committed[0]
            if first.event_type != EventType.INFO:
                violation = self._require_engine().record_violation(
                    "resume_not_acknowledged",
                    f"the resumed session's first event was {first.event_type.value}, not the "
                    "INFO that acknowledges the resume",
                    line=first.line,
                )
                VIOLATIONS.labels(category=violation.category).inc()
        for event in result.committed:
            EVENTS_INGESTED.labels(type=event.event_type.value).inc()
            self._emit(self.receipts.for_event(event))
        for violation in result.violations:
            VIOLATIONS.labels(category=violation.category).inc()

    # -- helpers ----------------------------------------------------------------------------

    def _engine(self, run: Run) -> RunEventEngine:
        if self.engine is None:
            assert self.sprite_name is not None
            self.engine = RunEventEngine(
                self.sprite_name,
                run.work_item_id(),
                cursor=self.status.cursor
                if self.status.cursor.line_count
                or self.status.session_id
                or self.status.cursor.outbox_offset
                else None,
                status=self.status.events,
            )
        return self.engine

    def _require_engine(self) -> RunEventEngine:
        assert self.engine is not None
        return self.engine

    def _tag(self) -> str:
        number = len(self.status.attempts)
        return f"a{number}-s{self.status.session_segment}"

    def _exit_file(self) -> str:
        return f"{EXIT_DIR}/{self.ref.uid}-{self._tag()}"

    async def _prepare_workspace(self) -> None:
        assert self.sprite_name is not None
        # Creates /workspace/.lattice/ (and its exit/ folder) before the program runs.
        await self._backend.write_file(self.sprite_name, f"{EXIT_DIR}/.keep", b"", atomic=False)

    async def _claim_protocol_files(self) -> None:
        """Make the protocol files this Run's own before its first session (safe to repeat:
        nothing has run yet). An earlier Run's resume file is moved aside, and the outbox's
        current length (to its last line end) becomes where this Run's lines begin: the
        protocol fixes both paths, so they are shared by every Run on the Sprite."""
        assert self.sprite_name is not None
        with contextlib.suppress(NotFound):
            await self._backend.rename(self.sprite_name, RESUME_PATH, PREVIOUS_RESUME_PATH)
        size = await self._outbox_size()
        start = size
        if size:
            offset = max(0, size - OUTBOX_TAIL_BYTES)
            tail = await self._backend.read_file(self.sprite_name, OUTBOX_PATH, offset=offset)
            tail = tail[: size - offset]
            # An unterminated last line is left to this Run: whatever is appended to it is
            # then one bad line, reported, rather than silently skipped.
            newline = tail.rfind(b"\n")
            start = offset + newline + 1 if newline >= 0 or offset == 0 else size
        self.status.outbox_start = start
        self.status.cursor = self.status.cursor.model_copy(update={"outbox_offset": start})
        await self._flush(force=True)

    async def _outbox_size(self) -> int:
        assert self.sprite_name is not None
        try:
            return (await self._backend.stat(self.sprite_name, OUTBOX_PATH)).size
        except NotFound:
            return 0

    async def _read_outbox(self, *, final: bool = False, reread: int = 0) -> None:
        """Consume the outbox from the cursor (from `reread` bytes before it, if given)."""
        engine = self._require_engine()
        assert self.sprite_name is not None
        reread = max(reread, engine.recheck_span())  # the last line again: still there?
        offset = max(0, engine.cursor.outbox_offset - reread)
        try:
            data = await self._backend.read_file(self.sprite_name, OUTBOX_PATH, offset=offset)
        except NotFound:
            data = b""
        except AdapterError as exc:
            log.warning("run %s: outbox read failed: %s", self.ref.name, exc)
            return
        self._absorb(engine.feed_outbox(data, offset, final=final))
        lag = offset + len(data) - engine.cursor.outbox_offset
        OUTBOX_LAG.inc(lag - self._outbox_lag)
        self._outbox_lag = lag

    async def _read_exit_code(self) -> int | None:
        assert self.sprite_name is not None
        try:
            text = await self._backend.read_file(self.sprite_name, self._exit_file())
        except AdapterError:
            return None
        try:
            return int(text.strip())
        except ValueError:
            return None

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopped.wait(), timeout=seconds)
        if self._stopped.is_set():
            raise _Stop


class _SessionLostError(Exception):
    """Re-attaching failed past the deadline."""


def _judge(events: RunEventsStatus, end: _SessionEnd) -> tuple[str | None, str]:
    """(failure reason, or None for success; message) of a session that ended.

    The terminal event decides: COMPLETED (success needs exit status 0 too), else an
    ERROR of this session, else the exit status. An unknown exit is never a success.
    """
    if end.lost:
        return "SessionLost", "the session could not be re-attached and its outcome is unknown"
    completion = events.completion
    if completion is not None and completion.status == "failure":
        return "CompletedFailure", completion.summary or "COMPLETED with status failure"
    if completion is None:
        errors = [e for e in events.errors if e.session == events.session]
        if errors:
            return "SpriteError", f"the sprite reported an error: {errors[-1].message}"
    if end.exit_code is None:
        return "ExitUnknown", "the session ended and its exit status is unknown"
    if end.exit_code != 0:
        return "ExitCode", f"the command exited with status {end.exit_code}"
    if completion is not None:
        return None, completion.summary or "completed"
    return None, "the command exited with status 0 (no COMPLETED event)"


async def _pump(session: ExecSession, queue: asyncio.Queue[tuple[str, Any]]) -> None:
    try:
        async for chunk in session:
            if chunk.stream == "stdout":
                await queue.put(("replay" if chunk.replay else "out", chunk.data))
        code = session.exit_code
        await queue.put(("exit", code) if code is not None else ("lost", None))
    except ExitStatusUnknown:
        await queue.put(("lost", None))
    except AdapterError as exc:
        log.info("exec stream ended: %s", exc)
        await queue.put(("lost", None))


__all__ = [
    "FAILURE_CLASSES",
    "OUTBOX_PATH",
    "RESUME_PATH",
    "RunDriver",
    "phase_of",
    "resume_digest",
    "shlex",
    "wrapped_command",
]
