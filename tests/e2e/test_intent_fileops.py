"""A fileops Intent through the pipeline: classified, approved by policy, carried out in its
Sprite, the FileOpsRES in its status; a request that leaves its writable roots is refused
with the protocol's validation error and nothing is written."""

from __future__ import annotations

import copy
from typing import Any

from tests.support.admission_cases import build, sample
from tests.support.stack import Stack

ALLOW_FILEOPS = {
    "apiVersion": "lattice.dev/v1alpha1",
    "kind": "IntentPolicy",
    "metadata": {"name": "files-ok"},
    "spec": {
        "rules": [
            {
                "name": "fileops-in-box",
                "match": "intent.spec.kind == 'fileops'",
                "risk": "controlled",
                "outcome": "allow",
            }
        ]
    },
}


def fileops_intent(name: str, request: dict[str, Any]) -> dict[str, Any]:
    doc = sample("intent-fileops.yaml")
    doc["metadata"] = {"name": name}
    doc["spec"]["subject"] = {"type": "sprite", "ref": "box"}
    doc["spec"]["params"]["fileops"] = request
    return doc


def base_request(ops: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    request = copy.deepcopy(sample("intent-fileops.yaml")["spec"]["params"]["fileops"])
    request.update({"id": "E2E", "ops": ops, **extra})
    request["constraints"] = {"no_network": False, "writable_roots": ["."], "max_attempts": 2}
    return request


def setup(stack: Stack, namespace: str) -> None:
    stack.create(namespace, ALLOW_FILEOPS)
    stack.create(namespace, build("sprite.yaml", "box", {"spec.networkPolicy": {"rules": []}}))
    stack.wait_sprite_ready(namespace, "box")


def test_a_fileops_intent_is_carried_out_in_its_sprite(stack: Stack, namespace: str) -> None:
    setup(stack, namespace)
    request = base_request(
        [
            {"op": "write_file", "path": "notes/todo.md", "content": "- [ ] one\n"},
            {
                "op": "apply_patch",
                "patch": "*** Begin Patch\n*** Update File: notes/todo.md\n@@\n-- [ ] one\n"
                "+- [x] one\n*** End Patch\n",
            },
            {"op": "write_json", "path": "state.json", "value": {"current": 2}},
            {"op": "run", "cmd": "grep -c '\\[x\\]' notes/todo.md"},
        ]
    )
    stack.create(namespace, fileops_intent("files", request))
    intent = stack.wait_phase(namespace, "intents", "files", {"Succeeded", "Failed"}, timeout=90)
    response = intent["status"]["fileops"]["response"]
    assert intent["status"]["phase"] == "Succeeded", intent["status"]
    assert response["status"] == "ok"
    assert response["id"] == "E2E"
    assert response["changedFiles"] == ["notes/todo.md", "state.json"]
    assert intent["status"]["fileops"]["attempts"] == 1
    assert intent["status"]["result"]["status"] == "success"
    root = stack.sprites.host_root(f"{namespace}-box")
    assert (root / "notes" / "todo.md").read_text() == "- [x] one\n"
    assert (root / "state.json").read_text() == '{\n  "current": 2\n}\n'
    assert (root / ".lattice" / "fileops" / "E2E" / "response.json").is_file()


def test_leaving_the_writable_roots_is_refused_and_nothing_is_written(
    stack: Stack, namespace: str
) -> None:
    setup(stack, namespace)
    request = base_request(
        [
            {"op": "write_file", "path": "src/ok.txt", "content": "fine"},
            {"op": "write_file", "path": "../escape.txt", "content": "out"},
        ]
    )
    request["constraints"]["writable_roots"] = ["src"]
    stack.create(namespace, fileops_intent("escape", request))
    intent = stack.wait_phase(namespace, "intents", "escape", {"Succeeded", "Failed"}, timeout=90)
    assert intent["status"]["phase"] == "Failed"
    response = intent["status"]["fileops"]["response"]
    assert response["status"] == "validation_error"
    assert [e["field"] for e in response["errors"]] == ["ops[1].path"]
    cond = next(c for c in intent["status"]["conditions"] if c["type"] == "Succeeded")
    assert cond["reason"] == "FileOpsFailed"
    root = stack.sprites.host_root(f"{namespace}-box")
    assert not (root / "src" / "ok.txt").exists()
    assert not (root.parent / "escape.txt").exists()
