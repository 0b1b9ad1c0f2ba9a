"""OPEN_PR, POST_COMMENT and LABEL_ISSUE carried out on the forge within the Intent's grants.

The sprite names what it wants; the operator decides where it goes (the Intent's repository,
issue or pull request, and the one branch the sprite may push) and does it with its own
credential. Every write carries an idempotency key made of the Run's uid and the request's
id, so a retry after a lost answer or a restart finds what was done instead of doing it
again. A forge error whose retry class allows it leaves the request pending (retried on a
later pass, `attempts` bounded); any other refuses it with the reason and the class.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from lattice_operator.api.v1alpha1 import Run
from lattice_operator.api.v1alpha1.run import ActionResult
from lattice_operator.forge.delivery import BranchTarget, DeliveryLimits, deliver_branch
from lattice_operator.lifeloop.classes import RetryClass
from lattice_operator.ports import AdapterError, ForgeAccess, ForgeGrant, SpriteBackend
from lattice_operator.protocol.projection import ActionRequestStatus
from lattice_operator.reconcilers.run.recorder import RunRecorder

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
RETRYABLE = frozenset({RetryClass.SAFE_RETRY, RetryClass.RETRY_AFTER_REREAD})
BRANCH_REFUSED = "branch_refused"
Answer = Callable[..., ActionResult]


class ForgeActions:
    """One Run's forge actions."""

    def __init__(self, access: ForgeAccess, backend: SpriteBackend, recorder: RunRecorder) -> None:
        self._access = access
        self._backend = backend
        self._recorder = recorder
        self._attempts: dict[str, int] = {}

    async def execute(
        self, run: Run, request: ActionRequestStatus, grant: ForgeGrant | None, sprite: str | None
    ) -> ActionResult | None:
        """The answer, or None to try again later (a retryable forge error)."""
        action = request.action.value

        def result(status: str, **fields: Any) -> ActionResult:
            return ActionResult(
                request_id=request.request_id, action=action, status=status, **fields
            )

        if grant is None:
            return result("refused", reason="the Intent names no repository to act on")
        parameters = request.parameters or {}
        key = f"{self._recorder.ref.uid}:{request.request_id}"
        try:
            if action == "POST_COMMENT":
                return await self._comment(grant, parameters, key, result)
            if action == "LABEL_ISSUE":
                return await self._label(grant, parameters, result)
            return await self._open_pr(run, grant, parameters, sprite, result)
        except AdapterError as exc:
            tries = self._attempts.get(request.request_id, 0) + 1
            self._attempts[request.request_id] = tries
            if exc.retry_class in RETRYABLE and tries < MAX_ATTEMPTS:
                log.info("%s %s: %s (retrying, %s)", action, request.request_id, exc, tries)
                return None
            return result(
                "refused",
                reason=f"{exc} ({exc.failure_class.value}, {exc.retry_class.value})"[:512],
            )

    async def _comment(
        self, grant: ForgeGrant, parameters: dict[str, Any], key: str, result: Answer
    ) -> ActionResult:
        body = parameters.get("body")
        if not isinstance(body, str) or not body.strip() or len(body) > 60_000:
            return result("refused", reason="parameters.body must be text of 1 to 60,000 chars")
        number = grant.pull or grant.issue
        if number is None:
            return result("refused", reason="the Intent names no issue or pull request")
        comment = await self._access.forge.create_comment(
            grant.repo, number, self._recorder.redactor.text(body), key=key
        )
        return result("fulfilled", url=comment.html_url or None)

    async def _label(
        self, grant: ForgeGrant, parameters: dict[str, Any], result: Answer
    ) -> ActionResult:
        labels = parameters.get("labels")
        if isinstance(labels, str):
            labels = [labels]
        if (
            not isinstance(labels, list)
            or not 1 <= len(labels) <= 10
            or not all(isinstance(x, str) and 0 < len(x) <= 50 for x in labels)
        ):
            return result("refused", reason="parameters.labels must be 1 to 10 label names")
        number = grant.issue or grant.pull
        if number is None:
            return result("refused", reason="the Intent names no issue to label")
        await self._access.forge.add_labels(grant.repo, number, labels)
        return result("fulfilled")

    async def _open_pr(
        self,
        run: Run,
        grant: ForgeGrant,
        parameters: dict[str, Any],
        sprite: str | None,
        result: Answer,
    ) -> ActionResult:
        head, base = parameters.get("head"), parameters.get("base") or grant.base_branch
        if grant.head_branch is None or grant.base_sha is None or grant.base_branch is None:
            return result("refused", reason="this Intent prepared no workspace to push from")
        if head != grant.head_branch:
            return result(
                "refused", reason=f"head must be {grant.head_branch}, the sprite's branch"
            )
        if base != grant.base_branch:
            return result(
                "refused", reason=f"base must be {grant.base_branch}, the workspace's branch"
            )
        title = parameters.get("title")
        if not isinstance(title, str) or not 0 < len(title) <= 256:
            return result("refused", reason="parameters.title must be 1 to 256 chars")
        if sprite is None:
            return result("refused", reason="the Run has no sprite")
        access = self._access
        target = BranchTarget(
            repo=grant.repo,
            base_branch=grant.base_branch,
            base_sha=grant.base_sha,
            head_branch=grant.head_branch,
            expected=await access.forge.branch_sha(grant.repo, grant.head_branch),
        )
        limits = DeliveryLimits(
            max_bytes=access.max_bundle_bytes,
            max_commits=access.max_commits,
            protected=access.protected_branches,
        )
        delivered = await deliver_branch(access.forge, self._backend, sprite, target, limits)
        if delivered.sha is None:
            message = f"branch {grant.head_branch} refused ({delivered.rule}): {delivered.reason}"
            self._recorder.violation(BRANCH_REFUSED, message)
            return result("refused", reason=message[:512])
        body = str(parameters.get("body") or "")
        if grant.issue is not None:
            body = f"{body}\n\nResolves #{grant.issue}".strip()
        pull = await access.forge.open_pull_request(
            grant.repo,
            title=title,
            body=self._recorder.redactor.text(body),
            head=grant.head_branch,
            base=grant.base_branch,
        )
        return result("fulfilled", url=pull.html_url or None, number=pull.number)


__all__ = ["ForgeActions"]
