"""The seed's command-line workflow: prime, overview, ready, show, claim, close.

Each function takes a project (and the claimant and clock where it writes) and returns the
JSON document `--json` prints; the CLI renders the same document as text. Refusals are
ToolErrors with a code, as the MCP tools answer.
"""

from __future__ import annotations

from typing import Any

from lattice_operator.clock import Clock
from lattice_operator.mcp.claims import Claim, ClaimStore
from lattice_operator.mcp.documents import Document, Project, jsonable, timestamp
from lattice_operator.mcp.errors import ToolError
from lattice_operator.mcp.index import ProjectIndex
from lattice_operator.mcp.project_tools import close_fields, document_summary, require_task

# The spec's "Recommended AI Workflows", with this CLI's name for `lat`.
PRIME_SECTIONS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "Session start",
        (
            ("lattice prime", "Workflow reminders"),
            ("lattice overview", "Get critical document context"),
            ("lattice ready", "See available work"),
        ),
    ),
    (
        "Working on a task",
        (
            ("lattice show LXXXXX", "Full context with dependencies"),
            ("lattice claim LXXXXX", "Mark as in-progress locally"),
            ("lattice close LXXXXX", "Mark complete (auto-releases claim)"),
        ),
    ),
    (
        "Before committing",
        (
            ("lattice check", "Validate all documents"),
            ("lattice fmt", "Normalize links"),
        ),
    ),
    (
        "Context recovery after compaction",
        (
            ("lattice prime", "Workflow reminders"),
            ("lattice overview", "Most important documents"),
        ),
    ),
)
PRIME_NOTES = (
    "Create documents with the MCP tools lattice_create_task and lattice_create_document: "
    "structured input, no shell escaping.",
    "Write links as shorthand [text](LXXXXX); `lattice fmt` turns them into "
    "[text](relative/path.md#LXXXXX).",
    "Claims are local to this checkout (.lattice/claims/, never committed).",
)
OVERVIEW_LIMIT = 10


def prime() -> dict[str, Any]:
    return {
        "sections": [
            {"title": title, "commands": [{"command": c, "purpose": p} for c, p in commands]}
            for title, commands in PRIME_SECTIONS
        ],
        "notes": list(PRIME_NOTES),
    }


def _ref(index: ProjectIndex, lattice_id: str) -> dict[str, Any]:
    """Another document as a line of context: ID, name, description, state."""
    doc = index.by_id.get(lattice_id)
    if doc is None:
        return {"lattice_id": lattice_id, "missing": True}
    return {
        "lattice_id": lattice_id,
        "name": doc.front_matter.get("name"),
        "description": doc.front_matter.get("description"),
        "path": doc.path,
        "state": index.state(doc),
        "priority": doc.front_matter.get("priority") if doc.is_task else None,
    }


def _priority(doc: Document) -> int:
    value = doc.front_matter.get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 2


def _is_critical(doc: Document) -> bool:
    front = doc.front_matter
    labels = front.get("labels")
    return (
        front.get("critical") is True
        or (isinstance(labels, list) and "critical" in labels)
        or (doc.is_task and _priority(doc) == 0)
    )


def overview(project: Project, limit: int = OVERVIEW_LIMIT) -> dict[str, Any]:
    """The most important documents: critical ones, then root documents, then the rest;
    within each, most referenced first, then higher priority, then path. Closed tasks are
    left out."""
    index = ProjectIndex.build(project)
    candidates = [d for d in index.documents if not (d.is_task and d.is_closed)]

    def rank(doc: Document) -> tuple[int, int, int, str]:
        tier = 0 if _is_critical(doc) else 1 if doc.is_root else 2
        references = len(index.referenced_by.get(doc.lattice_id, ()))
        return (tier, -references, _priority(doc), doc.path)

    ranked = sorted(candidates, key=rank)[: max(limit, 0)]
    documents = []
    for doc in ranked:
        tier = rank(doc)[0]
        documents.append(
            {
                **document_summary(doc),
                "state": index.state(doc),
                "why": ("critical", "root", "referenced")[tier],
                "references": len(index.referenced_by.get(doc.lattice_id, ())),
            }
        )
    return {"documents": jsonable(documents), "count": len(documents), "total": len(candidates)}


def ready(project: Project, claimant: str) -> dict[str, Any]:
    """Open tasks whose blockers are all closed and that nobody else has claimed, highest
    priority first, then oldest, then path."""
    index = ProjectIndex.build(project)
    claims = ClaimStore(project.root).all()
    tasks, blocked, claimed = [], 0, 0
    for doc in index.documents:
        if not doc.is_task or doc.is_closed or index.by_id.get(doc.lattice_id) is not doc:
            continue
        if index.open_blockers(doc.lattice_id):
            blocked += 1
            continue
        claim = claims.get(doc.lattice_id)
        if claim is not None and claim.claimed_by != claimant:
            claimed += 1
            continue
        tasks.append(doc)
    tasks.sort(key=lambda d: (_priority(d), str(d.front_matter.get("created-at", "")), d.path))
    entries = []
    for doc in tasks:
        parent = index.parent(doc)
        claim = claims.get(doc.lattice_id)
        entries.append(
            {
                **document_summary(doc),
                "state": "open",
                "claimed_by": claim.claimed_by if claim else None,
                "parent": _ref(index, parent.lattice_id) if parent else None,
                "body": doc.body,
            }
        )
    return {
        "tasks": jsonable(entries),
        "count": len(entries),
        "blocked": blocked,
        "claimed_by_others": claimed,
    }


def _get(index: ProjectIndex, lattice_id: str) -> Document:
    doc = index.by_id.get(lattice_id)
    if doc is not None:
        return doc
    for err in index.broken:
        if err.lattice_id == lattice_id:
            raise err.as_tool_error()
    raise ToolError(
        "NOT_FOUND",
        f"No document has Lattice ID '{lattice_id}'",
        "Check the ID with `lattice ready` or `lattice overview`",
    )


def _task(index: ProjectIndex, lattice_id: str) -> Document:
    return require_task(_get(index, lattice_id), lattice_id)


def show(project: Project, lattice_id: str) -> dict[str, Any]:
    """Everything about one document: front matter, body, parent, what it depends on and
    what depends on it, what it links to and what links to it, and its claim."""
    index = ProjectIndex.build(project)
    doc = _get(index, lattice_id)
    parent = index.parent(doc)
    dependencies = index.blockers(lattice_id)
    dependents = index.dependents(lattice_id)
    known = {*dependencies, *dependents, parent.lattice_id if parent else "", lattice_id}
    claim = ClaimStore(project.root).get(lattice_id)
    shown: dict[str, Any] = jsonable(
        {
            **document_summary(doc),
            "state": index.state(doc),
            "front_matter": doc.front_matter,
            "body": doc.body,
            "parent": _ref(index, parent.lattice_id) if parent else None,
            "dependencies": [_ref(index, i) for i in dependencies],
            "dependents": [_ref(index, i) for i in dependents],
            "links": [_ref(index, i) for i in index.outgoing(doc) if i not in known],
            "linked_from": [
                _ref(index, i)
                for i in sorted(index.referenced_by.get(lattice_id, ()))
                if i not in known
            ],
            "claim": claim.as_json() if claim else None,
        }
    )
    return shown


def _held_by_other(claim: Claim | None, claimant: str) -> bool:
    return claim is not None and claim.claimed_by != claimant


def _claimed_error(claim: Claim, action: str) -> ToolError:
    since = f" since {claim.claimed_at}" if claim.claimed_at else ""
    return ToolError(
        "CLAIMED_BY_OTHER",
        f"Task '{claim.lattice_id}' is claimed by {claim.claimed_by}{since}",
        f"Pick another task with `lattice ready`, or pass --force to {action} it anyway",
    )


def claim(project: Project, lattice_id: str, claimant: str, clock: Clock) -> dict[str, Any]:
    """Claim an open task for `claimant`; claiming one's own claim again is a no-op."""
    index = ProjectIndex.build(project)
    doc = _task(index, lattice_id)
    if doc.is_closed:
        raise ToolError(
            "TASK_CLOSED",
            f"Task '{lattice_id}' is closed ({doc.front_matter.get('closed-at')})",
            "Pick an open task with `lattice ready`",
        )
    existing = ClaimStore(project.root).create(lattice_id, claimant, timestamp(clock.now()))
    if _held_by_other(existing, claimant):
        assert existing is not None
        raise _claimed_error(existing, "claim")
    held = existing or ClaimStore(project.root).get(lattice_id)
    assert held is not None
    return {
        **held.as_json(),
        "already_claimed": existing is not None,
        "open_blockers": index.open_blockers(lattice_id),
    }


def release(project: Project, lattice_id: str, claimant: str, force: bool) -> dict[str, Any]:
    """Give up a claim; someone else's only with `force`."""
    store = ClaimStore(project.root)
    held = store.get(lattice_id)
    if held is not None and _held_by_other(held, claimant) and not force:
        raise _claimed_error(held, "release")
    store.release(lattice_id)
    return {"lattice_id": lattice_id, "released": held.as_json() if held else None}


def close(
    project: Project,
    lattice_id: str,
    claimant: str,
    clock: Clock,
    reason: str | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Close a task (`closed-at` in its front matter) and release its claim. A task someone
    else has claimed is refused unless `force`."""
    index = ProjectIndex.build(project)
    doc = _task(index, lattice_id)
    store = ClaimStore(project.root)
    held = store.get(lattice_id)
    if _held_by_other(held, claimant) and not force:
        assert held is not None
        raise _claimed_error(held, "close")
    already = doc.is_closed
    if not already:
        project.add_fields(doc, close_fields(clock, reason))
    store.release(lattice_id)
    closed = ProjectIndex.build(project)
    unblocked = [
        i
        for i in closed.dependents(lattice_id)
        if i in closed.by_id
        and not closed.by_id[i].is_closed
        and not closed.open_blockers(i)
        and index.open_blockers(i)
    ]
    closed_doc = closed.by_id.get(lattice_id, doc)
    result: dict[str, Any] = jsonable(
        {
            "lattice_id": lattice_id,
            "path": doc.path,
            "closed_at": closed_doc.front_matter.get("closed-at"),
            "already_closed": already,
            "released_claim": held.as_json() if held else None,
            "unblocked": unblocked,
        }
    )
    return result


__all__ = ["claim", "close", "overview", "prime", "ready", "release", "show"]
