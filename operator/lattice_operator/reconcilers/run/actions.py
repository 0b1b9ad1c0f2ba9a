"""What the sprite asks for: ACTION_REQUESTs answered within the Intent's grants, proposals
turned into Intents, and the credentials delivered for this Run (redacted everywhere,
removed at its end, recalled after a restart)."""

from __future__ import annotations

import contextlib

from lattice_operator.api.v1alpha1 import Run
from lattice_operator.api.v1alpha1.run import ActionResult
from lattice_operator.builders import environment_change_intent
from lattice_operator.clock import Clock
from lattice_operator.metrics import REFUSED_ACTIONS
from lattice_operator.ports import ActionServices
from lattice_operator.protocol.projection import ActionRequestStatus
from lattice_operator.reconcilers.grants import decide_grants
from lattice_operator.reconcilers.run.decisions import (
    credential_path,
    decide_action,
    delivered_credentials,
)
from lattice_operator.reconcilers.run.files import ProtocolFiles
from lattice_operator.reconcilers.run.forge_actions import ForgeActions
from lattice_operator.reconcilers.run.recorder import RunRecorder

MAX_RESULTS = 32
MAX_PROPOSALS = 32


class ActionHandler:
    """Answers a Run's action requests and proposals (nothing without `ActionServices`)."""

    def __init__(
        self,
        services: ActionServices | None,
        *,
        recorder: RunRecorder,
        files: ProtocolFiles,
        clock: Clock,
    ) -> None:
        self._services = services
        self._recorder = recorder
        self._files = files
        self._clock = clock
        self._proposed: set[int] = set()
        self._forge: ForgeActions | None = None

    async def handle(self, run: Run) -> None:
        """Answer new ACTION_REQUESTs within the Intent's grants; turn proposals into Intents."""
        if self._services is None:
            return
        engine = self._recorder.require_engine()
        status = self._recorder.status
        events = engine.status()
        # A queued answer (a forge not reachable yet) is tried again on the next pass.
        handled = {r.request_id for r in status.action_results if r.status != "queued"}
        for request in events.action_requests:
            if request.state != "Pending" or request.request_id in handled:
                continue
            result = await self._answer(run, request)
            if result is None:
                continue  # a retryable forge error: tried again on the next pass
            kept = [r for r in status.action_results if r.request_id != request.request_id]
            if kept != status.action_results and result.status == "queued":
                continue  # still queued: nothing new to record
            status.action_results = [*kept, result][-MAX_RESULTS:]
            if result.status != "queued":
                engine.resolve_action_request(
                    request.request_id,
                    answered=result.status == "fulfilled",
                    at=self._clock.now(),
                    message=result.reason or (f"written to {result.path}" if result.path else None),
                )
            self._recorder.changed()
        for proposal in events.proposals:
            if proposal.line in self._proposed or self._files.sprite is None:
                continue
            manifest = environment_change_intent(run, self._files.sprite, proposal)
            await self._services.propose(manifest)
            self._proposed.add(proposal.line)
            name = manifest["metadata"]["name"]
            if name not in status.proposals:
                status.proposals = [*status.proposals, name][-MAX_PROPOSALS:]
                self._recorder.changed()

    async def _answer(self, run: Run, request: ActionRequestStatus) -> ActionResult | None:
        assert self._services is not None
        action = request.action.value
        intent = run.spec.intent_ref.name if run.spec.intent_ref else None
        claimed = self._services.grants(self._recorder.ref.namespace, intent) if intent else None
        granted = decide_grants(run, claimed)
        decision = decide_action(request, granted, intent)

        def result(status: str, **fields: str | None) -> ActionResult:
            return ActionResult(
                request_id=request.request_id, action=action, status=status, **fields
            )

        def refuse(reason: str, why: str) -> ActionResult:
            REFUSED_ACTIONS.labels(reason=reason).inc()
            return result("refused", reason=why)

        if decision.kind == "refuse":
            return refuse(decision.reason, decision.message)
        if decision.kind == "queue":
            return result("queued", reason=decision.message)
        if decision.kind == "forge":
            access = self._services.forge()
            if access is None:
                return result("queued", reason="queued for the forge (no GitHub is configured)")
            if self._forge is None:
                self._forge = ForgeActions(access, self._files.backend, self._recorder)
            grant = granted.grants.forge if granted.grants is not None else None
            return await self._forge.execute(run, request, grant, self._files.sprite)
        if decision.kind == "notify":
            message = self._recorder.redactor.text(decision.message)
            await self._services.notify(
                self._recorder.ref.namespace, intent, run.metadata.name, message
            )
            return result("fulfilled")
        secret, key = decision.secret
        try:
            value = await self._services.secret_value(self._recorder.ref.namespace, secret, key)
        except LookupError:
            return refuse("secret_missing", f"Secret {secret} has no key {key}")
        self._recorder.redactor.add(value)
        path = credential_path(decision.credential)
        await self._files.write_credential(path, value)
        return result("fulfilled", path=path)

    # -- credentials ------------------------------------------------------------------------

    async def remove_credentials(self) -> None:
        """A secret does not outlive its Run: every delivered file is removed before the Run's
        end is written (so a crash in between removes them again on the next pass)."""
        await self._files.remove(delivered_credentials(self._recorder.status.action_results))

    async def redeliver(self, run: Run) -> None:
        """After a checkpoint is restored: the credentials delivered earlier, written again
        (they live in memory, /dev/shm, which a restore does not bring back), as long as the
        Intent still grants them."""
        paths = delivered_credentials(self._recorder.status.action_results)
        if not paths or self._services is None or run.spec.intent_ref is None:
            return
        namespace = self._recorder.ref.namespace
        grants = decide_grants(
            run, self._services.grants(namespace, run.spec.intent_ref.name)
        ).grants
        if grants is None:
            return
        for path in paths:
            name = path.rsplit("/", 1)[-1]
            if name not in grants.credentials:
                continue
            secret, key = grants.credentials[name]
            try:
                value = await self._services.secret_value(namespace, secret, key)
            except LookupError:
                continue
            self._recorder.redactor.add(value)
            await self._files.write_credential(path, value)

    async def recall_secrets(self, run: Run) -> None:
        """After a restart: read again the values delivered earlier, to keep redacting them."""
        paths = delivered_credentials(self._recorder.status.action_results)
        if not paths or self._services is None or run.spec.intent_ref is None:
            return
        namespace = self._recorder.ref.namespace
        intent = run.spec.intent_ref.name
        grants = decide_grants(run, self._services.grants(namespace, intent)).grants
        if grants is None:
            return
        for path in paths:
            name = path.rsplit("/", 1)[-1]
            if name not in grants.credentials:
                continue
            secret, key = grants.credentials[name]
            with contextlib.suppress(LookupError):
                self._recorder.redactor.add(
                    await self._services.secret_value(namespace, secret, key)
                )


__all__ = ["ActionHandler"]
