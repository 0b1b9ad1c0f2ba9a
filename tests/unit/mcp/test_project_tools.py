"""`lattice mcp`: schemas, every tool, every error code, escapes. The schemas and hostile bytes
go through the SDK's stdio client to the real `lattice mcp` process; the tools' behaviour is
checked on the same server object in process (tests/support/mcp_client.in_process)."""

from __future__ import annotations

import re
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp.client.client import Client

from lattice_operator.clock import SystemClock
from lattice_operator.mcp.documents import Project, filename_stem, parse
from lattice_operator.mcp.entry import project_server
from tests.support.clock import FakeClock
from tests.support.mcp_client import call, error_code, in_process, lattice_mcp

# The seed's parameter tables, transcribed verbatim (../shared/specs/mcp-tools.md).
SEED_TABLES = {
    "lattice_create_task": """
| `directory` | string | Yes | Parent directory path (e.g., `"api/"`) |
| `description` | string | Yes | Human-readable task title |
| `task_type` | string | Yes | One of: `bug`, `feature`, `task`, `chore` |
| `body` | string | Yes | Markdown body content |
| `priority` | integer | No | 0-4 (default: 2) |
| `labels` | string[] | No | List of labels |
| `blocked_by` | string[] | No | List of blocking task IDs |
| `discovered_from` | string[] | No | List of parent task IDs for provenance |
""",
    "lattice_create_document": """
| `directory` | string | Yes | Parent directory path (e.g., `"api/"`) |
| `name` | string | Yes | Document name (becomes filename, max 64 chars) |
| `description` | string | Yes | Human-readable description (max 1024 chars) |
| `body` | string | Yes | Markdown body content |
| `labels` | string[] | No | List of labels |
""",
}
PLANNED = {
    "lattice_close_task",
    "lattice_show",
    "lattice_list",
    "lattice_update",
    "lattice_add_dependency",
}
ID = re.compile(r"^L[A-HJ-NP-Z]{5}$")
ROOT_ID = "LROOTA"
SHELL_HOSTILE = "$(rm -rf /) `id` ; && || > /dev/null 'single' \"double\" \\ \\n %s {} * ? ! #"


def _json_type(seed_type: str) -> dict[str, Any]:
    if seed_type.endswith("[]"):
        return {"type": "array", "items": {"type": seed_type[:-2]}}
    return {"type": seed_type}


def _table(text: str) -> dict[str, tuple[dict[str, Any], bool]]:
    rows = {}
    for line in text.strip().splitlines():
        name, kind, required, _ = (c.strip() for c in line.strip("|").split("|"))
        rows[name.strip("`")] = (_json_type(kind), required == "Yes")
    return rows


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    for directory, lattice_id in (("api", ROOT_ID), ("auth", "LROOTB")):
        (root / directory).mkdir(parents=True)
        (root / directory / f"{directory}.md").write_text(
            f"---\nlattice-id: {lattice_id}\nname: {directory}\ndescription: root\n---\n\n# root\n"
        )
    (root / "bare").mkdir()
    return root


def _served(project: Path) -> AbstractAsyncContextManager[Client]:
    # What `lattice mcp --project` serves (lattice_operator.mcp.entry.run_project).
    return in_process(project_server(Project(project), SystemClock()))


def _front(project: Path, rel: str) -> tuple[dict[str, Any], str]:
    doc = parse(rel, (project / rel).read_text())
    assert doc is not None
    return doc.front_matter, doc.body


async def test_tools_list_matches_the_seed_tables(project: Path) -> None:
    async with lattice_mcp("--project", str(project)) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == set(SEED_TABLES) | PLANNED
    for tool, table in SEED_TABLES.items():
        schema = tools[tool].input_schema
        expected = _table(table)
        assert set(schema["properties"]) == set(expected), tool
        for name, (json_type, required) in expected.items():
            prop = schema["properties"][name]
            assert {k: prop[k] for k in json_type} == json_type, (tool, name)
            assert (name in schema["required"]) is required, (tool, name)
    task = tools["lattice_create_task"].input_schema["properties"]
    assert (task["priority"]["minimum"], task["priority"]["maximum"]) == (0, 4)
    assert task["priority"]["default"] == 2
    assert task["task_type"]["enum"] == ["bug", "feature", "task", "chore"]
    doc = tools["lattice_create_document"].input_schema["properties"]
    assert (doc["name"]["maxLength"], doc["description"]["maxLength"]) == (64, 1024)


def test_the_table_parser_notices_a_renamed_or_retyped_parameter() -> None:
    # Guards the guard: the comparison above must see these differences.
    table = _table(SEED_TABLES["lattice_create_task"])
    assert table["priority"] == ({"type": "integer"}, False)
    assert table["labels"] == ({"type": "array", "items": {"type": "string"}}, False)
    assert table["body"] == ({"type": "string"}, True)


async def test_create_task_to_the_letter(project: Path) -> None:
    async with _served(project) as session:
        result = await call(
            session,
            "lattice_create_task",
            directory="auth/",
            description="Fix login after password reset",
            task_type="bug",
            body="Users receive 401 errors.\n\n## Steps\n\n1. Reset\n",
            priority=1,
            labels=["auth", "urgent"],
            blocked_by=["LAAAAB"],
            discovered_from=["LAAAAC"],
        )
        default = await call(
            session,
            "lattice_create_task",
            directory="api",
            description="Add",
            task_type="chore",
            body="",
        )
    lattice_id = result["lattice_id"]
    assert ID.match(lattice_id)
    assert result == {
        "lattice_id": lattice_id,
        "path": f"auth/tasks/fix_login_after_password_reset_{lattice_id}.md",
        "name": f"fix-login-after-password-reset-{lattice_id.lower()}",
    }
    front, body = _front(project, result["path"])
    assert body == "Users receive 401 errors.\n\n## Steps\n\n1. Reset\n"
    created = datetime.fromisoformat(front.pop("created-at"))
    assert abs((datetime.now(UTC) - created).total_seconds()) < 3600
    assert front == {
        "lattice-id": lattice_id,
        "name": result["name"],
        "description": "Fix login after password reset",
        "parent-id": "LROOTB",
        "task-type": "bug",
        "priority": 1,
        "labels": ["auth", "urgent"],
        "blocked-by": ["LAAAAB"],
        "discovered-from": ["LAAAAC"],
    }
    default_front, _ = _front(project, default["path"])
    assert default_front["priority"] == 2
    assert default_front["parent-id"] == ROOT_ID
    assert default["path"].startswith("api/tasks/add_")


async def test_create_document_to_the_letter(project: Path) -> None:
    async with _served(project) as session:
        result = await call(
            session,
            "lattice_create_document",
            directory="auth/",
            name="oauth_implementation",
            description="OAuth 2.0 implementation design and security considerations",
            body="# OAuth 2.0 Implementation\n\n- Authorization Code with PKCE\n",
        )
    assert ID.match(result["lattice_id"])
    assert result["path"] == "auth/docs/oauth_implementation.md"
    assert result["name"] == "oauth-implementation"
    assert result["lattice_id"] not in result["path"]
    front, body = _front(project, result["path"])
    assert front["lattice-id"] == result["lattice_id"]
    assert front["parent-id"] == "LROOTB"
    assert front["labels"] == []
    assert "created-at" in front
    assert "task-type" not in front
    assert body.startswith("# OAuth 2.0 Implementation\n")


def test_filename_generation() -> None:
    assert filename_stem("Fix the login bug") == "fix_login_bug"
    assert filename_stem("Fix login after password reset") == "fix_login_after_password_reset"
    long = filename_stem("Refactor the extraordinarily complicated authentication middleware now")
    assert len(long) <= 40
    assert long == "refactor_extraordinarily_complicated"
    assert filename_stem("!!!") == "task"
    assert filename_stem("Über naïve façade") == "ber_na_ve_fa_ade"


async def test_every_creation_error_code(project: Path) -> None:
    task = {"directory": "api/", "description": "Do it", "task_type": "task", "body": "b"}
    doc = {"directory": "api/", "name": "design", "description": "d", "body": "b"}
    async with _served(project) as session:
        codes = {
            "INVALID_DIRECTORY": await error_code(
                session, "lattice_create_task", **{**task, "directory": "nonexistent/"}
            ),
            "INVALID_TASK_TYPE": await error_code(
                session, "lattice_create_task", **{**task, "task_type": "epic"}
            ),
            "INVALID_PRIORITY": await error_code(
                session, "lattice_create_task", **task, priority=5
            ),
            "NAME_TOO_LONG": await error_code(
                session, "lattice_create_document", **{**doc, "name": "n" * 65}
            ),
            "DESCRIPTION_TOO_LONG": await error_code(
                session, "lattice_create_task", **{**task, "description": "d" * 1025}
            ),
            "MISSING_ROOT": await error_code(
                session, "lattice_create_document", **{**doc, "directory": "bare/"}
            ),
        }
        assert await call(session, "lattice_create_document", **doc)
        codes["FILE_EXISTS"] = await error_code(session, "lattice_create_document", **doc)
        negative = await error_code(session, "lattice_create_task", **task, priority=-1)
        boolean = await error_code(session, "lattice_create_task", **task, priority=True)
        missing = await error_code(session, "lattice_create_task", directory="api/")
        bad_name = await error_code(session, "lattice_create_document", **{**doc, "name": "a/b"})
        unknown = await error_code(session, "lattice_nope")
    assert codes == {code: code for code in codes}
    assert (negative, boolean, missing, bad_name, unknown) == (
        "INVALID_PRIORITY",
        "INVALID_PRIORITY",
        "INVALID_ARGUMENT",
        "INVALID_NAME",
        "UNKNOWN_TOOL",
    )
    # Bounds are inclusive.
    assert len("n" * 64) == 64
    async with _served(project) as session:
        ok = await call(session, "lattice_create_document", **{**doc, "name": "n" * 64})
        edge = await call(session, "lattice_create_task", **{**task, "description": "d" * 1024})
    assert "error" not in ok
    assert "error" not in edge


async def test_id_collision_is_reported(project: Path) -> None:
    # The one code a real random generator cannot be made to produce on demand.
    server = project_server(Project(project, new_id=lambda: ROOT_ID), FakeClock())
    async with Client(server) as client:
        result = await client.call_tool(
            "lattice_create_task",
            {"directory": "api/", "description": "x", "task_type": "bug", "body": ""},
        )
    assert result.structured_content is not None
    assert result.structured_content["error"]["code"] == "ID_COLLISION"
    assert result.is_error
    assert not (project / "api" / "tasks").exists() or not any(
        (project / "api" / "tasks").iterdir()
    )


@pytest.mark.parametrize(
    "directory",
    ["../", "api/../../", "/etc", "/tmp", "~", "outside_link/", "api/../outside_link"],
)
async def test_paths_never_escape_the_project_root(
    project: Path, tmp_path: Path, directory: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "outside.md").write_text("---\nlattice-id: LOUTSD\n---\n")
    (project / "outside_link").symlink_to(outside)
    async with _served(project) as session:
        code = await error_code(
            session,
            "lattice_create_task",
            directory=directory,
            description="escape",
            task_type="bug",
            body="",
        )
        listing = await call(session, "lattice_list")
    assert code == "INVALID_DIRECTORY"
    assert list(outside.iterdir()) == [outside / "outside.md"]
    assert all(d["lattice_id"] != "LOUTSD" for d in listing["documents"])


async def test_symlinked_tasks_folder_and_root_document_are_refused(
    project: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (project / "api" / "tasks").symlink_to(outside)
    (project / "linked").mkdir()
    secret = tmp_path / "secret.md"
    secret.write_text("---\nlattice-id: LSECRT\n---\n")
    (project / "linked" / "linked.md").symlink_to(secret)
    async with _served(project) as session:
        via_tasks = await error_code(
            session,
            "lattice_create_task",
            directory="api",
            description="x",
            task_type="bug",
            body="",
        )
        via_root = await error_code(
            session,
            "lattice_create_document",
            directory="linked",
            name="n",
            description="d",
            body="",
        )
    assert (via_tasks, via_root) == ("INVALID_DIRECTORY", "INVALID_DIRECTORY")
    assert list(outside.iterdir()) == []


async def test_large_bodies_and_hostile_characters_survive_exactly(project: Path) -> None:
    body = (
        "\n".join(f"line {i}: {SHELL_HOSTILE} ```\n---\n" for i in range(3000))
        + "\r\n\t\u00e9\u2603"
    )
    description = "Fix: 'quotes' \"and\" #hash --- $(x) " + "\u2603"
    assert len(body) > 200_000
    async with lattice_mcp("--project", str(project)) as session:
        made = await call(
            session,
            "lattice_create_task",
            directory="api",
            description=description,
            task_type="bug",
            body=body,
        )
        shown = await call(session, "lattice_show", lattice_id=made["lattice_id"])
        doc = await call(
            session,
            "lattice_create_document",
            directory="api",
            name="hostile",
            description=SHELL_HOSTILE,
            body=body,
        )
        doc_shown = await call(session, "lattice_show", lattice_id=doc["lattice_id"])
    assert shown["body"] == body
    assert shown["description"] == description
    assert doc_shown["body"] == body
    assert doc_shown["description"] == SHELL_HOSTILE
    assert made["path"].startswith("api/tasks/fix_quotes_hash_x_")
    # The file itself is valid YAML front matter any other tool can read.
    text = (project / made["path"]).read_text()
    assert (
        yaml.safe_load(text.split("\n---\n", 1)[0].removeprefix("---\n"))["description"]
        == description
    )


async def test_show_list_update_close_and_dependencies(project: Path) -> None:
    def task(description: str, **extra: Any) -> dict[str, Any]:
        return {
            "directory": "api",
            "description": description,
            "task_type": "feature",
            "body": "b",
            **extra,
        }

    async with _served(project) as session:
        first = await call(session, "lattice_create_task", **task("First", labels=["x"]))
        second = await call(session, "lattice_create_task", **task("Second"))
        other = await call(session, "lattice_create_task", **{**task("Third"), "directory": "auth"})
        note = await call(
            session,
            "lattice_create_document",
            directory="api",
            name="note",
            description="n",
            body="kb",
        )
        shown = await call(session, "lattice_show", lattice_id=first["lattice_id"])
        in_api = await call(session, "lattice_list", directory="api", kind="task")
        labelled = await call(session, "lattice_list", label="x")
        docs = await call(session, "lattice_list", kind="document")
        updated = await call(
            session,
            "lattice_update",
            lattice_id=first["lattice_id"],
            priority=0,
            task_type="bug",
            add_labels=["y"],
            remove_labels=["x"],
        )
        dep = await call(
            session,
            "lattice_add_dependency",
            lattice_id=second["lattice_id"],
            blocked_by=first["lattice_id"],
        )
        again = await call(
            session,
            "lattice_add_dependency",
            lattice_id=second["lattice_id"],
            blocked_by=first["lattice_id"],
        )
        cycle = await error_code(
            session,
            "lattice_add_dependency",
            lattice_id=first["lattice_id"],
            blocked_by=second["lattice_id"],
        )
        self_dep = await error_code(
            session,
            "lattice_add_dependency",
            lattice_id=first["lattice_id"],
            blocked_by=first["lattice_id"],
        )
        closed = await call(
            session,
            "lattice_close_task",
            lattice_ids=[first["lattice_id"], other["lattice_id"]],
            reason="done",
        )
        closed_again = await call(session, "lattice_close_task", lattice_ids=[first["lattice_id"]])
        open_tasks = await call(session, "lattice_list", status="open")
        closed_tasks = await call(session, "lattice_list", status="closed", task_type="bug")
        errors = [
            await error_code(session, "lattice_show", lattice_id="LZZZZZ"),
            await error_code(session, "lattice_close_task", lattice_ids=[note["lattice_id"]]),
            await error_code(session, "lattice_update", lattice_id=first["lattice_id"], priority=9),
            await error_code(
                session, "lattice_update", lattice_id=first["lattice_id"], task_type="x"
            ),
            await error_code(session, "lattice_list", kind="folder"),
            await error_code(session, "lattice_close_task", lattice_ids=[]),
            await error_code(session, "lattice_list", directory="../"),
        ]
    assert shown["body"] == "b"
    assert shown["front_matter"]["parent-id"] == ROOT_ID
    assert shown["kind"] == "task"
    assert shown["status"] == "open"
    assert {d["lattice_id"] for d in in_api["documents"]} == {
        first["lattice_id"],
        second["lattice_id"],
    }
    assert [d["lattice_id"] for d in labelled["documents"]] == [first["lattice_id"]]
    # Root documents are knowledge-base documents too.
    assert {d["lattice_id"] for d in docs["documents"]} == {note["lattice_id"], ROOT_ID, "LROOTB"}
    assert (updated["priority"], updated["task_type"], updated["labels"]) == (0, "bug", ["y"])
    assert dep["blocked_by"] == again["blocked_by"] == [first["lattice_id"]]
    assert (cycle, self_dep) == ("DEPENDENCY_CYCLE", "DEPENDENCY_CYCLE")
    assert closed == {"closed": [first["lattice_id"], other["lattice_id"]], "already_closed": []}
    assert closed_again == {"closed": [], "already_closed": [first["lattice_id"]]}
    assert {d["lattice_id"] for d in open_tasks["documents"]} == {second["lattice_id"]}
    assert [d["lattice_id"] for d in closed_tasks["documents"]] == [first["lattice_id"]]
    front, body = _front(project, first["path"])
    assert front["closed-reason"] == "done"
    assert "closed-at" in front
    assert body == "b"
    assert errors == [
        "NOT_FOUND",
        "NOT_A_TASK",
        "INVALID_PRIORITY",
        "INVALID_TASK_TYPE",
        "INVALID_ARGUMENT",
        "INVALID_ARGUMENT",
        "INVALID_DIRECTORY",
    ]


async def test_the_server_exits_when_stdin_closes(project: Path) -> None:
    import asyncio
    import sys

    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "lattice"),
        "mcp",
        "--project",
        str(project),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None
    proc.stdin.write(
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
        b'"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
    )
    proc.stdin.close()
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0
    first = out.decode().splitlines()[0]
    assert '"id":1' in first
    assert '"serverInfo":{"name":"lattice"' in first


def test_fresh_ids_see_documents_added_or_changed_behind_the_servers_back(
    project: Path,
) -> None:
    # The server caches IDs per file between calls: files written by others must count.
    offered = iter(["LNEWAA", "LNEWAA", "LNEWBB", "LNEWBB", "LNEWCC"])
    proj = Project(project, new_id=lambda: next(offered))
    assert proj.fresh_id() == "LNEWAA"
    (project / "api" / "other.md").write_text("---\nlattice-id: LNEWAA\n---\n")
    assert proj.fresh_id() == "LNEWBB"  # LNEWAA is now taken
    (project / "api" / "api.md").write_text("---\nlattice-id: LNEWBB\nname: api-root\n---\n")
    assert proj.fresh_id() == "LNEWCC"  # the root document changed to LNEWBB


def test_front_matter_cannot_be_closed_early_by_a_value() -> None:
    from lattice_operator.mcp.documents import render

    description = "first\n---\nlattice-id: LFAKEA\n---"
    text = render({"lattice-id": "LREALA", "description": description, "labels": ["a\n---\n"]}, "b")
    doc = parse("x.md", text)
    assert doc is not None
    assert doc.lattice_id == "LREALA"
    assert doc.front_matter["description"] == description
    assert doc.front_matter["labels"] == ["a\n---\n"]
    assert doc.body == "b"


async def test_a_dangling_symlink_out_of_the_project_is_refused(
    project: Path, tmp_path: Path
) -> None:
    target = tmp_path / "not-yet"
    (project / "api" / "docs").symlink_to(target)
    async with _served(project) as session:
        code = await error_code(
            session, "lattice_create_document", directory="api", name="n", description="d", body=""
        )
    assert code == "INVALID_DIRECTORY"
    assert not target.exists()
