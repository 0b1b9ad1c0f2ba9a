"""Intent kinds beyond sprite_task_exec, and what flows between an Intent and its Run:
sprite_create makes a Sprite, forge kinds wait for a forge, forge actions are queued, a
WAITING shows on the Intent and the Intent's resume reaches its Run; an approved
fly_machines Intent starts a machine on the local Fly (the operator of this module has a
Fly token from a Secret and the local Fly's URL in its settings); a SpriteCheckpoint takes a
backend checkpoint, an approved checkpoint_restore rolls the Sprite back to it (refused while a
Run holds the Sprite), and deleting the object deletes the backend checkpoint."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lattice_adapters.sprites import SpritesAdapter
from lattice_operator.builders import INTENT_LABEL
from lattice_operator.ports.errors import NotFound
from tests.support.admission_cases import build, sample
from tests.support.agents import agent
from tests.support.cluster import Cluster, wait_for
from tests.support.e2e_intents import (
    APPROVER_ROLE,
    approval_request,
    bind_role,
    intent_doc,
    kubectl_as,
    setup_namespace,
)
from tests.support.e2e_runs import lattice
from tests.support.fly.server import FlyDouble, fly_double
from tests.support.mcp_client import call, lattice_mcp
from tests.support.sprites_server import LocalSprites
from tests.support.stack import Stack, operator_stack

pytestmark = pytest.mark.e2e

FLY_TOKEN = "fly-e2e-token"


@pytest.fixture(scope="module")
def fly() -> Iterator[FlyDouble]:
    with fly_double(token=FLY_TOKEN, apps=("preview-app",)) as double:
        yield double
    assert double.violations == [], double.violations  # nothing Fly would not know


@pytest.fixture(scope="module")
def stack(
    cluster: Cluster,
    local_sprites: LocalSprites,
    fly: FlyDouble,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    """The module's operator (replacing conftest's), with Fly configured."""
    creds = cluster.create_namespace("fly-creds")
    cluster.kubectl(
        "create", "secret", "generic", "fly", "-n", creds, f"--from-literal=token={FLY_TOKEN}"
    )
    settings = {"api_url": fly.api_url, "token_secret": f"{creds}/fly", "backoff": 0.1}
    log_dir: Path = tmp_path_factory.mktemp("operator")
    try:
        with operator_stack(cluster, local_sprites, log_dir, fly=settings) as s:
            yield s
            if not s.operator.alive():
                raise AssertionError(f"the operator died:\n{s.operator.log()[-5000:]}")
    finally:
        cluster.delete_namespace(creds)


ALLOW_ALL = {
    "apiVersion": "lattice.dev/v1alpha1",
    "kind": "IntentPolicy",
    "metadata": {"name": "team"},  # replaces test_intents' policy of that name
    "spec": {"rules": [{"name": "all", "match": "true", "risk": "safe", "outcome": "allow"}]},
}


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


def test_sprite_create_makes_a_sprite(stack: Stack, namespace: str) -> None:
    stack.create(namespace, ALLOW_ALL)
    doc = sample("intent-sprite-create.yaml")
    stack.create(namespace, doc)
    intent = stack.wait_phase(
        namespace, "intents", doc["metadata"]["name"], {"Succeeded", "Failed"}
    )
    assert intent["status"]["phase"] == "Succeeded", intent["status"]
    name = doc["spec"]["params"]["spriteCreate"]["name"]
    sprite = stack.wait_sprite_ready(namespace, name)
    assert sprite["spec"]["urlAuth"] == "sprite"
    # Not owned (a sprite outlives the Intent that asked for it), but traceable to it.
    assert "ownerReferences" not in sprite["metadata"]
    assert sprite["metadata"]["labels"][INTENT_LABEL] == doc["metadata"]["name"]


def test_a_forge_kind_waits_for_a_forge_and_never_succeeds(stack: Stack, namespace: str) -> None:
    stack.create(namespace, ALLOW_ALL)
    doc = sample("intent-issue-triage.yaml")
    stack.create(namespace, doc)
    intent = stack.wait_phase(namespace, "intents", doc["metadata"]["name"], {"Waiting"})
    reasons = {c["reason"] for c in intent["status"]["conditions"]}
    assert "NoForgeConfigured" in reasons, intent["status"]["conditions"]
    assert intent["status"].get("result") is None


ASKS_FOR_A_PR = agent(
    r"""
if os.path.exists("/workspace/.lattice/resume.json"):
    emit("INFO", {"message": "resumed"})  # the protocol: acknowledge the resume first
    inputs = json.load(open("/workspace/.lattice/resume.json"))["inputs"]
    emit("COMPLETED", {"status": "success", "summary": "go=%s" % inputs["go"]})
else:
    emit("ACTION_REQUEST", {"action": "OPEN_PR", "parameters": {"title": "fix"},
                            "blocking": False})
    emit("WAITING", {"reason": "QUESTION", "checkpoint_id": checkpoint("before asking"),
                     "expected_inputs": {"go": "boolean"}})
"""
)


def test_forge_actions_queue_and_the_intent_resumes_its_run(stack: Stack, namespace: str) -> None:
    setup_namespace(stack, namespace)
    stack.create(namespace, ALLOW_ALL)
    stack.create(
        namespace,
        intent_doc("pr", ["python3", "-c", ASKS_FOR_A_PR], allowedActions=["OPEN_PR"]),
    )
    intent = stack.wait_phase(namespace, "intents", "pr", {"Waiting", "Failed"})
    status = intent["status"]
    assert status["phase"] == "Waiting", status
    # The Run's WAITING shows on the Intent ...
    waiting = status["waiting"]
    assert waiting["expectedInputs"] == {"go": "boolean"}
    # ... and the granted forge action waits for the forge integration.
    [queued] = status["actions"]
    assert (queued["action"], queued["state"]) == ("OPEN_PR", "pending")
    # The checkpoint the Run waits on is in its Sprite's status now, though no SpriteCheckpoint
    # changed (without one, a Run's checkpoint showed only at the next such change).
    wait_for(
        lambda: any(
            entry["id"] == waiting["checkpointId"]
            for entry in stack.get(namespace, "sprites", "box")["status"].get("checkpoints") or []
        ),
        timeout=30,
        what="the Run's checkpoint in its Sprite's status",
    )

    resume = {"spec": {"resume": {"checkpointId": waiting["checkpointId"], "inputs": {"go": True}}}}
    stack.cluster.kubectl(
        "patch", "intent", "pr", "-n", namespace, "--type", "merge", "-p", json.dumps(resume)
    )
    done = stack.wait_phase(namespace, "intents", "pr", {"Succeeded", "Failed"})
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert done["status"]["result"]["summary"] == "go=True"
    run = stack.get(namespace, "runs", done["status"]["runRef"]["name"])
    assert run["spec"]["resume"]["inputs"] == {"go": True}


def test_an_approved_fly_machines_intent_starts_the_machine(
    stack: Stack, namespace: str, fly: FlyDouble
) -> None:
    # No IntentPolicy allows it: a deployment hook waits for a human's approval.
    bind_role(stack, namespace, "alice", APPROVER_ROLE)
    machine = fly.add_machine("preview-app", state="stopped")
    doc = sample("intent-fly-machines.yaml")
    doc["spec"]["params"]["flyMachines"]["machineId"] = machine
    stack.create(namespace, doc)
    name = doc["metadata"]["name"]
    waiting = stack.wait_phase(namespace, "intents", name, {"AwaitingApproval"})
    assert waiting["status"]["classification"]["outcome"] == "require_approval"
    assert fly.requests == []  # nothing reaches Fly before the approval
    approved = kubectl_as(
        stack, "alice", "annotate", "intent", name, "-n", namespace, approval_request("approve")
    )
    assert approved.returncode == 0, approved.stderr
    intent = stack.wait_phase(namespace, "intents", name, {"Succeeded", "Failed"})
    status = intent["status"]
    assert status["phase"] == "Succeeded", json.dumps(status)
    assert _condition(intent, "Succeeded")["reason"] == "Completed"
    assert status["fly"] == {
        "app": "preview-app",
        "action": "start",
        "machineId": machine,
        "state": "started",
        "attempts": 1,
        "finished": True,
    }
    assert status["result"]["artifacts"] == [f"fly_machine: preview-app/{machine}"]
    assert [e["to"] for e in status["auditLog"]][-3:] == ["Approved", "Executing", "Succeeded"]
    # What Fly was asked, in order, with the operator's token.
    asked = [(r.method, r.path, r.query, r.authorization) for r in fly.requests]
    base = f"/apps/preview-app/machines/{machine}"
    auth = f"Bearer {FLY_TOKEN}"
    assert asked == [
        ("GET", base, {}, auth),
        ("POST", f"{base}/start", {}, auth),
        ("GET", f"{base}/wait", {"state": "started", "timeout": "30"}, auth),
        ("GET", base, {}, auth),
    ]
    assert fly.machine("preview-app", machine)["state"] == "started"

    def done_event() -> dict[str, Any] | None:
        events = json.loads(
            stack.cluster.kubectl("-n", namespace, "get", "events", "-o", "json").stdout
        )["items"]
        return next(
            (
                e
                for e in events
                if e["reason"] == "FlyActionDone" and e["involvedObject"]["name"] == name
            ),
            None,
        )

    event = wait_for(done_event, timeout=30, what="the Intent's FlyActionDone event")
    assert f"started machine {machine} of Fly app preview-app" in event["message"]


def _approve(stack: Stack, namespace: str, name: str) -> None:
    stack.wait_phase(namespace, "intents", name, {"AwaitingApproval"})
    approved = kubectl_as(
        stack, "alice", "annotate", "intent", name, "-n", namespace, approval_request("approve")
    )
    assert approved.returncode == 0, approved.stderr


async def test_checkpoints_taken_restored_through_an_intent_and_deleted(
    stack: Stack, namespace: str
) -> None:
    """Through both doors: `lattice checkpoints` and the MCP cluster tools."""
    setup_namespace(stack, namespace)  # Sprite box; no rule allows a restore
    bind_role(stack, namespace, "alice", APPROVER_ROLE)
    box = stack.get(namespace, "sprites", "box")["status"]["spriteName"]
    async with SpritesAdapter(stack.sprites.credentials) as backend:
        await backend.write_file(box, "/workspace/kept", b"v1")
    env = {"KUBECONFIG": str(stack.cluster.kubeconfig)}

    # Taken through the object: Ready with the backend id, and listed in the Sprite's status.
    took = lattice(stack, "checkpoints", "take", "box", "-m", "before the refactor",
                   "--name", "before", "-n", namespace)  # fmt: skip
    assert took.stdout.strip() == "spritecheckpoint/before created"
    before = stack.wait_phase(namespace, "spritecheckpoints", "before", {"Ready", "Failed"})
    assert before["status"]["phase"] == "Ready", before["status"]
    taken = before["status"]["checkpointId"]

    def listed() -> dict[str, Any] | None:
        entries = stack.get(namespace, "sprites", "box")["status"].get("checkpoints") or []
        return next((e for e in entries if e["id"] == taken), None)

    entry = wait_for(listed, timeout=30, what="the checkpoint in the Sprite's status")
    assert (entry["object"], entry["comment"]) == ("before", "before the refactor")
    async with lattice_mcp("--cluster", env=env) as session:
        shown = await call(session, "lattice_cluster_checkpoints_list", sprite="box",
                           namespace=namespace)  # fmt: skip
    assert shown["checkpoints"][0]["id"] == taken  # newest first
    assert [(o["name"], o["phase"], o["checkpoint_id"]) for o in shown["objects"]] == [
        ("before", "Ready", taken)
    ]
    printed = lattice(stack, "checkpoints", "list", "box", "-n", namespace).stdout
    assert f"{taken} " in printed, printed
    assert "before the refactor" in printed, printed
    async with SpritesAdapter(stack.sprites.credentials) as backend:
        await backend.write_file(box, "/workspace/later", b"after the checkpoint")

    # Refused while a Run holds the Sprite.
    run = build("run.yaml", "holder", {"spec.spriteRef.name": "box"})
    run["spec"]["command"] = ["sleep", "120"]
    stack.create(namespace, run)
    stack.wait_phase(namespace, "runs", "holder", {"Running"})
    async with lattice_mcp("--cluster", env=env) as session:
        proposed = await call(session, "lattice_cluster_checkpoint_propose_restore",
                              sprite="box", checkpoint="before", name="held",
                              namespace=namespace)  # fmt: skip
    assert proposed["name"] == "held", proposed
    _approve(stack, namespace, "held")
    refused = stack.wait_phase(namespace, "intents", "held", {"Succeeded", "Failed"})
    assert refused["status"]["phase"] == "Failed", refused["status"]
    assert _condition(refused, "Succeeded")["reason"] == "SpriteHeld"
    assert "Run holder holds Sprite box" in refused["status"]["result"]["summary"]
    cancel = json.dumps({"spec": {"cancel": True}})
    stack.cluster.kubectl(
        "patch", "run", "holder", "-n", namespace, "--type", "merge", "-p", cancel
    )
    stack.wait_phase(namespace, "runs", "holder", {"Canceled", "Failed", "Succeeded"})
    async with SpritesAdapter(stack.sprites.credentials) as backend:
        assert await backend.read_file(box, "/workspace/later") == b"after the checkpoint"

    # Restored once approved: the file written after the checkpoint is gone.
    lattice(stack, "checkpoints", "restore", "box", "before", "--name", "restore", "-n", namespace)
    _approve(stack, namespace, "restore")
    done = stack.wait_phase(namespace, "intents", "restore", {"Succeeded", "Failed"})
    status = done["status"]
    assert status["phase"] == "Succeeded", json.dumps(status)
    assert _condition(done, "Succeeded")["reason"] == "Restored"
    assert status["result"]["summary"] == (
        f"restored {box} to checkpoint {taken} (SpriteCheckpoint before)"
    )
    trail = [(e["to"], e["actor"]) for e in status["auditLog"]]
    assert trail[-3:] == [
        ("Approved", "alice"),
        ("Executing", "lattice-operator"),
        ("Succeeded", "lattice-operator"),
    ]

    def restored_event() -> dict[str, Any] | None:
        events = json.loads(
            stack.cluster.kubectl("-n", namespace, "get", "events", "-o", "json").stdout
        )["items"]
        return next(
            (
                e
                for e in events
                if e["reason"] == "CheckpointRestored" and e["involvedObject"]["name"] == "restore"
            ),
            None,
        )

    event = wait_for(restored_event, timeout=30, what="the Intent's CheckpointRestored event")
    assert event["message"] == f"{status['result']['summary']}; approved by alice"

    # ... and Lifeloop receipts: which checkpoint, which Sprite, whose approval.
    def receipts() -> list[dict[str, Any]] | None:
        items = json.loads(
            stack.cluster.kubectl(
                "get", "events.events.k8s.io", "-n", namespace, "-o", "json",
                "-l", f"lattice.dev/run-uid={done['metadata']['uid']}",
            ).stdout
        )["items"]  # fmt: skip
        found = [json.loads(e["metadata"]["annotations"]["lattice.dev/receipt"]) for e in items]
        return sorted(found, key=lambda r: r["sequence"]) if len(found) == 2 else None

    starting, started = wait_for(receipts, timeout=30, what="the restore's receipts")
    assert [(r["event"], r["status"], r["sequence"]) for r in (starting, started)] == [
        ("session.starting", "observed", 1),
        ("session.started", "observed", 2),
    ]
    assert started["parent_receipt_id"] == starting["receipt_id"]
    assert (starting["harness_session_id"], starting["harness_task_id"]) == (
        done["metadata"]["uid"],
        "restore",
    )
    assert starting["telemetry_summary"] == {
        "operation": "checkpoint_restored",
        "sprite": "box",
        "backend_sprite": box,
        "checkpoint_id": taken,
        "sprite_checkpoint": "before",
        "approved_by": ["alice"],
    }
    async with SpritesAdapter(stack.sprites.credentials) as backend:
        assert await backend.read_file(box, "/workspace/kept") == b"v1"
        with pytest.raises(NotFound):
            await backend.read_file(box, "/workspace/later")

    # Deleting the object deletes its backend checkpoint (another one is current now: the
    # backend never deletes the checkpoint the sprite is on).
    async with lattice_mcp("--cluster", env=env) as session:
        await call(session, "lattice_cluster_checkpoint_take", sprite="box", name="after",
                   namespace=namespace)  # fmt: skip
    after = stack.wait_phase(namespace, "spritecheckpoints", "after", {"Ready", "Failed"})
    assert after["status"]["phase"] == "Ready", after["status"]
    stack.cluster.kubectl("delete", "spritecheckpoint", "before", "-n", namespace)
    async with SpritesAdapter(stack.sprites.credentials) as backend:
        ids = [c.id for c in await backend.list_checkpoints(box)]
    assert taken not in ids
    assert after["status"]["checkpointId"] in ids

    # The Sprite's retention: keeping the newest one prunes "after" (object and checkpoint).
    patch = json.dumps({"spec": {"checkpoints": {"retention": 1}}})
    stack.cluster.kubectl("patch", "sprite", "box", "-n", namespace, "--type", "merge", "-p", patch)
    lattice(stack, "checkpoints", "take", "box", "--name", "third", "-n", namespace)
    third = stack.wait_phase(namespace, "spritecheckpoints", "third", {"Ready", "Failed"})
    assert third["status"]["phase"] == "Ready", third["status"]
    wait_for(
        lambda: stack.find(namespace, "spritecheckpoints", "after") is None,
        timeout=30,
        what="SpriteCheckpoint after pruned",
    )
    async with SpritesAdapter(stack.sprites.credentials) as backend:
        ids = [c.id for c in await backend.list_checkpoints(box)]
    assert after["status"]["checkpointId"] not in ids
    assert third["status"]["checkpointId"] in ids
