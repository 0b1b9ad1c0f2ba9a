"""`lattice prime|overview|ready|show|claim|close|check|fmt` and `lattice skills sync`: the
seed's workflow over a project's documents (docs/mcp.md), as text or `--json`.

Exit codes: 0 done; 1 refused (a coded error), problems found by `check`, or changes
needed under `fmt --check`/`skills sync --check`; 2 bad usage.
"""

from __future__ import annotations

import getpass
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lattice_operator.cli._format import safe

if TYPE_CHECKING:
    from lattice_operator.mcp.documents import Project

Root = Annotated[
    Path | None,
    typer.Option(
        "--root",
        help="Project root (default: the git root above the current directory, else it).",
    ),
]
Json = Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")]
Claimant = Annotated[
    str | None,
    typer.Option(
        "--as",
        envvar="LATTICE_CLAIMANT",
        help="Who claims (default: $LATTICE_CLAIMANT, else user@host).",
    ),
]
Force = Annotated[bool, typer.Option("--force", help="Even if someone else claimed it.")]
LatticeId = Annotated[str, typer.Argument(help="Lattice ID, e.g. LCGWQN.")]


def _project(root: Path | None) -> Project:
    from lattice_operator.mcp.documents import Project
    from lattice_operator.mcp.setup_claude import find_project_root

    where = root if root is not None else find_project_root(Path.cwd())
    if not where.is_dir():
        typer.echo(f"lattice: project root {where} is not a directory", err=True)
        raise typer.Exit(2)
    return Project(where)


def _claimant(given: str | None) -> str:
    if given is not None and given.strip():
        return given.strip()
    return f"{getpass.getuser()}@{socket.gethostname()}"


def _text(value: object) -> str:
    """Document text for a terminal: control characters escaped, line breaks kept."""
    return "\n".join(safe(line) for line in str(value).split("\n"))


def _run(as_json: bool, action: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The action's result, or its coded error printed (JSON on stdout with --json) and exit 1."""
    from lattice_operator.mcp.errors import ToolError

    try:
        return action()
    except ToolError as err:
        if as_json:
            typer.echo(json.dumps(err.as_payload()))
        else:
            typer.echo(f"lattice: [{err.code}] {safe(err.message)}. {err.suggestion}", err=True)
        raise typer.Exit(1) from None


def _emit(as_json: bool, result: dict[str, Any], text: Callable[[dict[str, Any]], str]) -> None:
    typer.echo(json.dumps(result, ensure_ascii=False) if as_json else text(result))


def _line(entry: dict[str, Any]) -> str:
    """`ID: name - description [P1]` (the seed's reference format)."""
    if entry.get("missing"):
        return f"{entry['lattice_id']}: (no such document)"
    state = entry.get("state")
    if state == "doc" or entry.get("kind") == "document":
        tag = "doc"
    else:
        tag = f"P{entry.get('priority')}" + ("" if state in ("open", None) else f"/{state}")
    return safe(f"{entry['lattice_id']}: {entry.get('name')} - {entry.get('description')} [{tag}]")


# -- commands ----------------------------------------------------------------------------------


def prime(as_json: Json = False) -> None:
    """Workflow reminders for a session's start, a task, a commit and after compaction."""
    from lattice_operator.mcp import workflow

    def text(result: dict[str, Any]) -> str:
        lines = ["# Lattice workflow", ""]
        for section in result["sections"]:
            lines.append(f"## {section['title']}")
            width = max(len(c["command"]) for c in section["commands"])
            lines += [f"  {c['command']:<{width}}  # {c['purpose']}" for c in section["commands"]]
            lines.append("")
        lines += [f"- {note}" for note in result["notes"]]
        return "\n".join(lines)

    _emit(as_json, workflow.prime(), text)


def overview(
    root: Root = None,
    limit: Annotated[int, typer.Option(min=1, help="Documents shown at most.")] = 10,
    as_json: Json = False,
) -> None:
    """The most important documents: critical, then roots, then the most referenced."""
    from lattice_operator.mcp import workflow

    project = _project(root)

    def text(result: dict[str, Any]) -> str:
        if not result["documents"]:
            return "No documents."
        head = f"Most important documents ({result['count']} of {result['total']}):"
        rows = [f"  {_line(d)} ({d['why']}, {d['references']} refs)" for d in result["documents"]]
        return "\n".join([head, *rows])

    _emit(as_json, _run(as_json, lambda: workflow.overview(project, limit)), text)


def ready(root: Root = None, claimant: Claimant = None, as_json: Json = False) -> None:
    """Open tasks whose blockers are all closed and that nobody else has claimed."""
    from lattice_operator.mcp import workflow

    project = _project(root)
    me = _claimant(claimant)

    def text(result: dict[str, Any]) -> str:
        lines = [f"Ready work ({result['count']} tasks with no open blockers):"]
        for n, task in enumerate(result["tasks"], 1):
            mine = " (claimed by you)" if task["claimed_by"] else ""
            lines.append(
                safe(
                    f"{n}. [P{task['priority']}] [{task['task_type']}] {task['lattice_id']}: "
                    f"{task['description']}{mine}"
                )
            )
        lines.append(f"({result['blocked']} blocked, {result['claimed_by_others']} claimed)")
        return "\n".join(lines)

    _emit(as_json, _run(as_json, lambda: workflow.ready(project, me)), text)


def show(lattice_id: LatticeId, root: Root = None, as_json: Json = False) -> None:
    """A document in full: front matter, body, parent, dependencies both ways, links."""
    from lattice_operator.mcp import workflow

    project = _project(root)

    def text(result: dict[str, Any]) -> str:
        lines = [safe(f"{result['lattice_id']}: {result['name']} - {result['description']}")]
        if result["kind"] == "task":
            lines += [
                f"State: {result['state']}",
                safe(f"Priority: P{result['priority']}"),
                safe(f"Type: {result['task_type']}"),
            ]
        lines.append(safe(f"Path: {result['path']}"))
        if result["claim"]:
            lines.append(safe(f"Claimed by: {result['claim']['claimed_by']}"))
        lines += ["", "Front matter:"]
        lines += [safe(f"  {k}: {json.dumps(v)}") for k, v in result["front_matter"].items()]
        lines += ["", "Body:", _text(result["body"]).rstrip("\n")]
        if result["parent"]:
            lines += ["", "Parent:", f"  {_line(result['parent'])}"]
        for title, key in (
            ("Depends on", "dependencies"),
            ("Blocks", "dependents"),
            ("Links to", "links"),
            ("Linked from", "linked_from"),
        ):
            if result[key]:
                lines += ["", f"{title} ({len(result[key])}):"]
                lines += [f"  {_line(entry)}" for entry in result[key]]
        return "\n".join(lines)

    _emit(as_json, _run(as_json, lambda: workflow.show(project, lattice_id)), text)


def claim(
    lattice_id: LatticeId,
    root: Root = None,
    claimant: Claimant = None,
    release: Annotated[bool, typer.Option("--release", help="Give up the claim.")] = False,
    force: Force = False,
    as_json: Json = False,
) -> None:
    """Mark a task as in progress here (local state under .lattice/, never committed)."""
    from lattice_operator.clock import SystemClock
    from lattice_operator.mcp import workflow

    project = _project(root)
    me = _claimant(claimant)
    if release:
        result = _run(as_json, lambda: workflow.release(project, lattice_id, me, force))
        held = result["released"]
        message = (
            f"Released {lattice_id} (claimed by {held['claimed_by']})"
            if held
            else f"{lattice_id} was not claimed"
        )
        _emit(as_json, result, lambda _: safe(message))
        return

    def text(result: dict[str, Any]) -> str:
        verb = "Already claimed" if result["already_claimed"] else "Claimed"
        line = f"{verb} {result['lattice_id']} as {result['claimed_by']}"
        if result["open_blockers"]:
            line += f" (still blocked by {', '.join(result['open_blockers'])})"
        return safe(line)

    _emit(
        as_json, _run(as_json, lambda: workflow.claim(project, lattice_id, me, SystemClock())), text
    )


def close(
    lattice_id: LatticeId,
    root: Root = None,
    claimant: Claimant = None,
    reason: Annotated[str | None, typer.Option(help="Recorded as closed-reason.")] = None,
    force: Force = False,
    as_json: Json = False,
) -> None:
    """Mark a task complete (closed-at in its front matter) and release its claim."""
    from lattice_operator.clock import SystemClock
    from lattice_operator.mcp import workflow

    project = _project(root)
    me = _claimant(claimant)

    def text(result: dict[str, Any]) -> str:
        verb = "was already closed" if result["already_closed"] else "closed"
        lines = [f"{result['lattice_id']} {verb} ({result['path']})"]
        if result["released_claim"]:
            lines.append(f"released the claim of {result['released_claim']['claimed_by']}")
        if result["unblocked"]:
            lines.append(f"now ready: {', '.join(result['unblocked'])}")
        return _text("\n".join(lines))

    _emit(
        as_json,
        _run(
            as_json,
            lambda: workflow.close(project, lattice_id, me, SystemClock(), reason, force),
        ),
        text,
    )


def check(root: Root = None, as_json: Json = False) -> None:
    """Validate every document; exit 1 when there is any problem."""
    from lattice_operator.mcp.check import check as run_check

    project = _project(root)
    problems = run_check(project)
    result = {
        "ok": not problems,
        "count": len(problems),
        "problems": [p.as_json() for p in problems],
    }

    def text(_: dict[str, Any]) -> str:
        if not problems:
            return "✓ no problems"
        lines = [safe(p.as_text()) for p in problems]
        return "\n".join([*lines, f"✗ {len(problems)} problem(s)"])

    _emit(as_json, result, text)
    if problems:
        raise typer.Exit(1)


def _format_text(result: dict[str, Any], check_only: bool) -> str:
    verb = "would change" if check_only else "changed"
    lines = [safe(f"{verb} {c['path']} ({c['links']} links)") for c in result["changed"]]
    skills = result["skills"]
    for key, label in (("created", "link"), ("updated", "repoint"), ("removed", "unlink")):
        lines += [
            safe(f"{'would ' if check_only else ''}{label} .claude/skills/{name}")
            for name in skills[key]
        ]
    lines += [
        safe(f"skipped skill: {p['path']}: [{p['code']}] {p['message']}") for p in skills["invalid"]
    ]
    if result["clean"]:
        lines.append("✓ links and skills are in normal form")
    return "\n".join(lines)


def fmt(
    root: Root = None,
    check_only: Annotated[
        bool, typer.Option("--check", help="Change nothing; exit 1 if anything would change.")
    ] = False,
    as_json: Json = False,
) -> None:
    """Rewrite links to documents into normal form and sync the skill links."""
    from lattice_operator.mcp.check import fmt as run_fmt

    project = _project(root)
    result = run_fmt(project, write=not check_only).as_json()
    _emit(as_json, result, lambda r: _format_text(r, check_only))
    if check_only and not result["clean"]:
        raise typer.Exit(1)


skills_app = typer.Typer(help="Skill documents as Claude skills.", no_args_is_help=True)


@skills_app.command("sync")
def skills_sync(
    root: Root = None,
    check_only: Annotated[
        bool, typer.Option("--check", help="Change nothing; exit 1 if out of sync.")
    ] = False,
    as_json: Json = False,
) -> None:
    """Make .claude/skills/<name>.md links to every valid `skill: true` document, only those;
    exit 1 when a skill document breaks the rules (it gets no link)."""
    from lattice_operator.mcp import skills
    from lattice_operator.mcp.index import ProjectIndex

    project = _project(root)
    plan = skills.plan(project.root, ProjectIndex.build(project))
    if not check_only:
        skills.apply(project.root, plan)
    result = {**plan.as_json(), "in_sync": plan.in_sync}
    text_result = {"changed": [], "skills": result, "clean": plan.in_sync}
    _emit(as_json, result, lambda _: _format_text(text_result, check_only))
    if plan.problems or (check_only and not plan.in_sync):
        raise typer.Exit(1)


__all__ = ["check", "claim", "close", "fmt", "overview", "prime", "ready", "show", "skills_app"]
