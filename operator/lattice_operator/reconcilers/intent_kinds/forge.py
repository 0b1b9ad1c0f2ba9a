"""The GitHub kinds (issue_triage, issue_plan_approve, pr_create_from_plan,
pr_fixup_from_feedback): each pass follows `decide_forge` (reconcilers/intent_forge.py):
wait, hand a forge step to the handler, run the agent, or end."""

from __future__ import annotations

from typing import Literal

from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.api.v1alpha1.intent import ForgePullRequestRef, ForgeStatus, IntentResult
from lattice_operator.forge.context import agent_of, forge_grant, forge_params
from lattice_operator.ports.cluster import ForgeGrant
from lattice_operator.reconcilers.intent_forge import decide_forge, opened_pr
from lattice_operator.reconcilers.intent_kinds.run import run_result, through_run
from lattice_operator.reconcilers.intent_limits import (
    ARTIFACT_CHARS,
    ARTIFACTS_KEPT,
    SUMMARY_CHARS,
    URL_CHARS,
)
from lattice_operator.reconcilers.intent_pass import IntentPass
from lattice_operator.reconcilers.intent_reasons import IntentReason


class Forge:
    """The GitHub kinds: the forge steps and the agent's Run."""

    def sprite(self, intent: Intent) -> str | None:
        agent = agent_of(intent)
        return agent.sprite_ref.name if agent is not None else None

    def grant(self, intent: Intent) -> ForgeGrant | None:
        return forge_grant(intent)

    def plan(self, step: IntentPass) -> None:
        intent = step.intent
        params = forge_params(intent)
        if params is None:
            step.missing_params()
            return
        forge = step.status.forge or ForgeStatus(repo=params.repo)
        step.status.forge = forge
        run = step.world.run
        pull = opened_pr(run)
        if pull is not None and forge.pull_request is None:
            forge.pull_request = ForgePullRequestRef(number=pull[0], url=pull[1][:URL_CHARS])
        decision = decide_forge(
            intent, run, step.world.sprite, forge_ready=step.world.forge_ready, now=step.world.now
        )
        if decision.action == "wait":
            step.set("Succeeded", "Unknown", decision.reason, decision.message)
        elif decision.action == "work":
            assert decision.work is not None
            step.plan.create.extend(decision.create)
            step.plan.forge = decision.work
            forge.attempts = decision.work.attempt
            step.set("Succeeded", "Unknown", IntentReason.EXECUTING, decision.message)
        elif decision.action == "run":
            assert decision.template is not None
            through_run(step, decision.template)
        else:
            artifacts = list(step.status.result.artifacts) if step.status.result else []
            if run is not None:
                artifacts = run_result("success", run, "").artifacts
            if forge.pull_request is not None:
                line = f"pr_url: {forge.pull_request.url}"[:ARTIFACT_CHARS]
                artifacts = [*artifacts, line][:ARTIFACTS_KEPT]
            outcome: Literal["success", "failure"] = "success" if decision.success else "failure"
            step.status.result = IntentResult(
                status=outcome, summary=decision.message[:SUMMARY_CHARS], artifacts=artifacts
            )
            reason = IntentReason.COMPLETED if decision.success else decision.reason
            step.set("Succeeded", "True" if decision.success else "False", reason, decision.message)


__all__ = ["Forge"]
