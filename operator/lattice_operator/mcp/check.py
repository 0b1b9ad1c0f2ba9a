"""`lattice check` (every problem in every document) and `lattice fmt` (links in normal form).

Check reads and never writes; fmt writes only bodies whose links change (the front matter
is kept byte for byte) and the skill links.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from lattice_operator.mcp import skills
from lattice_operator.mcp.claims import ClaimStore
from lattice_operator.mcp.documents import (
    ANY_ID_PATTERN,
    MAX_DESCRIPTION,
    MAX_NAME,
    TASK_TYPES,
    Document,
    Project,
    parse,
    with_body,
)
from lattice_operator.mcp.index import ProjectIndex
from lattice_operator.mcp.links import (
    body_links,
    front_matter_ids,
    is_external,
    normalised,
    target_id,
    target_path,
)
from lattice_operator.mcp.problems import Problem

# Document folders whose directory must have a root document (where the tools write).
_DOCUMENT_FOLDERS = ("tasks", "docs")


def _front_matter_problems(doc: Document) -> Iterator[Problem]:
    front = doc.front_matter

    def problem(code: str, name: str, message: str) -> Problem:
        return Problem(code, doc.path, message, doc.lattice_id, name)

    raw_id = front.get("lattice-id")
    if not isinstance(raw_id, str) or not ANY_ID_PATTERN.match(raw_id):
        yield problem("INVALID_ID", "lattice-id", f"{raw_id!r} is not a Lattice ID (L + letters)")
    for required in ("name", "description"):
        value = front.get(required)
        if not isinstance(value, str) or not value.strip():
            yield problem("MISSING_FIELD", required, f"'{required}' is missing or empty")
    name = front.get("name")
    if isinstance(name, str) and len(name) > MAX_NAME:
        yield problem(
            "NAME_TOO_LONG", "name", f"name has {len(name)} characters; the maximum is {MAX_NAME}"
        )
    description = front.get("description")
    if isinstance(description, str) and len(description) > MAX_DESCRIPTION:
        yield problem(
            "DESCRIPTION_TOO_LONG",
            "description",
            f"description has {len(description)} characters; the maximum is {MAX_DESCRIPTION}",
        )
    for key in ("labels", "blocked-by", "blocking", "discovered-from"):
        value = front.get(key)
        if value is not None and (
            not isinstance(value, list) or not all(isinstance(v, str) for v in value)
        ):
            yield problem("INVALID_FIELD", key, f"'{key}' is not a list of strings")
    if "skill" in front and not isinstance(front["skill"], bool):
        yield problem("INVALID_FIELD", "skill", "'skill' is not true or false")
    if doc.is_task:
        if front.get("task-type") not in TASK_TYPES:
            yield problem(
                "INVALID_TASK_TYPE",
                "task-type",
                f"task type {front.get('task-type')!r} is not one of: {', '.join(TASK_TYPES)}",
            )
        priority = front.get("priority")
        if priority is not None and (
            isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 4
        ):
            yield problem("INVALID_PRIORITY", "priority", f"priority {priority!r} is not 0-4")


def _root_problem(project: Project, index: ProjectIndex, doc: Document) -> Problem | None:
    """MISSING_ROOT for a document in `D/tasks/` or `D/docs/` when `D` has no root document."""
    path = PurePosixPath(doc.path)
    if path.parent.name not in _DOCUMENT_FOLDERS:
        return None
    directory = path.parent.parent
    name = directory.name or project.root.name
    root_path = (directory / f"{name}.md").as_posix()
    if root_path in index.by_path:
        return None
    return Problem(
        "MISSING_ROOT",
        doc.path,
        f"directory '{directory.as_posix() if directory.name else '.'}' has no root document "
        f"'{root_path}' with a lattice-id",
        doc.lattice_id,
        "parent-id",
    )


def _link_problems(project: Project, index: ProjectIndex, doc: Document) -> Iterator[Problem]:
    for key, lattice_id in front_matter_ids(doc.front_matter):
        if lattice_id not in index.by_id:
            yield Problem(
                "BROKEN_LINK",
                doc.path,
                f"'{key}' refers to {lattice_id}, which no document has",
                doc.lattice_id,
                key,
            )
    broken = []
    for link in body_links(doc.body):
        if is_external(link.target):
            continue
        linked = target_id(link.target)
        if linked is not None:
            if linked not in index.by_id:
                broken.append((link.line, f"link to {linked}, which no document has"))
            continue
        if not os.path.lexists(project.root / target_path(doc.path, link.target)):
            broken.append((link.line, f"link to '{link.target}', which does not exist"))
    if broken:
        offset = _body_offset(project, doc)
        for line, message in broken:
            yield Problem("BROKEN_LINK", doc.path, message, doc.lattice_id, None, line + offset)


def _body_offset(project: Project, doc: Document) -> int:
    """Lines before the body in the file, so a body line becomes a file line."""
    text = project.read(doc.path)
    return text[: len(text) - len(doc.body)].count("\n")


def _cycles(index: ProjectIndex) -> list[list[str]]:
    """Every set of tasks that (transitively) block each other: Tarjan's strongly connected
    components, iterative (a long chain must not exhaust the stack), in a stable order."""
    graph = {d.lattice_id: index.blockers(d.lattice_id) for d in index.documents}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in order:
            continue
        work = [(start, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                order[node] = low[node] = len(order)
                stack.append(node)
                on_stack.add(node)
            edges = graph.get(node, [])
            if child < len(edges):
                work.append((node, child + 1))
                nxt = edges[child]
                if nxt not in order:
                    if nxt in graph:
                        work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], order[nxt])
                continue
            if low[node] == order[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, []):
                    found.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return sorted(found)


def check(project: Project) -> list[Problem]:
    """Every problem in the project, in path order (cycles and claims last)."""
    index = ProjectIndex.build(project)
    problems = [
        Problem("INVALID_DOCUMENT", err.path, str(err), err.lattice_id or None, err.field or None)
        for err in index.broken
    ]
    for lattice_id, paths in index.duplicates.items():
        for path in paths[1:]:
            problems.append(
                Problem(
                    "DUPLICATE_ID",
                    path,
                    f"Lattice ID {lattice_id} is also the ID of {paths[0]}",
                    lattice_id,
                    "lattice-id",
                )
            )
    for doc in index.documents:
        problems += _front_matter_problems(doc)
        root = _root_problem(project, index, doc)
        if root is not None:
            problems.append(root)
        problems += _link_problems(project, index, doc)
    skill_plan = skills.plan(project.root, index)
    problems += skill_plan.problems
    for link in [*skill_plan.create, *skill_plan.update, *skill_plan.remove]:
        problems.append(
            Problem(
                "SKILL_OUT_OF_SYNC",
                f"{skills.SKILLS_DIR}/{link}",
                "skill link is missing, stale or left over; run `lattice skills sync`",
            )
        )
    problems.sort(key=lambda p: (p.path, p.line or 0))
    for cycle in _cycles(index):
        first = index.by_id[cycle[0]]
        problems.append(
            Problem(
                "DEPENDENCY_CYCLE",
                first.path,
                "tasks block each other in a cycle: " + " -> ".join([*cycle, cycle[0]]),
                cycle[0],
                "blocked-by",
            )
        )
    for claim in ClaimStore(project.root).all().values():
        if not claim.readable:
            problems.append(
                Problem(
                    "INVALID_CLAIM",
                    claim.path,
                    "claim file cannot be read; release it with `lattice claim --release`",
                    claim.lattice_id,
                )
            )
    return problems


@dataclass
class FormatResult:
    """What `lattice fmt` changed (or, with --check, would change)."""

    changed: dict[str, int] = field(default_factory=dict)
    skills: skills.SkillPlan = field(default_factory=skills.SkillPlan)

    @property
    def clean(self) -> bool:
        return not self.changed and self.skills.in_sync

    def as_json(self) -> dict[str, Any]:
        return {
            "changed": [{"path": p, "links": n} for p, n in sorted(self.changed.items())],
            "skills": self.skills.as_json(),
            "clean": self.clean,
        }


def fmt(project: Project, write: bool) -> FormatResult:
    """Links to documents in normal form and skill links in sync; `write=False` only tells."""
    index = ProjectIndex.build(project)
    paths = {i: d.path for i, d in index.by_id.items()}
    result = FormatResult()
    for doc in index.documents:
        text = project.read(doc.path)
        current = parse(doc.path, text)  # the file as it is now, not as scanned
        if current is None:
            continue
        body = normalised(doc.path, current.body, paths, index.by_path)
        if body == current.body:
            continue
        before = [link.target for link in body_links(current.body)]
        after = [link.target for link in body_links(body)]
        result.changed[doc.path] = sum(a != b for a, b in zip(before, after, strict=True))
        if write:
            project.write(doc.path, with_body(text, body))
    result.skills = skills.plan(project.root, index)
    if write:
        skills.apply(project.root, result.skills)
    return result


__all__ = ["FormatResult", "check", "fmt"]
