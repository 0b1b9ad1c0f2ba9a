"""The project tools of `lattice mcp`: their input models (the seed's tables) and handlers.

Handlers are plain functions of (project context, validated input) returning a JSON-able
dict or raising ToolError; the server module only wires them to the SDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import Field

from lattice_operator.clock import Clock
from lattice_operator.mcp.documents import (
    MAX_DESCRIPTION,
    MAX_NAME,
    TASK_TYPES,
    Document,
    Project,
    filename_stem,
    jsonable,
    name_from_filename,
    render,
    timestamp,
)
from lattice_operator.mcp.errors import ToolError
from lattice_operator.mcp.tool_input import CodeFor, Tool, ToolInput, tool

TaskType = Literal["bug", "feature", "task", "chore"]
assert get_args(TaskType) == TASK_TYPES


@dataclass(frozen=True)
class ProjectContext:
    """What every project tool works on."""

    project: Project
    clock: Clock


def _invalid(name: str, expected: str) -> ToolError:
    return ToolError(
        "INVALID_ARGUMENT",
        f"Parameter '{name}' must be {expected}",
        "Check the tool's input schema with tools/list",
    )


def _bad_priority(value: object) -> ToolError:
    return ToolError(
        "INVALID_PRIORITY",
        f"Priority {value!r} is not in range 0-4",
        "Use 0 (highest) to 4 (lowest); the default is 2",
    )


def _bad_task_type(value: object) -> ToolError:
    return ToolError(
        "INVALID_TASK_TYPE",
        f"Task type {value!r} is not one of: {', '.join(TASK_TYPES)}",
        "Use bug, feature, task or chore",
    )


def _too_long(field: str, limit: int, code: str, suggestion: str) -> CodeFor:
    def error(value: object) -> ToolError | None:
        if not isinstance(value, str) or len(value) <= limit:
            return None  # not a length problem: the generic error says what it is
        return ToolError(
            code,
            f"{field} has {len(value)} characters; the maximum is {limit}",
            suggestion,
        )

    return error


_DESCRIPTION_TOO_LONG = _too_long(
    "Description",
    MAX_DESCRIPTION,
    "DESCRIPTION_TOO_LONG",
    "Shorten the description and put the detail in the body",
)
_NAME_TOO_LONG = _too_long("Name", MAX_NAME, "NAME_TOO_LONG", "Choose a shorter name")
_DIRECTORY = Field(description='Parent directory path (e.g., "api/")')
_BODY = Field(description="Markdown body content")
_LABELS = Field(default=None, description="List of labels")


class CreateTaskInput(ToolInput):
    codes = {
        "description": _DESCRIPTION_TOO_LONG,
        "task_type": _bad_task_type,
        "priority": _bad_priority,
    }

    directory: str = _DIRECTORY
    description: str = Field(max_length=MAX_DESCRIPTION, description="Human-readable task title")
    task_type: TaskType = Field(description="One of: bug, feature, task, chore")
    body: str = _BODY
    priority: int = Field(default=2, ge=0, le=4, description="0-4 (default: 2)")
    labels: list[str] | None = _LABELS
    blocked_by: list[str] | None = Field(default=None, description="List of blocking task IDs")
    discovered_from: list[str] | None = Field(
        default=None, description="List of parent task IDs for provenance"
    )


class CreateDocumentInput(ToolInput):
    codes = {"name": _NAME_TOO_LONG, "description": _DESCRIPTION_TOO_LONG}

    directory: str = _DIRECTORY
    name: str = Field(
        max_length=MAX_NAME, description="Document name (becomes filename, max 64 chars)"
    )
    description: str = Field(
        max_length=MAX_DESCRIPTION, description="Human-readable description (max 1024 chars)"
    )
    body: str = _BODY
    labels: list[str] | None = _LABELS


class ShowInput(ToolInput):
    lattice_id: str = Field(description="Lattice ID, e.g. LCGWQN")


class ListInput(ToolInput):
    codes = {"task_type": _bad_task_type}

    directory: str | None = Field(default=None, description="Only documents below this directory")
    kind: Literal["task", "document"] | None = None
    status: Literal["open", "closed"] | None = Field(default=None, description="Tasks only")
    task_type: TaskType | None = None
    label: str | None = Field(default=None, description="Only documents with this label")


class CloseInput(ToolInput):
    lattice_ids: list[str] = Field(min_length=1, description="Task IDs to close")
    reason: str | None = Field(default=None, description="Why, recorded as closed-reason")


class UpdateInput(ToolInput):
    codes = {"task_type": _bad_task_type, "priority": _bad_priority}

    lattice_id: str = Field(description="The task's Lattice ID")
    priority: int | None = Field(default=None, ge=0, le=4)
    task_type: TaskType | None = None
    labels: list[str] | None = Field(default=None, description="Replace the labels")
    add_labels: list[str] | None = Field(default=None, description="Labels to add")
    remove_labels: list[str] | None = Field(default=None, description="Labels to remove")


class DependencyInput(ToolInput):
    lattice_id: str = Field(description="The task that is blocked")
    blocked_by: str = Field(description="The task that blocks it")


def _description(value: str) -> str:
    if not value.strip():
        raise _invalid("description", "a non-empty string")
    return value


def _created(project: Project, directory_arg: str, clock: Clock) -> tuple[Any, dict[str, Any], str]:
    directory = project.directory(directory_arg)
    parent = project.root_document(directory, shown=directory_arg)
    front: dict[str, Any] = {
        "lattice-id": "",
        "name": "",
        "description": "",
        "parent-id": parent.lattice_id,
        "created-at": timestamp(clock.now()),
    }
    return directory, front, parent.lattice_id


# -- the seed's two creation tools -----------------------------------------------------------


def create_task(c: ProjectContext, args: CreateTaskInput) -> dict[str, Any]:
    project, description = c.project, _description(args.description)
    directory, front, _ = _created(project, args.directory, c.clock)
    lattice_id = project.fresh_id()
    filename = f"{filename_stem(description)}_{lattice_id}.md"
    name = name_from_filename(filename)
    front.update({"lattice-id": lattice_id, "name": name, "description": description})
    front = {
        **front,
        "task-type": args.task_type,
        "priority": args.priority,
        "labels": args.labels or [],
        "blocked-by": args.blocked_by or [],
        "discovered-from": args.discovered_from or [],
    }
    path = project.write_new(directory / "tasks", filename, render(front, args.body))
    return {"lattice_id": lattice_id, "path": path, "name": name}


def create_document(c: ProjectContext, args: CreateDocumentInput) -> dict[str, Any]:
    project, name_arg = c.project, args.name
    stem = name_arg.removesuffix(".md")
    if not stem or not all(c.isalnum() or c in "_-" for c in stem) or not stem.isascii():
        raise ToolError(
            "INVALID_NAME",
            f"Name '{name_arg}' is not a plain file name",
            "Use letters, digits, '_' and '-' only, e.g. 'authentication_design'",
        )
    description = _description(args.description)
    directory, front, _ = _created(project, args.directory, c.clock)
    lattice_id = project.fresh_id()
    filename = f"{stem}.md"
    name = name_from_filename(filename)
    front.update(
        {
            "lattice-id": lattice_id,
            "name": name,
            "description": description,
            "labels": args.labels or [],
        }
    )
    path = project.write_new(directory / "docs", filename, render(front, args.body))
    return {"lattice_id": lattice_id, "path": path, "name": name}


# -- the seed's planned tools ----------------------------------------------------------------


def document_summary(doc: Document) -> dict[str, Any]:
    front = doc.front_matter
    summary: dict[str, Any] = {
        "lattice_id": doc.lattice_id,
        "path": doc.path,
        "name": front.get("name"),
        "description": front.get("description"),
        "kind": "task" if doc.is_task else "document",
        "labels": front.get("labels") or [],
    }
    if doc.is_task:
        summary.update(
            {
                "task_type": front.get("task-type"),
                "priority": front.get("priority"),
                "status": "closed" if doc.is_closed else "open",
            }
        )
    return summary


def show(c: ProjectContext, args: ShowInput) -> dict[str, Any]:
    doc = c.project.find(args.lattice_id)
    return {**document_summary(doc), "front_matter": jsonable(doc.front_matter), "body": doc.body}


def list_documents(c: ProjectContext, args: ListInput) -> dict[str, Any]:
    project, prefix = c.project, ""
    if args.directory is not None:
        directory = project.directory(args.directory)
        prefix = "" if directory == project.root else project.relative(directory) + "/"
    kind, status, task_type, label = args.kind, args.status, args.task_type, args.label
    documents, broken = project.scan()
    found = []
    for doc in documents:
        summary = document_summary(doc)
        if not doc.path.startswith(prefix):
            continue
        if kind is not None and summary["kind"] != kind:
            continue
        if status is not None and summary.get("status") != status:
            continue
        if task_type is not None and summary.get("task_type") != task_type:
            continue
        if label is not None and label not in summary["labels"]:
            continue
        found.append(summary)
    # Skipped, not fatal: the agent sees which file and field to fix, and the rest.
    invalid = [err.as_entry() for err in broken if err.path.startswith(prefix)]
    return {"documents": found, "count": len(found), "invalid": invalid}


def task_document(project: Project, lattice_id: str) -> Document:
    """The task with this ID; NOT_FOUND, or NOT_A_TASK for a knowledge-base document."""
    return require_task(project.find(lattice_id), lattice_id)


def require_task(doc: Document, lattice_id: str) -> Document:
    """`doc`, if it is a task; NOT_A_TASK for a knowledge-base document."""
    if not doc.is_task:
        raise ToolError(
            "NOT_A_TASK",
            f"'{lattice_id}' ({doc.path}) is a knowledge-base document, not a task",
            "Pass the ID of a task",
        )
    return doc


def close_fields(clock: Clock, reason: str | None) -> dict[str, Any]:
    """The front-matter fields closing a task adds (`lattice close` writes the same)."""
    fields: dict[str, Any] = {"closed-at": timestamp(clock.now())}
    if reason:
        fields["closed-reason"] = reason
    return fields


def close_task(c: ProjectContext, args: CloseInput) -> dict[str, Any]:
    project = c.project
    tasks = [task_document(project, i) for i in args.lattice_ids]  # all checked first
    closed, already = [], []
    fields = close_fields(c.clock, args.reason)
    for doc in tasks:
        if doc.is_closed:
            already.append(doc.lattice_id)
            continue
        project.add_fields(doc, fields)
        closed.append(doc.lattice_id)
    return {"closed": closed, "already_closed": already}


def update(c: ProjectContext, args: UpdateInput) -> dict[str, Any]:
    doc = task_document(c.project, args.lattice_id)
    front = dict(doc.front_matter)
    if args.priority is not None:
        front["priority"] = args.priority
    if args.task_type is not None:
        front["task-type"] = args.task_type
    labels = list(front.get("labels") or [])
    if args.labels is not None:
        labels = list(args.labels)
    labels += [lb for lb in args.add_labels or [] if lb not in labels]
    removed = set(args.remove_labels or [])
    front["labels"] = [lb for lb in labels if lb not in removed]
    c.project.rewrite(doc, front)
    return document_summary(Document(doc.path, front, doc.body))


def add_dependency(c: ProjectContext, args: DependencyInput) -> dict[str, Any]:
    project = c.project
    task = task_document(project, args.lattice_id)
    blocker = task_document(project, args.blocked_by)
    if blocker.lattice_id == task.lattice_id:
        raise ToolError(
            "DEPENDENCY_CYCLE",
            f"Task '{task.lattice_id}' cannot block itself",
            "Pass two different task IDs",
        )
    blocked_by_of = {
        d.lattice_id: list(d.front_matter.get("blocked-by") or [])
        for d in project.documents()
        if d.is_task
    }
    # Adding task <- blocker closes a cycle when task already (transitively) blocks blocker.
    pending, seen = [blocker.lattice_id], set()
    while pending:
        current = pending.pop()
        if current == task.lattice_id:
            raise ToolError(
                "DEPENDENCY_CYCLE",
                f"'{blocker.lattice_id}' already depends on '{task.lattice_id}'",
                "Remove the opposite dependency first",
            )
        if current not in seen:
            seen.add(current)
            pending.extend(blocked_by_of.get(current, []))
    blocked_by = list(task.front_matter.get("blocked-by") or [])
    if blocker.lattice_id not in blocked_by:
        blocked_by.append(blocker.lattice_id)
        project.rewrite(task, {**task.front_matter, "blocked-by": blocked_by})
    return {"lattice_id": task.lattice_id, "blocked_by": blocked_by}


TOOLS: tuple[Tool[ProjectContext, dict[str, Any]], ...] = (
    tool(
        "lattice_create_task",
        "Create a task document with an auto-generated filename in {directory}/tasks/.",
        CreateTaskInput,
        create_task,
    ),
    tool(
        "lattice_create_document",
        "Create a knowledge-base document {directory}/docs/{name}.md.",
        CreateDocumentInput,
        create_document,
    ),
    tool(
        "lattice_show",
        "Retrieve a document's details (front matter and body) by Lattice ID.",
        ShowInput,
        show,
    ),
    tool(
        "lattice_list",
        "Query documents with filters (all optional).",
        ListInput,
        list_documents,
    ),
    tool(
        "lattice_close_task",
        "Close one or more tasks (sets closed-at; the file stays where it is).",
        CloseInput,
        close_task,
    ),
    tool(
        "lattice_update",
        "Modify a task's metadata: priority, task type, labels.",
        UpdateInput,
        update,
    ),
    tool(
        "lattice_add_dependency",
        "Record that a task is blocked by another task (refuses cycles).",
        DependencyInput,
        add_dependency,
    ),
)

__all__ = ["TOOLS", "ProjectContext", "close_fields", "document_summary", "task_document"]
