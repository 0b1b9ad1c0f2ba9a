"""FileOps carried out in a real local sprite through the official SDK adapter: every op,
every status, patches that do and do not apply, the constraints enforced."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from lattice_adapters.sprites import SpritesAdapter
from lattice_operator.api.v1alpha1.fileops import FileOpsRequest
from lattice_operator.fileops.executor import execute
from lattice_operator.fileops.response import FileOpsResponse
from lattice_operator.ports.errors import NotFound
from tests.support.fileops_requests import fileops_request

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def request(ops: list[dict[str, Any]], **extra: Any) -> FileOpsRequest:
    return fileops_request(ops, **extra)


async def run(sprite: tuple[SpritesAdapter, str], req: FileOpsRequest) -> FileOpsResponse:
    adapter, name = sprite
    return await execute(adapter, name, req, now=NOW)


async def read(sprite: tuple[SpritesAdapter, str], path: str) -> str:
    adapter, name = sprite
    return (await adapter.read_file(name, f"/workspace/{path}")).decode()


async def test_every_standard_op_and_an_ok_response(sprite: tuple[SpritesAdapter, str]) -> None:
    res = await run(
        sprite,
        request(
            [
                {"op": "write_file", "path": "src/app.py", "content": "a = 1\nb = 2\n"},
                {"op": "read_file", "path": "src/app.py"},
                {"op": "write_json", "path": "state.json", "value": {"b": 1, "a": [1, 2]}},
                {
                    "op": "apply_patch",
                    "patch": "*** Begin Patch\n*** Update File: src/app.py\n@@\n a = 1\n-b = 2\n"
                    "+b = 3\n*** Add File: notes.md\n+hello\n*** End Patch\n",
                },
                {"op": "run", "cmd": "cat src/app.py notes.md", "cwd": "."},
            ],
            report={"changedFiles": True, "diffSummary": True, "commandOutputs": "always"},
        ),
    )
    wire = res.wire()
    assert wire["status"] == "ok", wire
    assert wire["changedFiles"] == ["src/app.py", "state.json", "notes.md"]
    assert {d["path"]: (d["added"], d["removed"]) for d in wire["diffSummary"]} == {
        "src/app.py": (2, 0),
        "state.json": (7, 0),
        "notes.md": (1, 0),
    }
    assert [o["status"] for o in wire["ops"]] == ["ok"] * 5
    assert wire["data"]["files"]["src/app.py"]["content"] == "a = 1\nb = 2\n"
    (proof,) = wire["proof"]["commands"]
    assert proof == {
        "cmd": "cat src/app.py notes.md",
        "exitCode": 0,
        "stdout": "a = 1\nb = 3\nhello\n",
        "stderr": "",
    }
    assert json.loads(await read(sprite, "state.json")) == {"a": [1, 2], "b": 1}
    assert (await read(sprite, "state.json")).startswith('{\n  "a"')  # pretty, sorted
    saved = json.loads(await read(sprite, ".lattice/fileops/S1/response.json"))
    assert saved == wire


async def test_a_patch_that_does_not_apply_writes_nothing(
    sprite: tuple[SpritesAdapter, str],
) -> None:
    res = await run(
        sprite,
        request(
            [
                {"op": "write_file", "path": "a.txt", "content": "one\n"},
                {
                    "op": "apply_patch",
                    "patch": "*** Begin Patch\n*** Add File: b.txt\n+new\n"
                    "*** Update File: a.txt\n@@\n-two\n+three\n*** End Patch",
                },
                {"op": "write_file", "path": "c.txt", "content": "never"},
            ]
        ),
    )
    wire = res.wire()
    assert wire["status"] == "fail"
    assert "hunk 1 does not apply" in wire["fail"]["reason"]
    assert wire["fail"]["hint"]
    assert [o["status"] for o in wire["ops"]] == ["ok", "fail", "skipped"]
    assert await read(sprite, "a.txt") == "one\n"
    adapter, name = sprite
    listing = await adapter.read_file(name, "/workspace/a.txt")
    assert listing == b"one\n"
    for absent in ("b.txt", "c.txt"):
        with pytest.raises(NotFound):
            await read(sprite, absent)


async def test_a_failing_command_fails_with_its_output_and_a_long_one_by_reference(
    sprite: tuple[SpritesAdapter, str],
) -> None:
    res = await run(
        sprite,
        request(
            [{"op": "run", "cmd": "head -c 20000 /dev/zero | tr '\\0' x; echo oops >&2; exit 3"}]
        ),
    )
    wire = res.wire()
    assert wire["status"] == "fail"
    assert "exited 3" in wire["fail"]["reason"]
    (proof,) = wire["proof"]["commands"]
    assert proof["exitCode"] == 3
    assert proof["stderr"] == "oops\n"
    assert len(proof["stdout"]) == 8192  # the end inline, the whole in the sprite
    ref = proof["stdoutRef"]
    assert ref["bytes"] == 20000
    assert ref["path"] == "/workspace/.lattice/fileops/S1/op0.stdout"
    assert len(await read(sprite, ".lattice/fileops/S1/op0.stdout")) == 20000


async def test_outputs_never_and_a_timeout(sprite: tuple[SpritesAdapter, str]) -> None:
    quiet = await run(
        sprite,
        request(
            [{"op": "run", "cmd": "echo secret-ish; exit 1"}],
            report={"changedFiles": False, "diffSummary": False, "commandOutputs": "never"},
        ),
    )
    wire = quiet.wire()
    assert wire["proof"]["commands"] == [
        {"cmd": "echo secret-ish; exit 1", "exitCode": 1, "stdout": "", "stderr": ""}
    ]
    assert "changedFiles" not in wire
    slow = await run(sprite, request([{"op": "run", "cmd": "sleep 30", "timeoutMs": 300}]))
    assert "did not finish" in slow.wire()["fail"]["reason"]


async def test_writable_roots_and_escapes_are_refused_before_anything_runs(
    sprite: tuple[SpritesAdapter, str],
) -> None:
    res = await run(
        sprite,
        request(
            [
                {"op": "write_file", "path": "src/ok.txt", "content": "fine"},
                {"op": "write_file", "path": "docs/no.txt", "content": "outside"},
                {"op": "read_file", "path": "../../etc/passwd"},
            ],
            constraints={"writable_roots": ["src"]},
        ),
    )
    wire = res.wire()
    assert wire["status"] == "validation_error"
    assert {e["field"] for e in wire["errors"]} == {"ops[1].path", "ops[2].path"}
    with pytest.raises(NotFound):
        await read(sprite, "src/ok.txt")  # not even the allowed write happened


async def test_no_network_swaps_the_policy_for_the_run_and_puts_it_back(
    sprite: tuple[SpritesAdapter, str],
) -> None:
    adapter, name = sprite
    from lattice_operator.api.v1alpha1.sprite import NetworkRule

    before = [NetworkRule.model_validate({"domain": "example.com", "action": "allow"})]
    await adapter.set_network_policy(name, before)
    res = await run(
        sprite,
        request(
            [{"op": "run", "cmd": "cat /.sprite/policy/network.json"}],
            constraints={"no_network": True},
            report={"changedFiles": True, "diffSummary": False, "commandOutputs": "always"},
        ),
    )
    seen = json.loads(res.wire()["proof"]["commands"][0]["stdout"])
    assert seen["rules"] == [{"domain": "*", "action": "deny"}]
    assert await adapter.get_network_policy(name) == before


async def test_triflow_ops_through_split_ask_and_completion(
    sprite: tuple[SpritesAdapter, str],
) -> None:
    plan = {"taskName": "demo", "objective": "show it", "steps": ["one", "two"]}
    init = await run(
        sprite, request([{"op": "triflow_plan_init", "plan": plan}], purpose="write_plan_files")
    )
    assert init.wire()["changedFiles"] == ["state.json", "todo.md", "plan_log.md"]
    assert "- [ ] 1. one  ← current" in await read(sprite, "todo.md")
    for _ in range(2):
        ok = await run(sprite, request([{"op": "triflow_state_preflight", "path": "state.json"}]))
        assert ok.wire()["status"] == "ok"
        assert "step: one" in ok.wire()["data"]["stepContext"]
    split = await run(sprite, request([{"op": "triflow_state_preflight", "path": "state.json"}]))
    assert split.wire()["status"] == "split"
    assert split.wire()["split"] == {"substeps": []}
    await run(
        sprite,
        request(
            [{"op": "triflow_state_apply_split", "stepIndex": 0, "substeps": ["a", "b", "c"]}],
            purpose="split_step",
        ),
    )
    blocked = await run(
        sprite, request([{"op": "triflow_state_mark_blocked", "reason": "waiting on X"}])
    )
    assert blocked.wire()["status"] == "ok"
    asked = await run(sprite, request([{"op": "triflow_state_preflight", "path": "state.json"}]))
    assert asked.wire()["status"] == "ask"
    assert "waiting on X" in asked.wire()["ask"]["questions"][0]
    too_many = await run(sprite, request([{"op": "triflow_state_append_steps", "steps": ["x"]}]))
    assert too_many.wire()["status"] == "fail"
    log = await read(sprite, "plan_log.md")
    assert log.startswith("# Plan log\n")
    assert "blocked: a: waiting on X" in log
    state = json.loads(await read(sprite, "state.json"))
    assert state["current"] == {"type": "substep", "stepIndex": 0, "subIndex": 0}
