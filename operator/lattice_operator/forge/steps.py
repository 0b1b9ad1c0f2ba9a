"""The forge steps an Intent takes outside its Run (I/O through the ports): prepare the
sprite's workspace and context, and take the work back (push, pull request, comments).
Each returns the `status.forge` fields to record; every write carries an idempotency key
made of the Intent's uid, so a step repeated after a crash finds what it did."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lattice_operator.api.v1alpha1.intent import DocsCheck
from lattice_operator.forge.delivery import BranchTarget, DeliveryLimits, deliver_branch
from lattice_operator.forge.docs import LAG_LABEL, lag_key, lag_report, lag_title
from lattice_operator.forge.workspace import write_context, write_workspace
from lattice_operator.ports.errors import InvalidRequest, NotFound
from lattice_operator.ports.forge import Forge
from lattice_operator.ports.sprites import SpriteBackend

PLAN_LIMIT = 60_000
TASK_LABEL = "lattice-task"
"""Issues created from an approved plan's drafts (it also finds them again on a retry)."""
CONTEXT_COMMENTS = 50


@dataclass(frozen=True)
class StepInput:
    """What a step needs to know about its Intent."""

    kind: str
    uid: str
    name: str
    repo: str
    number: int | None
    """The issue or pull request."""
    sprite: str | None
    base_branch: str | None
    head_branch: str | None
    base_sha: str | None
    summary: str
    plan: str | None
    review_id: int | None
    feedback: str | None
    tasks: tuple[tuple[str, str], ...] = ()
    """An approved plan's drafted issues: (title, body)."""
    research: bool = False
    """A research triage (loop 4): the agent is told so in its context."""
    notes: str | None = None
    """A research triage's notes, as the comment to post (forge/research.py)."""
    proposal: str | None = None
    """The plan a research triage proposed, as the comment to post after its notes."""
    docs: DocsCheck | None = None
    """A docs update's push (loop 6): told to the agent."""
    lag: str | None = None
    """The lag a docs agent reported and could not fix: an issue instead of a PR."""


async def prepare(
    forge: Forge, backend: SpriteBackend, step: StepInput, now: datetime
) -> dict[str, Any]:
    """Write the context (and, for the PR kinds, a clone) into the sprite."""
    if step.sprite is None:
        raise InvalidRequest("the Intent's Sprite is not known")
    context: dict[str, Any] = {"kind": step.kind, "repo": step.repo, "intent": step.name}
    fields: dict[str, Any] = {"preparedAt": now.isoformat().replace("+00:00", "Z")}
    if step.plan:
        context["plan"] = step.plan
    if step.research:
        context["research"] = True
    if step.docs is not None:
        context["docs"] = step.docs.to_wire()
    if step.kind in ("issue_triage", "issue_plan_approve", "pr_create_from_plan") and step.number:
        issue = await forge.get_issue(step.repo, step.number)
        comments = await forge.list_comments(step.repo, step.number)
        context["issue"] = {
            "number": issue.number,
            "title": issue.title,
            "body": issue.body,
            "labels": list(issue.labels),
            "author": issue.user.login if issue.user else None,
            "comments": [
                {"author": c.user.login if c.user else None, "body": c.body}
                for c in comments[-CONTEXT_COMMENTS:]
            ],
        }
    if step.kind == "pr_create_from_plan":
        base = step.base_branch or "main"
        workspace = await forge.prepare_workspace(step.repo, base)
        head = step.head_branch or f"lattice/{step.name}"
        await write_workspace(backend, step.sprite, workspace, head, context)
        fields.update(baseBranch=base, baseSha=workspace.base_sha, headBranch=head)
        return fields
    if step.kind == "pr_fixup_from_feedback":
        if step.number is None:
            raise InvalidRequest("a fixup names its pull request")
        pull = await forge.get_pull_request(step.repo, step.number)
        if pull.state != "open":
            raise InvalidRequest(f"pull request #{pull.number} is {pull.state}")
        workspace = await forge.prepare_workspace(step.repo, pull.head_ref)
        review_comments = await forge.list_review_comments(
            step.repo, pull.number, review_id=step.review_id
        )
        context["pull_request"] = {
            "number": pull.number,
            "title": pull.title,
            "body": pull.body,
            "head": pull.head_ref,
            "base": pull.base_ref,
        }
        context["feedback"] = step.feedback or ""
        context["review_comments"] = [
            {
                "path": c.path,
                "line": c.line,
                "body": c.body,
                "author": c.user.login if c.user else None,
            }
            for c in review_comments
        ]
        await write_workspace(backend, step.sprite, workspace, pull.head_ref, context)
        fields.update(
            baseBranch=pull.base_ref,
            baseSha=workspace.base_sha,
            headBranch=pull.head_ref,
            pullRequest={"number": pull.number, "url": pull.html_url},
            pushedSha=workspace.base_sha,
        )
        return fields
    await write_context(backend, step.sprite, context)
    return fields


async def finish(
    forge: Forge,
    backend: SpriteBackend,
    step: StepInput,
    limits: DeliveryLimits,
    *,
    pushed: str | None,
    followup: str | None,
) -> tuple[dict[str, Any], str | None]:
    """Take the work back. The `status.forge` fields, and a branch refusal if any (then
    nothing was pushed)."""
    fields: dict[str, Any] = {"finished": True, "problem": None, "retryAt": None}
    if step.kind == "issue_plan_approve" and step.tasks:
        assert step.number is not None
        created = []
        for index, (title, body) in enumerate(step.tasks):
            issue = await forge.create_issue(
                step.repo,
                title,
                f"{body}\n\nFrom the approved plan of #{step.number}.",
                labels=[TASK_LABEL],
                key=f"{step.uid}:task:{index}",
            )
            created.append(issue.number)
        listing = "\n".join(f"- #{n}" for n in created)
        await forge.create_comment(
            step.repo,
            step.number,
            f"Plan approved: Lattice created these issues:\n{listing}",
            key=f"{step.uid}:tasks",
        )
        fields["issues"] = created
        return fields, None
    if step.kind == "issue_plan_approve":
        assert step.number is not None
        await forge.create_comment(
            step.repo,
            step.number,
            f"Plan approved: Lattice started `{followup}` to implement it.",
            key=f"{step.uid}:approved",
        )
        fields["followup"] = followup
        return fields, None
    if step.kind == "issue_triage":
        # The plan Intent is made by the caller; a research triage's notes come first on
        # the issue, then the plan it proposed (each once, by its key).
        assert step.number is not None
        if step.notes:
            await forge.create_comment(step.repo, step.number, step.notes, key=f"{step.uid}:notes")
        if step.proposal:
            await forge.create_comment(
                step.repo, step.number, step.proposal, key=f"{step.uid}:proposal"
            )
        return fields, None
    if step.kind == "pr_create_from_plan" and step.docs is not None and step.lag is not None:
        fields["issues"] = [await _lag_issue(forge, step, step.docs, step.lag)]
        return fields, None  # reported, not fixed: nothing is pushed
    if step.sprite is None or step.base_sha is None or step.head_branch is None:
        raise InvalidRequest("no workspace was prepared for this Intent")
    base = step.base_branch or "main"
    target = BranchTarget(
        repo=step.repo,
        base_branch=base,
        base_sha=step.base_sha,
        head_branch=step.head_branch,
        expected=pushed if step.kind == "pr_fixup_from_feedback" else None,
    )
    if step.kind == "pr_create_from_plan":
        target = BranchTarget(
            **{**target.__dict__, "expected": await forge.branch_sha(step.repo, step.head_branch)}
        )
    delivered = await deliver_branch(forge, backend, step.sprite, target, limits)
    if delivered.sha is None:
        return {"problem": f"{delivered.rule}: {delivered.reason}"[:1024]}, (
            f"branch {step.head_branch} refused ({delivered.rule}): {delivered.reason}"
        )
    fields["pushedSha"] = delivered.sha
    if step.kind == "pr_create_from_plan":
        body = step.plan or ""
        if step.number is not None:
            body = f"{body}\n\nResolves #{step.number}"
        pull = await forge.open_pull_request(
            step.repo,
            title=step.summary[:256] or step.name,
            body=body[:PLAN_LIMIT],
            head=step.head_branch,
            base=base,
        )
        fields["pullRequest"] = {"number": pull.number, "url": pull.html_url}
        return fields, None
    if step.number is None:
        raise NotFound("the fixup's pull request is not known")
    review = f" for review {step.review_id}" if step.review_id else ""
    await forge.create_comment(
        step.repo,
        step.number,
        f"Lattice pushed {delivered.sha[:12]} to `{step.head_branch}`{review}.",
        key=f"{step.uid}:fixup:{delivered.sha}",
    )
    return fields, None


async def _lag_issue(forge: Forge, step: StepInput, docs: DocsCheck, report: str) -> int:
    """One open issue per set of docs that lag: opened once, then commented per push."""
    key = lag_key(list(docs.docs))
    text = lag_report(report, docs.sha, list(docs.changed))
    found = await forge.find_issue(step.repo, key, label=LAG_LABEL)
    if found is not None:
        await forge.create_comment(step.repo, found.number, text, key=f"{step.uid}:lag")
        return found.number
    made = await forge.create_issue(
        step.repo, lag_title(list(docs.docs)), text, labels=[LAG_LABEL], key=key
    )
    return made.number


async def read_plan(backend: SpriteBackend, sprite: str, path: str) -> str:
    """The plan the triage agent declared (its ARTIFACT's `ref`, a file in the sprite)."""
    if not path.startswith("/workspace/"):
        raise InvalidRequest(f"the plan must be a file under /workspace, not {path[:100]!r}")
    data = await backend.read_file(sprite, path)
    return data[:PLAN_LIMIT].decode("utf-8", "replace")


__all__ = ["StepInput", "finish", "prepare", "read_plan"]
