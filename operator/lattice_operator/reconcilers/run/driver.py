"""Driving one Run: the fixed order of steps on every pass, and how attempts end.

One `RunDriver` per active Run (a kopf daemon owns it). Every pass follows one order
(after Tekton's TaskRun reconciler): done? → canceled? → timed out? → act on the phase
(start, follow after a restart, wait and resume). The work is done by small parts that
share the Run's `RunRecorder`: `SessionRunner` (exec sessions), `ProtocolFiles` (outbox,
resume.json, exit and credential files), `ActionHandler` (what the sprite asks for) and
`Resumer` (WAITING and resume); what to do is decided by the pure functions of
`decisions`.

Everything that must survive a restart is in the Run's status and written in the same
patch: the phase and conditions, the exec session id, the stream cursor (outbox offset,
counts, digest), the receipt ledger state, the resume bookkeeping. A restarted operator
re-attaches to a live session (the merger drops the replayed scrollback) or, if the
session ended meanwhile, recovers from the outbox and the exit file the command wrapper
leaves behind. An unknown exit is never a success.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.api.v1alpha1 import Run
from lattice_operator.api.v1alpha1.conditions import find_condition
from lattice_operator.api.v1alpha1.sprite import EnvironmentStep
from lattice_operator.lifeloop.classes import FailureClass
from lattice_operator.lifeloop.dispatch import dispatch
from lattice_operator.lifeloop.mapping import RunTransition
from lattice_operator.lifeloop.placement import Delivery
from lattice_operator.ports import (
    ActionServices,
    AdapterError,
    Clock,
    ExecSession,
    ReceiptPublisher,
    RunStatusWriter,
    SpriteBackend,
    SpriteDirectory,
    TransportError,
)
from lattice_operator.reconcilers.grants import intent_controller, run_policy_refusal
from lattice_operator.reconcilers.run.actions import ActionHandler
from lattice_operator.reconcilers.run.agent import REFUSED, agent_status, start_plan
from lattice_operator.reconcilers.run.coldstart import ColdStarts
from lattice_operator.reconcilers.run.decisions import (
    SessionEnd,
    auto_resume,
    ending_transition,
    failure_class,
    judge,
    requested_resume,
    retries_left,
)
from lattice_operator.reconcilers.run.environment import (
    EnvironmentApplier,
    combined,
    receipt_facts,
)
from lattice_operator.reconcilers.run.files import REREAD_BYTES, ProtocolFiles
from lattice_operator.reconcilers.run.reasons import EndReason, Reason
from lattice_operator.reconcilers.run.recorder import RunRecorder
from lattice_operator.reconcilers.run.resume import Resumer
from lattice_operator.reconcilers.run.session import SessionRunner
from lattice_operator.reconcilers.run.stopping import Stop, Stopper
from lattice_operator.settings import RunTimings

log = logging.getLogger(__name__)

_ENVIRONMENT_TRANSITIONS = {
    "Applied": RunTransition.ENVIRONMENT_APPLIED,
    "AlreadyApplied": RunTransition.ENVIRONMENT_ALREADY_APPLIED,
    "Failed": RunTransition.ENVIRONMENT_FAILED,
}


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
        sprite_changed: asyncio.Event | None = None,
    ) -> None:
        """`sprite_changed`: set when the Run's Sprite (or a Run's claim on it) may have
        changed; a Run waiting for its Sprite then looks again at once, and otherwise after
        `sprite_wait`, doubling up to `sprite_wait_max` (without it, every `sprite_wait`)."""
        meta = run.metadata
        self.ref = ObjectRef(
            api_version=run.api_version,
            kind="Run",
            namespace=meta.namespace or "default",
            name=meta.name,
            uid=meta.uid or meta.name,
        )
        self._view = view
        self._sprites = sprites
        self._services = actions
        self._clock = clock
        self._timings = timings
        self._stopper = Stopper(stopped)
        self._sprite_changed = sprite_changed
        self._hold_wait = timings.sprite_wait
        self.recorder = RunRecorder(
            run,
            ref=self.ref,
            writer=writer,
            publisher=publisher,
            clock=clock,
            patch_interval=timings.patch_interval,
        )
        self.files = ProtocolFiles(backend, self.recorder)
        self._cold_starts = ColdStarts(backend)
        self._environment = EnvironmentApplier(backend)
        self.actions = ActionHandler(actions, recorder=self.recorder, files=self.files, clock=clock)
        self.sessions = SessionRunner(
            backend=backend,
            recorder=self.recorder,
            files=self.files,
            clock=clock,
            timings=timings,
            stopper=self._stopper,
            view=view,
            on_outbox=self.actions.handle,
        )
        self.resumer = Resumer(
            backend=backend,
            recorder=self.recorder,
            files=self.files,
            clock=clock,
            stopper=self._stopper,
            on_restored=self.actions.redeliver,
        )

    # -- the loop -------------------------------------------------------------------------

    async def drive(self) -> None:
        """Run until the Run is done or the daemon is stopped."""
        recorder = self.recorder
        try:
            await recorder.audit()
            await self.actions.recall_secrets(self._view())
            while not self._stopper.stopped:
                run = self._view()
                recorder.generation = run.metadata.generation
                if recorder.is_done():
                    break
                if run.spec.cancel:
                    await self._cancel()
                    break
                if run.has_timed_out(self._clock.now()):
                    await self._fail(run, EndReason.TIMEOUT, _timed_out(run))
                    break
                await self._step(run)
        except Stop:
            pass
        finally:
            await recorder.flush(force=True)
            self.files.close()

    async def _step(self, run: Run) -> None:
        phase = self.recorder.phase
        if phase in _UNDER_WAY and self.files.sprite is None and not await self._adopt(run):
            return
        if phase == "Waiting":
            await self._waiting(run)
        elif phase == "Resuming":
            self._engine(run)
            await self._resume(run)
        elif phase in ("Starting", "Running") and self.recorder.status.session_id:
            await self._follow(run)
        else:
            await self._start(run)

    async def _adopt(self, run: Run) -> bool:
        """A Run an earlier release started names its session but not its backend sprite
        (`status.spriteName` came later): it ran in its Sprite's, which is taken as its own.
        With no such sprite known the session cannot be reached: the attempt is lost (and
        retried as the Run allows), rather than failing here at every pass."""
        sprite = self._sprites.lookup(self.ref.namespace, run.spec.sprite_ref.name)
        if sprite is not None and sprite.backend_name is not None:
            self.files.sprite = sprite.backend_name
            self.recorder.status.sprite_name = sprite.backend_name
            return True
        why = sprite.reason if sprite else f"Sprite {run.spec.sprite_ref.name!r} not found"
        await self._attempt_failed(
            run, EndReason.SESSION_LOST, f"the session's sprite is not known: {why}"
        )
        return False

    def _engine(self, run: Run) -> None:
        if self.files.sprite is None:
            raise RuntimeError("the Run has no sprite yet")
        self.recorder.engine_for(self.files.sprite, run.work_item_id())

    async def _hold(self, reason: Reason, message: str) -> None:
        current = find_condition(self.recorder.status.conditions, "Succeeded")
        wanted = ("Unknown", str(reason), message[:1024], self.recorder.generation)
        if current is None or wanted != (
            current.status,
            current.reason,
            current.message,
            current.observed_generation,
        ):
            self.recorder.set("Unknown", reason, message)
            await self.recorder.flush()
        wait = self._hold_wait
        if self._sprite_changed is not None:
            # Wake-ups end a wait; the poll is a safety net, longer at each look, so a long
            # queue on one Sprite costs next to nothing while it waits.
            self._hold_wait = min(2 * wait, max(self._timings.sprite_wait_max, wait))
        await self._stopper.sleep(wait, wake=self._sprite_changed)

    def _intent_uid(self, run: Run) -> str | None:
        """The uid of the Intent the Run's controller reference names, as the Intent index
        has it (None: no such Intent here): a reference alone proves nothing."""
        ref = intent_controller(run)
        if ref is None or self._services is None:
            return None
        grants = self._services.grants(self.ref.namespace, ref.name)
        return grants.uid if grants is not None else None

    # -- phases ---------------------------------------------------------------------------

    async def _start(self, run: Run) -> None:
        recorder = self.recorder
        name = run.spec.sprite_ref.name
        if self._sprite_changed is not None:
            self._sprite_changed.clear()  # a change from here on wakes the hold below
        sprite = self._sprites.lookup(self.ref.namespace, name)
        if sprite is None or not sprite.ready or sprite.backend_name is None:
            why = sprite.reason if sprite else f"Sprite {name!r} not found"
            await self._hold(Reason.SPRITE_NOT_READY, f"waiting for the Sprite: {why}")
            return
        refusal = run_policy_refusal(run, name, sprite.run_policy, self._intent_uid(run))
        if refusal is not None:  # also when admission could not check it (no webhook)
            await self._fail(run, EndReason.RUN_POLICY, refusal)
            return
        first = self._sprites.holder(self.ref.namespace, name, self.ref.uid)
        if first is not None:
            # The holder is named once: while a Run waits, the Sprite passes from Run to Run,
            # and naming each new holder would rewrite the status of every Run queued on it
            # (and of their Intents) as each one ends: writes growing with the queue's square.
            current = find_condition(recorder.status.conditions, "Succeeded")
            busy = current is not None and current.reason == Reason.SPRITE_BUSY
            message = current.message if current is not None and busy else None
            await self._hold(
                Reason.SPRITE_BUSY, message or f"waiting for Run {first}, which has the Sprite"
            )
            return
        self._hold_wait = self._timings.sprite_wait
        self.files.sprite = sprite.backend_name
        recorder.status.sprite_name = sprite.backend_name
        attempt = recorder.begin_attempt()
        recorder.set(
            "Unknown", Reason.STARTING, f"attempt {attempt.number}: starting the exec session"
        )
        steps = combined(sprite.cluster_environment, sprite.environment)
        cluster = [s.name for s in sprite.cluster_environment]
        if steps and not await self._apply_environment(run, steps, cluster):
            return
        # Negotiated and placed before the exec: a refusal ends the Run without one.
        plan = start_plan(run, list(run.spec.command), recorder.status.session_segment)
        recorder.status.agent = agent_status(run, plan, "context", recorder.status.agent)
        tag = recorder.tag()
        await self._cold_starts.note(sprite.backend_name)
        try:
            session = await dispatch(
                plan,
                starting=lambda p: recorder.receipts.for_transition(
                    RunTransition.EXEC_STARTING, key=tag, plan=p
                ),
                emit=recorder.emit,
                invoke=lambda delivery: self._launch(run, attempt.number, delivery),
            )
        except AdapterError as exc:
            if run.spec.mode == "exec_post" and _maybe_executed(exc):
                await self._fail(
                    run, EndReason.START_FAILED, f"could not start: {exc}; {_POST_LOST}"
                )
                return
            # Classed by what the adapter said: a dropped connection or a throttled request
            # is retried (safe_retry), a refused or unknown sprite is not.
            await self._attempt_failed(
                run, EndReason.START_FAILED, f"could not start: {exc}", failure=exc.failure_class
            )
            if recorder.phase == "Pending":
                await self._stopper.sleep(self._timings.start_retry_wait)
            return
        if session is None:
            assert plan.refusal is not None
            await self._fail(run, REFUSED[plan.refusal], plan.message, failure=plan.refusal)
            return
        await self._session_over(run, await self.sessions.follow(run, session, resumed=False))

    async def _apply_environment(
        self, run: Run, steps: Sequence[EnvironmentStep], cluster: Sequence[str]
    ) -> bool:
        """The environment (the cluster-wide steps named `cluster` first, then the Sprite's),
        before the agent's command (every mode), with its receipt; False: the attempt (sprite
        unreachable) or the Run (a step failed) ended."""
        recorder = self.recorder
        recorder.set(
            "Unknown",
            Reason.STARTING,
            f"attempt {len(recorder.status.attempts)}: applying the Sprite's environment "
            f"({len(steps)} step(s))",
        )
        await recorder.flush(force=True)
        try:
            applied = await self._environment.apply(self.files.require_sprite(), steps)
        except AdapterError as exc:
            await self._attempt_failed(
                run,
                EndReason.START_FAILED,
                f"could not apply the Sprite's environment: {exc}",
                failure=exc.failure_class,
            )
            return False
        if cluster:
            applied = applied.model_copy(update={"cluster_steps": list(cluster)})
        recorder.status.environment = applied
        # In the Run's sequence before the session's; published once this status is written.
        recorder.emit(
            recorder.receipts.for_transition(
                _ENVIRONMENT_TRANSITIONS[applied.state],
                key=recorder.tag(),
                facts=receipt_facts(applied, steps),
                evidence=(applied.message or "") if applied.state == "Failed" else "",
            )
        )
        if applied.state == "Failed":
            await self._fail(run, EndReason.ENVIRONMENT_FAILED, applied.message or "")
            return False
        recorder.set("Unknown", Reason.STARTING, f"{applied.message}; starting the exec session")
        return True

    async def _launch(self, run: Run, attempt: int, delivery: Delivery) -> ExecSession:
        """The exec of a session start, with what the plan placed: its files first."""
        recorder = self.recorder
        self._engine(run)
        if attempt > 1 or recorder.status.session_segment > 1:
            recorder.require_engine().restart_session(outbox_size=await self.files.outbox_size())
        await self.files.write_payloads(delivery.files)
        return await self._exec_while_storing(run, delivery)

    async def _exec_while_storing(self, run: Run, delivery: Delivery) -> ExecSession:
        """The exec, and the status write of the attempt and `Starting` only if the exec is
        not confirmed within `starting_write_after`.

        An exec confirmed sooner is stored once, by the `Running` write that follows at once
        (the attempt, its session and the start time; the starting receipt is posted after
        it): one Run status write less. Nothing waits for the write: the wrapper of a Run's
        first session makes the protocol files the Run's own in the sprite
        (`ProtocolFiles.learn_start` reads what it found), and a crash before the session is
        stored starts the attempt again, as a crash between the exec and the `Running` write
        always did (the `Starting` write, beside the exec, never closed that window). A failed
        write does not undo a started session: the `Running` write stores both."""
        recorder = self.recorder
        claim = recorder.status.outbox_start is None
        starting = asyncio.ensure_future(
            self.sessions.start(run, list(delivery.argv), claim=claim, extra_env=dict(delivery.env))
        )
        grace = self._timings.starting_write_after
        if grace > 0:
            try:
                await asyncio.wait([starting], timeout=grace)
            except BaseException:
                starting.cancel()  # as the gather below would: no exec outlives its daemon
                raise
        if starting.done():
            return starting.result()
        wrote, started = await asyncio.gather(
            recorder.flush(force=True), starting, return_exceptions=True
        )
        if isinstance(started, BaseException):
            raise started
        if isinstance(wrote, BaseException):
            if not isinstance(wrote, Exception):
                raise wrote
            log.warning(
                "run %s: the Starting write failed (%s); the next one follows", self.ref.name, wrote
            )
        return started

    async def _follow(self, run: Run) -> None:
        """After a restart, with the session id known: attach, or recover from disk."""
        recorder = self.recorder
        self._engine(run)
        # The stdout stream was lost with the previous operator process.
        recorder.require_engine().stdout_reattached()
        key = f"{recorder.tag()}:restart:{self._clock.monotonic()}"
        recorder.emit(
            recorder.receipts.for_transition(
                RunTransition.STDOUT_LOST,
                key=key,
                evidence="the operator restarted while the session was running",
            )
        )
        # Re-read the outbox tail before the cursor: checks the cursor's digest and lets
        # the merger recognise stdout copies of those lines in an unmarked replay.
        await self.files.read_outbox(reread=REREAD_BYTES)
        session = await self.sessions.reattach()
        if session is None:
            await self._session_over(run, SessionEnd(await self.files.read_exit_code()))
            return
        recorder.emit(
            recorder.receipts.for_transition(
                RunTransition.STDOUT_RESTORED,
                key=f"{recorder.tag()}:restart:{self._clock.monotonic()}",
                evidence=f"re-attached to session {session.session_id} after a restart",
            )
        )
        end = await self.sessions.follow(run, session, resumed=False, attached=True)
        await self._session_over(run, end)

    async def _waiting(self, run: Run) -> None:
        self._engine(run)
        await self.actions.handle(run)
        recorder = self.recorder
        answer = auto_resume(recorder.require_engine().status(), recorder.status.action_results)
        if answer is not None:
            await self.resumer.begin(answer.digest, answer.inputs, answer=answer.request_id)
            await self._resume(run)
            return
        digest = requested_resume(run, recorder.status.resume)
        if digest is not None:
            if await self.resumer.request(run, digest):
                await self._resume(run)
            return
        await recorder.flush()
        await self._stopper.sleep(self._timings.idle_poll)

    async def _resume(self, run: Run) -> None:
        """Restore, write resume.json, re-execute: every step safe to repeat after a crash."""
        argv = list(run.spec.continuation_command or run.spec.command)
        try:
            plan = await self.resumer.restore(run, argv)
        except AdapterError as exc:
            await self._attempt_failed(run, EndReason.RESUME_FAILED, f"resume failed: {exc}")
            return
        if plan.refusal is not None:
            await self._fail(run, REFUSED[plan.refusal], plan.message, failure=plan.refusal)
            return
        try:
            session = await self.sessions.start(
                run, list(plan.delivery.argv), extra_env=dict(plan.delivery.env)
            )
        except AdapterError as exc:
            await self._attempt_failed(
                run,
                EndReason.START_FAILED,
                f"could not start the continuation: {exc}",
                failure=exc.failure_class,
            )
            return
        self.recorder.ack_due = True
        await self._session_over(run, await self.sessions.follow(run, session, resumed=True))

    # -- endings ----------------------------------------------------------------------------

    async def _session_over(self, run: Run, end: SessionEnd) -> None:
        recorder = self.recorder
        engine = recorder.require_engine()
        await self.files.read_outbox(final=True)
        recorder.absorb(engine.end_session(end.exit_code))
        if recorder.status.attempts:
            recorder.status.attempts[-1].exit_code = end.exit_code
        if end.killed_for == "Canceled":
            await self._cancel(killed=True)
            return
        if end.killed_for == "Timeout":
            await self._fail(run, EndReason.TIMEOUT, _timed_out(run))
            return
        await self.actions.handle(run)
        events = engine.status()
        if events.state == "Waiting" and events.waiting is not None:
            recorder.emit(
                recorder.receipts.for_transition(
                    RunTransition.EXEC_EXITED, key=recorder.tag(), exit_code=end.exit_code
                )
            )
            await self.resumer.enter_waiting()
            return
        recorder.emit(
            recorder.receipts.for_transition(
                ending_transition(events, end), key=recorder.tag(), exit_code=end.exit_code
            )
        )
        reason, message = judge(events, end)
        if reason is None:
            await self.actions.remove_credentials()
            recorder.finish_attempt("Succeeded", message)
            done = Reason.COMPLETED if events.completion else Reason.EXITED
            recorder.set("True", done, message)
            recorder.status.completion_time = self._clock.now()
            await recorder.flush(force=True)
            return
        if run.spec.mode == "exec_post" and reason in _UNKNOWN_ENDS:
            # The command belonged to the lost request and may have run: never again.
            await self._fail(run, reason, f"{message}; {_POST_LOST}")
            return
        await self._attempt_failed(run, reason, message)

    async def _attempt_failed(
        self, run: Run, reason: str, message: str, *, failure: FailureClass | None = None
    ) -> None:
        recorder = self.recorder
        failure = failure_class(reason, failure)
        retry = failure.default_retry
        recorder.finish_attempt("Failed", message, failure, retry)
        attempts = len(recorder.status.attempts)
        if not retries_left(reason, failure, attempts, run.spec.retries):
            await self._fail(run, reason, message, failure=failure)
            return
        session_id = recorder.status.session_id
        if reason == EndReason.SESSION_LOST and session_id and self.files.sprite:
            # It may still be running where we cannot see it: never two copies at once.
            await self.sessions.kill(session_id)
        recorder.status.session_id = None
        recorder.set(
            "Unknown",
            Reason.PENDING,
            f"attempt {attempts} failed ({reason}: {message}); retrying ({failure}, {retry})",
        )
        await recorder.flush(force=True)

    async def _fail(
        self, run: Run, reason: str, message: str, *, failure: FailureClass | None = None
    ) -> None:
        recorder = self.recorder
        await self.actions.remove_credentials()
        session_id = recorder.status.session_id
        if reason == EndReason.TIMEOUT and session_id and self.files.sprite:
            await self.sessions.kill(session_id)
            recorder.emit(
                recorder.receipts.for_transition(RunTransition.TIMED_OUT, key=recorder.tag())
            )
        failure = failure_class(reason, failure)
        if recorder.attempt_open():
            recorder.finish_attempt("Failed", message, failure, failure.default_retry)
        recorder.set("False", EndReason(reason), message)
        recorder.status.completion_time = self._clock.now()
        await recorder.flush(force=True)

    async def _cancel(self, *, killed: bool = False) -> None:
        recorder = self.recorder
        session_id = recorder.status.session_id
        if not killed and session_id and self.files.sprite:
            await self.sessions.kill(session_id)
        await self.actions.remove_credentials()
        recorder.emit(recorder.receipts.for_transition(RunTransition.CANCELED, key=recorder.tag()))
        if recorder.attempt_open():
            recorder.finish_attempt("Canceled", "canceled by spec.cancel")
        recorder.set("False", Reason.CANCELED, "canceled by spec.cancel")
        recorder.status.completion_time = self._clock.now()
        await recorder.flush(force=True)


# An exec_post session whose end is unknown is not retried (see `_session_over`).
_UNKNOWN_ENDS = frozenset({EndReason.EXIT_UNKNOWN, EndReason.SESSION_LOST})
_POST_LOST = (
    "mode exec_post: the HTTP exec's answer was lost before its exit status (an operator "
    "restart or a dropped connection) and the command may have run, so it is not run again"
)

# Phases with a session (or one to resume): they need the Run's backend sprite.
_UNDER_WAY = frozenset({"Starting", "Running", "Waiting", "Resuming"})


def _maybe_executed(exc: AdapterError) -> bool:
    """Whether the request may have reached the backend (a connection that failed, not one
    that was never made, nor an answer that refused it)."""
    return isinstance(exc, TransportError) and exc.maybe_executed


def _timed_out(run: Run) -> str:
    return f"timeoutSeconds ({run.spec.timeout_seconds}) elapsed"


__all__ = ["RunDriver"]
