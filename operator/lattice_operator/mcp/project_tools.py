"""The project tools of `lattice mcp`: their JSON schemas (the seed's tables) and handlers.

Handlers are plain functions of (project, clock, arguments) returning a JSON-able dict or
raising ToolError; the server module only wires them to the SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

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

Handler = Callable[[Project, Clock, Mapping[str, Any]], dict[str, Any]]

_STRING_LIST = {"type": "array", "items": {"type": "string"}}


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, description, input schema and handler."""

    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler


def _schema(properties: dict[str, dict[str, Any]], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


# -- argument readers (the SDK does not validate input against the schema) ---------------------


def _invalid(name: str, expected: str) -> ToolError:
    return ToolError(
        "INVALID_ARGUMENT",
        f"Parameter '{name}' must be {expected}",
        "Check the tool's input schema with tools/list",
    )


def _string(args: Mapping[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise _invalid(name, "a string" if name in args else "given (it is required)")
    return value


def _optional_string(args: Mapping[str, Any], name: str) -> str | None:
    return None if args.get(name) is None else _string(args, name)


def _strings(args: Mapping[str, Any], name: str) -> list[str]:
    value = args.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _invalid(name, "a list of strings")
    return list(value)


def _priority(args: Mapping[str, Any], default: int | None) -> int | None:
    value = args.get("priority")
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 4:
        raise ToolError(
            "INVALID_PRIORITY",
            f"Priority {value!r} is not in range 0-4",
            "Use 0 (highest) to 4 (lowest); the default is 2",
        )
    return value


def _task_type(args: Mapping[str, Any], required: bool) -> str | None:
    value = args.get("task_type")
    if value is None and not required:
        return None
    if value not in TASK_TYPES:
        raise ToolError(
            "INVALID_TASK_TYPE",
            f"Task type {value!r} is not one of: {', '.join(TASK_TYPES)}",
            "Use bug, feature, task or chore",
        )
    return str(value)


def _description(args: Mapping[str, Any]) -> str:
    value = _string(args, "description")
    if len(value) > MAX_DESCRIPTION:
        raise ToolError(
            "DESCRIPTION_TOO_LONG",
            f"Description has {len(value)} characters; the maximum is {MAX_DESCRIPTION}",
            "Shorten the description and put the detail in the body",
        )
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


def create_task(project: Project, clock: Clock, args: Mapping[str, Any]) -> dict[str, Any]:
    directory_arg = _string(args, "directory")
    description = _description(args)
    task_type = _task_type(args, required=True)
    body = _string(args, "body")
    priority = _priority(args, default=2)
    labels = _strings(args, "labels")
    blocked_by = _strings(args, "blocked_by")
    discovered_from = _strings(args, "discovered_from")
    directory, front, _ = _created(project, directory_arg, clock)
    lattice_id = project.fresh_id()
    filename = f"{filename_stem(description)}_{lattice_id}.md"
    name = name_from_filename(filename)
    front.update({"lattice-id": lattice_id, "name": name, "description": description})
    front = {
        **front,
        "task-type": task_type,
        "priority": priority,
        "labels": labels,
        "blocked-by": blocked_by,
        "discovered-from": discovered_from,
    }
    path = project.write_new(directory / "tasks", filename, render(front, body))
    return {"lattice_id": lattice_id, "path": path, "name": name}


def create_document(project: Project, clock: Clock, args: Mapping[str, Any]) -> dict[str, Any]:
    directory_arg = _string(args, "directory")
    name_arg = _string(args, "name")
    if len(name_arg) > MAX_NAME:
        raise ToolError(
            "NAME_TOO_LONG",
            f"Name has {len(name_arg)} characters; the maximum is {MAX_NAME}",
            "Choose a shorter name",
        )
    stem = name_arg.removesuffix(".md")
    if not stem or not all(c.isalnum() or c in "_-" for c in stem) or not stem.isascii():
        raise ToolError(
            "INVALID_NAME",
            f"Name '{name_arg}' is not a plain file name",
            "Use letters, digits, '_' and '-' only, e.g. 'authentication_design'",
        )
    description = _description(args)
    body = _string(args, "body")
    labels = _strings(args, "labels")
    directory, front, _ = _created(project, directory_arg, clock)
    lattice_id = project.fresh_id()
    filename = f"{stem}.md"
    name = name_from_filename(filename)
    front.update(
        {"lattice-id": lattice_id, "name": name, "description": description, "labels": labels}
    )
    path = project.write_new(directory / "docs", filename, render(front, body))
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


def show(project: Project, clock: Clock, args: Mapping[str, Any]) -> dict[str, Any]:
    doc = project.find(_string(args, "lattice_id"))
    return {**document_summary(doc), "front_matter": jsonable(doc.front_matter), "body": doc.body}


def list_documents(project: Project, clock: Clock, args: Mapping[str, Any]) -> dict[str, Any]:
    directory_arg = _optional_string(args, "directory")
    prefix = ""
    if directory_arg is not None:
        directory = project.directory(directory_arg)
        prefix = "" if directory == project.root else project.relative(directory) + "/"
    kind = _optional_string(args, "kind")
    if kind not in (None, "task", "document"):
        raise _invalid("kind", "'task' or 'document'")
    status = _optional_string(args, "status")
    if status not in (None, "open", "closed"):
        raise _invalid("status", "'open' or 'closed'")
    task_type = _task_type(args, required=False)
    label = _optional_string(args, "label")
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


def close_task(project: Project, clock: Clock, args: Mapping[str, Any]) -> dict[str, Any]:
    ids = _strings(args, "lattice_ids")
    if not ids:
        raise _invalid("lattice_ids", "a non-empty list of task IDs")
    reason = _optional_string(args, "reason")
    tasks = [task_document(project, i) for i in ids]  # all checked before any is changed
    closed, already = [], []
    fields = close_fields(clock, reason)
    for doc in tasks:
        if doc.is_closed:
            already.append(doc.lattice_id)
            continue
        project.add_fields(doc, fields)
        closed.append(doc.lattice_id)
    return {"closed": closed, "already_closed": already}


def update(project: Project, clock: Clock, args: Mapping[str, Any]) -> dict[str, Any]:
    doc = task_document(project, _string(args, "lattice_id"))
    front = dict(doc.front_matter)
    priority = _priority(args, default=None)
    if priority is not None:
        front["priority"] = priority
    task_type = _task_type(args, required=False)
    if task_type is not None:
        front["task-type"] = task_type
    labels = list(front.get("labels") or [])
    if args.get("labels") is not None:
        labels = _strings(args, "labels")
    labels += [lb for lb in _strings(args, "add_labels") if lb not in labels]
    removed = set(_strings(args, "remove_labels"))
    front["labels"] = [lb for lb in labels if lb not in removed]
    project.rewrite(doc, front)
    return document_summary(Document(doc.path, front, doc.body))


def add_dependency(project: Project, clock: Clock, args: Mapping[str, Any]) -> dict[str, Any]:
    task = task_document(project, _string(args, "lattice_id"))
    blocker = task_document(project, _string(args, "blocked_by"))
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


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "lattice_create_task",
        "Create a task document with an auto-generated filename in {directory}/tasks/.",
        _schema(
            {
                "directory": {
                    "type": "string",
                    "description": 'Parent directory path (e.g., "api/")',
                },
                "description": {
                    "type": "string",
                    "maxLength": MAX_DESCRIPTION,
                    "description": "Human-readable task title",
                },
                "task_type": {
                    "type": "string",
                    "enum": list(TASK_TYPES),
                    "description": "One of: bug, feature, task, chore",
                },
                "body": {"type": "string", "description": "Markdown body content"},
                "priority": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 4,
                    "default": 2,
                    "description": "0-4 (default: 2)",
                },
                "labels": {**_STRING_LIST, "description": "List of labels"},
                "blocked_by": {**_STRING_LIST, "description": "List of blocking task IDs"},
                "discovered_from": {
                    **_STRING_LIST,
                    "description": "List of parent task IDs for provenance",
                },
            },
            ["directory", "description", "task_type", "body"],
        ),
        create_task,
    ),
    ToolSpec(
        "lattice_create_document",
        "Create a knowledge-base document {directory}/docs/{name}.md.",
        _schema(
            {
                "directory": {
                    "type": "string",
                    "description": 'Parent directory path (e.g., "api/")',
                },
                "name": {
                    "type": "string",
                    "maxLength": MAX_NAME,
                    "description": "Document name (becomes filename, max 64 chars)",
                },
                "description": {
                    "type": "string",
                    "maxLength": MAX_DESCRIPTION,
                    "description": "Human-readable description (max 1024 chars)",
                },
                "body": {"type": "string", "description": "Markdown body content"},
                "labels": {**_STRING_LIST, "description": "List of labels"},
            },
            ["directory", "name", "description", "body"],
        ),
        create_document,
    ),
    ToolSpec(
        "lattice_show",
        "Retrieve a document's details (front matter and body) by Lattice ID.",
        _schema(
            {"lattice_id": {"type": "string", "description": "Lattice ID, e.g. LCGWQN"}},
            ["lattice_id"],
        ),
        show,
    ),
    ToolSpec(
        "lattice_list",
        "Query documents with filters (all optional).",
        _schema(
            {
                "directory": {
                    "type": "string",
                    "description": "Only documents below this directory",
                },
                "kind": {"type": "string", "enum": ["task", "document"]},
                "status": {
                    "type": "string",
                    "enum": ["open", "closed"],
                    "description": "Tasks only",
                },
                "task_type": {"type": "string", "enum": list(TASK_TYPES)},
                "label": {"type": "string", "description": "Only documents with this label"},
            },
            [],
        ),
        list_documents,
    ),
    ToolSpec(
        "lattice_close_task",
        "Close one or more tasks (sets closed-at; the file stays where it is).",
        _schema(
            {
                "lattice_ids": {**_STRING_LIST, "minItems": 1, "description": "Task IDs to close"},
                "reason": {"type": "string", "description": "Why, recorded as closed-reason"},
            },
            ["lattice_ids"],
        ),
        close_task,
    ),
    ToolSpec(
        "lattice_update",
        "Modify a task's metadata: priority, task type, labels.",
        _schema(
            {
                "lattice_id": {"type": "string", "description": "The task's Lattice ID"},
                "priority": {"type": "integer", "minimum": 0, "maximum": 4},
                "task_type": {"type": "string", "enum": list(TASK_TYPES)},
                "labels": {**_STRING_LIST, "description": "Replace the labels"},
                "add_labels": {**_STRING_LIST, "description": "Labels to add"},
                "remove_labels": {**_STRING_LIST, "description": "Labels to remove"},
            },
            ["lattice_id"],
        ),
        update,
    ),
    ToolSpec(
        "lattice_add_dependency",
        "Record that a task is blocked by another task (refuses cycles).",
        _schema(
            {
                "lattice_id": {"type": "string", "description": "The task that is blocked"},
                "blocked_by": {"type": "string", "description": "The task that blocks it"},
            },
            ["lattice_id", "blocked_by"],
        ),
        add_dependency,
    ),
)

__all__ = ["TOOLS", "ToolSpec", "close_fields", "document_summary", "task_document"]
