"""`lattice mcp` against hostile input (issue 27): a YAML bomb and broken documents in the
project, and lines on the stdio wire the SDK cannot read. Each is answered, none stops the
server or hides the other documents."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from lattice_operator.mcp.documents import MAX_FRONT_MATTER
from lattice_operator.mcp.wire import MAX_DEPTH, refusal
from tests.support.mcp_client import call, lattice_mcp

# A few hundred bytes: each line holds ten of the previous one, a million strings expanded.
BOMB = "---\nlattice-id: LBOMBA\nname: bomb\na: &a [" + ",".join(["lol"] * 10) + "]\n"
for prev, cur in zip("abcde", "bcdef", strict=True):
    BOMB += f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 10) + "]\n"
BOMB += "labels: *f\n---\n\nboom\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "api").mkdir(parents=True)
    (root / "api" / "api.md").write_text(
        "---\nlattice-id: LROOTA\nname: api\ndescription: root\n---\n\n# root\n"
    )
    return root


async def test_a_yaml_bomb_is_refused_and_named_not_expanded(project: Path) -> None:
    (project / "api" / "bomb.md").write_text(BOMB)
    async with lattice_mcp("--project", str(project)) as session:
        result = await session.call_tool("lattice_list", {})
        shown = await session.call_tool("lattice_show", {"lattice_id": "LBOMBA"})
    text = result.content[0].text  # type: ignore[union-attr]
    assert len(text) < 4096, len(text)  # before: 7 MB of "lol"
    listing = json.loads(text)
    assert [d["lattice_id"] for d in listing["documents"]] == ["LROOTA"]
    (bad,) = listing["invalid"]
    assert (bad["path"], bad["lattice_id"], bad["field"]) == ("api/bomb.md", "LBOMBA", "b")
    assert "aliases are not allowed" in bad["error"]
    assert shown.structured_content is not None
    assert shown.structured_content.get("error", {}).get("code") == "INVALID_DOCUMENT"


async def test_a_bad_date_skips_its_document_and_names_the_field(project: Path) -> None:
    (project / "api" / "bad.md").write_text(
        "---\nlattice-id: LBADDA\nname: bad\ncreated-at: 2026-13-45\n---\n\nbody\n"
    )
    huge = "x" * MAX_FRONT_MATTER
    (project / "api" / "huge.md").write_text(f"---\nlattice-id: LHUGEA\nname: {huge}\n---\n\n")
    (project / "api" / "jekyll.md").write_text("---\ntitle: [unclosed\n---\n\nnot ours\n")
    async with lattice_mcp("--project", str(project)) as session:
        listing = await call(session, "lattice_list")
        created = await call(
            session,
            "lattice_create_task",
            directory="api",
            description="t",
            task_type="bug",
            body="",
        )
        after = await call(session, "lattice_list", kind="task")
        shown = await session.call_tool("lattice_show", {"lattice_id": "LBADDA"})
    assert [d["lattice_id"] for d in listing["documents"]] == ["LROOTA"]
    by_path = {e["path"]: e for e in listing["invalid"]}
    assert set(by_path) == {"api/bad.md", "api/huge.md"}  # jekyll.md has no lattice-id
    assert by_path["api/bad.md"]["field"] == "created-at"
    assert "month must be in 1..12" in by_path["api/bad.md"]["error"]
    assert by_path["api/huge.md"]["field"] is None
    assert f"the maximum is {MAX_FRONT_MATTER}" in by_path["api/huge.md"]["error"]
    assert [d["lattice_id"] for d in after["documents"]] == [created["lattice_id"]]
    error = shown.structured_content["error"]  # type: ignore[index]
    assert error["code"] == "INVALID_DOCUMENT"
    assert "api/bad.md" in error["message"]
    assert "created-at" in error["message"]
    # Nothing is lost: the broken files are left exactly as they were.
    assert "2026-13-45" in (project / "api" / "bad.md").read_text()


def test_documents_written_by_the_tools_never_hold_an_alias() -> None:
    from lattice_operator.mcp.documents import parse, render

    shared = ["x", "y"]
    doc = parse(
        "d.md", render({"lattice-id": "LSAMEA", "labels": shared, "blocked-by": shared}, "")
    )
    assert doc is not None
    assert doc.front_matter["blocked-by"] == ["x", "y"]


@pytest.mark.parametrize(
    ("line", "code", "answer_id"),
    [
        ('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1,2]}', -32602, 7),
        ('{"jsonrpc":"2.0","id":"s","method":"tools/list","params":"x"}', -32602, "s"),
        (
            '{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"a":' + "[" * 100_000,
            -32700,
            None,
        ),
        (
            '{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"a":'
            + "[" * MAX_DEPTH
            + "]" * MAX_DEPTH
            + "}}",
            -32700,
            9,
        ),
        ("not json", -32700, None),
        ('[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', -32600, None),
        ('{"jsonrpc":"1.0","id":10,"method":"tools/list"}', -32600, 10),
    ],
)
def test_what_the_sdk_could_not_read_gets_an_error(line: str, code: int, answer_id: Any) -> None:
    refused = refusal(line)
    assert refused is not None
    assert (refused.code, refused.id, refused.reply) == (code, answer_id, True)


def test_readable_messages_pass_and_notifications_are_never_answered() -> None:
    assert refusal('{"jsonrpc":"2.0","id":1,"method":"tools/list"}') is None
    deep_enough = "[" * (MAX_DEPTH - 4) + "]" * (MAX_DEPTH - 4)
    assert (
        refusal('{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":' + deep_enough + "}}") is None
    )
    note = refusal('{"jsonrpc":"2.0","method":"notifications/x","params":[1]}')
    assert note is not None
    assert not note.reply


async def test_every_unreadable_request_on_the_wire_is_answered(project: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "lattice"),
        "mcp",
        "--project",
        str(project),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    hostile = [
        b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":["lattice_list",{}]}',
        b'{"jsonrpc":"2.0","id":3,"method":"tools/list","params":'
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}",
        b"{oops",
        b'{"jsonrpc":"2.0","id":4,"method":"tools/list"}',
    ]
    init = (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
        b'"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
    )
    try:
        proc.stdin.write(init + b"".join(line + b"\n" for line in hostile))
        await proc.stdin.drain()
        answers = [json.loads(await asyncio.wait_for(proc.stdout.readline(), 30)) for _ in range(5)]
    finally:
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 30)
    assert [a["id"] for a in answers] == [1, 2, None, None, 4]
    assert [a.get("error", {}).get("code") for a in answers[1:4]] == [-32602, -32700, -32700]
    assert "params" in answers[1]["error"]["message"]
    assert "tools" in answers[4]["result"]  # the server still answers after all of them
    assert proc.returncode == 0
