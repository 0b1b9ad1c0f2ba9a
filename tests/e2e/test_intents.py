"""Intents end to end: classified by policy, gated by authorised approval, executed through
Runs, and a sprite that gets exactly what its Intent grants."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from kubernetes.client.exceptions import ApiException

from lattice_operator.builders import RUN_UID_LABEL
from tests.support.admission_cases import build, sample
from tests.support.agents import agent
from tests.support.cluster import create_or_replace, wait_for
from tests.support.e2e_intents import (
    AGENT,
    APPROVER_ROLE,
    EDITOR_ROLE,
    POLICY,
    SECRET,
    api_writes,
    apply_secret,
    approval_request,
    bind_role,
    forge_approval,
    intent_doc,
    intent_writes,
    kubectl_as,
    quiet_cluster,
    setup_namespace,
)
from tests.support.e2e_runs import lattice, lattice_in_process
from tests.support.helm import RELEASE, find, render
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


INTENT_WRITES_AT_MOST = 10
"""API writes of one auto-approved Intent to its end, whoever makes them (docs/operating.md,
"What one Intent writes"): its create, two Intent status writes (Executing with its Run,
generation-guarded; Succeeded), the Run's create, two Run status writes (Running with its
attempt and session; Succeeded), four receipt Events. Was 12 (kopf's finalizer on the
Intent, added and removed, for the daemon the operator's own task replaced), before that 14
to 15 (a Starting write of the Run and an `is running` write of the Intent)."""


def test_auto_approved_intent_runs_to_success(stack: Stack, namespace: str) -> None:
    setup_namespace(stack, namespace)
    quiet_cluster(stack)
    before = api_writes(stack)
    stack.create(namespace, intent_doc("auto", ["sh", "-c", "echo done"], trusted=True))
    intent = stack.wait_phase(namespace, "intents", "auto", {"Succeeded", "Failed"})
    status = intent["status"]
    run_uid = stack.get(namespace, "runs", status["runRef"]["name"])["metadata"]["uid"]

    def finished() -> bool:
        # The last write: the Run's end receipt (the Intent's Succeeded came before it).
        receipts = stack.cluster.core.list_namespaced_event(
            namespace, label_selector=f"{RUN_UID_LABEL}={run_uid}"
        ).items
        return "SessionEnded" in {e.reason for e in receipts}

    wait_for(finished, timeout=60, what="its Run's receipts")
    writes = intent_writes(before, api_writes(stack))
    made = sum(v for k, v in writes.items() if k.split()[-1].startswith("2"))
    assert made <= INTENT_WRITES_AT_MOST, writes
    # None refused (kopf's finalizer removal, tried again on a body that still showed it,
    # was the one before).
    assert sum(writes.values()) == made, writes
    # Never a finalizer on the Intent: nothing of kopf's holds its deletion.
    assert not stack.get(namespace, "intents", "auto")["metadata"].get("finalizers")
    assert status["phase"] == "Succeeded", status
    assert status["classification"] == {
        "risk": "safe",
        "outcome": "allow",
        "approversRequired": 0,
        "policy": "team",
        "rule": "trusted-exec",
    }
    assert [(e["from"], e["to"]) for e in status["auditLog"]] == [
        ("Proposed", "Classified"),
        ("Classified", "Approved"),
        ("Approved", "Executing"),
        ("Executing", "Succeeded"),
    ]
    assert status["auditLog"][1]["actor"] == "policy:team/trusted-exec"
    run = stack.get(namespace, "runs", status["runRef"]["name"])
    assert run["metadata"]["ownerReferences"][0]["name"] == "auto"
    assert run["spec"]["intentRef"] == {"name": "auto"}


def test_approval_by_an_authorised_user_lets_it_run(stack: Stack, namespace: str) -> None:
    setup_namespace(stack, namespace)
    bind_role(stack, namespace, "alice", APPROVER_ROLE)
    bind_role(stack, namespace, "mallory", EDITOR_ROLE)
    stack.create(namespace, intent_doc("gated", ["sh", "-c", "echo approved work"]))
    intent = stack.wait_phase(namespace, "intents", "gated", {"AwaitingApproval"})
    assert intent["status"]["classification"]["rule"] == "default"
    assert not _exists(stack, namespace, "runs", "gated-run")

    # Someone who may only edit Intents cannot approve ...
    refused = kubectl_as(
        stack,
        "mallory",
        "annotate",
        "intent",
        "gated",
        "-n",
        namespace,
        approval_request("approve"),
    )
    assert refused.returncode != 0
    assert "mallory may not approve or reject intents" in refused.stderr
    # ... nor write an approval record in someone else's name.
    forgery = forge_approval(stack, namespace, "gated", forger="mallory", name="alice")
    assert forgery.returncode != 0
    assert "written only by the operator's admission webhook" in forgery.stderr
    assert stack.get(namespace, "intents", "gated")["status"]["phase"] == "AwaitingApproval"

    approved = kubectl_as(
        stack,
        "alice",
        "annotate",
        "intent",
        "gated",
        "-n",
        namespace,
        approval_request("approve", "reviewed the command"),
    )
    assert approved.returncode == 0, approved.stderr
    intent = stack.wait_phase(namespace, "intents", "gated", {"Succeeded", "Failed"})
    status = intent["status"]
    assert status["phase"] == "Succeeded", status
    assert [(a["user"], a["decision"], a["reason"]) for a in status["approvals"]] == [
        ("alice", "approve", "reviewed the command")
    ]
    approval = next(e for e in status["auditLog"] if e["to"] == "Approved")
    assert approval["actor"] == "alice"


def test_lattice_approve_records_the_caller(stack: Stack, namespace: str) -> None:
    setup_namespace(stack, namespace)
    stack.create(namespace, intent_doc("cli", ["sh", "-c", "echo via cli"]))
    stack.wait_phase(namespace, "intents", "cli", {"AwaitingApproval"})
    out = lattice(stack, "approve", "cli", "-n", namespace, "--reason", "ok by me").stdout
    assert "approve recorded as" in out
    intent = stack.wait_phase(namespace, "intents", "cli", {"Succeeded"})
    assert intent["status"]["approvals"][0]["reason"] == "ok by me"


def test_rejection_and_policy_denial(stack: Stack, namespace: str) -> None:
    setup_namespace(stack, namespace)
    stack.create(namespace, intent_doc("nope", ["true"]))
    stack.wait_phase(namespace, "intents", "nope", {"AwaitingApproval"})
    lattice(stack, "reject", "nope", "-n", namespace, "--reason", "not now")
    intent = stack.wait_phase(namespace, "intents", "nope", {"Rejected"})
    cond = next(c for c in intent["status"]["conditions"] if c["type"] == "Approved")
    assert (cond["status"], cond["reason"]) == ("False", "Rejected")
    assert "not now" in cond["message"]

    fileops = sample("intent-fileops.yaml")
    fileops["metadata"] = {"name": "files"}
    stack.create(namespace, fileops)
    intent = stack.wait_phase(namespace, "intents", "files", {"Rejected"})
    cond = next(c for c in intent["status"]["conditions"] if c["type"] == "Approved")
    assert cond["reason"] == "Denied"
    assert "team/no-fileops" in cond["message"]
    assert intent["status"]["classification"]["risk"] == "dangerous"


def test_an_intent_created_right_after_its_policy_is_decided_by_it(
    stack: Stack, namespace: str
) -> None:
    """`kubectl apply -f dir/` with a policy and an Intent: the Intent's event may be handled
    before the operator's policy index has the policy (soak round 1 found such an Intent
    left awaiting an approval for good, by the default decision). It is decided by the
    policy: the classification lists the policies. On a quiet machine the index usually
    wins this race anyway; the unit tests force it."""
    stack.create(namespace, POLICY)
    fileops = sample("intent-fileops.yaml")
    fileops["metadata"] = {"name": "raced"}
    stack.create(namespace, fileops)
    intent = stack.wait_phase(namespace, "intents", "raced", {"Rejected", "AwaitingApproval"})
    assert intent["status"]["classification"]["policy"] == "team", intent["status"]
    cond = next(c for c in intent["status"]["conditions"] if c["type"] == "Approved")
    assert cond["reason"] == "Denied"


def test_spec_is_frozen_after_approval_but_cancel_works(stack: Stack, namespace: str) -> None:
    setup_namespace(stack, namespace)
    stack.create(namespace, intent_doc("frozen", ["sleep", "600"], trusted=True))
    stack.wait_phase(namespace, "intents", "frozen", {"Executing"})
    changed = stack.cluster.kubectl(
        "patch",
        "intent",
        "frozen",
        "-n",
        namespace,
        "--type",
        "merge",
        "-p",
        '{"spec":{"summary":"something else"}}',
        check=False,
    )
    assert changed.returncode != 0
    assert "the spec is frozen once the Intent is approved" in changed.stderr
    lattice(stack, "cancel", "intent/frozen", "-n", namespace)
    intent = stack.wait_phase(namespace, "intents", "frozen", {"Canceled"})
    assert intent["status"]["result"]["status"] == "canceled"
    run = stack.wait_phase(namespace, "runs", "frozen-run", {"Canceled"})
    assert run["spec"]["cancel"] is True


def test_invalid_policy_rule_is_refused_with_its_index(stack: Stack, namespace: str) -> None:
    bad = json.loads(json.dumps(POLICY))
    bad["metadata"]["name"] = "broken"
    bad["spec"]["rules"][1]["match"] = "intent.spec.kind + 1"
    out = stack.cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", input=json.dumps(bad), check=False
    )
    assert out.returncode != 0
    assert "spec.rules[1] (no-fileops)" in out.stderr
    assert "type error" in out.stderr


def test_granted_credential_is_delivered_and_never_leaked(stack: Stack, namespace: str) -> None:
    setup_namespace(stack, namespace)
    apply_secret(stack, namespace)
    intent = intent_doc(
        "cred",
        ["python3", "-c", AGENT],
        trusted=True,
        allowedActions=["FETCH_CREDENTIAL"],
        credentials=[{"name": "gh", "secretKeyRef": {"name": "tokens", "key": "gh"}}],
    )
    stack.create(namespace, intent)
    done = stack.wait_phase(namespace, "intents", "cred", {"Succeeded", "Failed"})
    run_status = stack.get(namespace, "runs", "cred-run")["status"]
    assert done["status"]["phase"] == "Succeeded", (run_status["conditions"], run_status["logTail"])
    digest = hashlib.sha256(SECRET.encode()).hexdigest()
    assert done["status"]["result"]["summary"] == (
        f"credential at /dev/shm/lattice/credentials/gh mode 600 sha256 {digest}"
    )
    run = stack.get(namespace, "runs", "cred-run")
    [result] = run["status"]["actionResults"]
    assert (result["status"], result["path"], result["resumed"]) == (
        "fulfilled",
        "/dev/shm/lattice/credentials/gh",
        True,
    )

    # The value appears nowhere the operator writes or logs.
    for where, text in _written_by_the_operator(stack, namespace).items():
        assert SECRET not in text, f"the secret leaked into the {where}"
    # Delivered to memory (/dev/shm), never to disk: no checkpoint of the sprite holds it,
    # (the sprite-local server keeps /dev/shm out of checkpoints, as the service does).
    sprite = stack.get(namespace, "sprites", "box")["status"]["spriteName"]
    checkpoints = stack.sprites.state_dir / "sprites" / sprite / "checkpoints"
    files = [f for f in checkpoints.rglob("*") if f.is_file()]
    assert files
    assert not any(SECRET.encode() in f.read_bytes() for f in files)


def _written_by_the_operator(stack: Stack, namespace: str) -> dict[str, str]:
    """Everything the operator writes or logs, by where it is."""
    return {
        "runs and intents": stack.cluster.kubectl(
            "get", "runs,intents", "-n", namespace, "-o", "json"
        ).stdout,
        "events": stack.cluster.kubectl("get", "events", "-A", "-o", "json").stdout
        + stack.cluster.kubectl("get", "events.events.k8s.io", "-A", "-o", "json").stdout,
        "operator log": stack.operator.log(),
        "metrics": httpx.get(
            f"http://127.0.0.1:{stack.metrics_port}/metrics", trust_env=False
        ).text,
    }


def test_ungranted_action_is_refused_and_answered(stack: Stack, namespace: str) -> None:
    before = _scrape(stack)
    setup_namespace(stack, namespace)
    apply_secret(stack, namespace)
    stack.create(
        namespace,
        intent_doc(
            "greedy", ["python3", "-c", AGENT], trusted=True, allowedActions=["NOTIFY_USER"]
        ),
    )
    done = stack.wait_phase(namespace, "intents", "greedy", {"Succeeded", "Failed"})
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert done["status"]["result"]["summary"] == (
        "refused: FETCH_CREDENTIAL is not in Intent greedy's allowedActions"
    )
    run = stack.get(namespace, "runs", "greedy-run")
    [request] = run["status"]["events"]["actionRequests"]
    assert request["state"] == "Refused"
    # The operator is shared with other modules: this refusal is counted on top of theirs.
    assert _sample(_scrape(stack), REFUSED_NOT_GRANTED) > _sample(before, REFUSED_NOT_GRANTED)


ASKS_THEN_WAITS = agent(
    r"""
if os.path.exists("/workspace/.lattice/resume.json"):
    emit("INFO", {"message": "resumed"})  # the protocol: acknowledge the resume first
    context = json.load(open("/workspace/.lattice/resume.json"))["context"]
    seen = ",".join("%s:%s" % (r["action"], r["status"]) for r in context["action_results"])
    emit("COMPLETED", {"status": "success", "summary": seen})
else:
    emit("ACTION_REQUEST", {"action": "LABEL_ISSUE", "parameters": {"label": "bug"},
                            "blocking": False})
    emit("WAITING", {"reason": "QUESTION", "checkpoint_id": checkpoint("before asking"),
                     "expected_inputs": {"go": "boolean"}})
"""
)


def test_a_refused_non_blocking_request_is_answered_on_the_next_resume(
    stack: Stack, namespace: str
) -> None:
    setup_namespace(stack, namespace)
    stack.create(namespace, intent_doc("asker", ["python3", "-c", ASKS_THEN_WAITS], trusted=True))
    stack.wait_phase(namespace, "intents", "asker", {"Waiting"})
    run = stack.wait_phase(namespace, "runs", "asker-run", {"Waiting"})
    [result] = run["status"]["actionResults"]
    assert (result["action"], result["status"], result["resumed"]) == (
        "LABEL_ISSUE",
        "refused",
        False,
    )
    lattice_in_process(stack, "resume", "asker-run", "-n", namespace, "-i", "go=true")
    done = stack.wait_phase(namespace, "runs", "asker-run", {"Succeeded", "Failed"})
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert done["status"]["events"]["completion"]["summary"] == "LABEL_ISSUE:refused"
    assert done["status"]["actionResults"][0]["resumed"] is True


PROPOSER = agent(
    r"""
emit("ENVIRONMENT_PROPOSAL", {
    "observed_failure": {"phase": "bootstrap", "exit_code": 2, "stderr_hint": "no fixtures"},
    "suggested_adjustment": {"type": "add_preinstall_step",
                             "details": {"command": "echo prepared >> /workspace/env-ready"}},
    "confidence": 0.9, "evidence": ["tests read /workspace/env-ready"], "scope": "repo_specific"})
emit("ENVIRONMENT_PROPOSAL", {
    "observed_failure": {"phase": "bootstrap", "exit_code": 127, "stderr_hint": "node: not found"},
    "suggested_adjustment": {"type": "runtime_install",
                             "details": {"runtime": "lattice-absent-runtime"}},
    "confidence": 0.9, "evidence": ["package.json present"], "scope": "repo_specific"})
emit("ENVIRONMENT_PROPOSAL", {
    "observed_failure": {"phase": "test", "exit_code": 1, "stderr_hint": "no marker"},
    "suggested_adjustment": {"type": "add_preinstall_step",
                             "details": {"command": "touch /workspace/env-everywhere"}},
    "confidence": 0.6, "evidence": ["every repository needs it"], "scope": "global_candidate"})
emit("ACTION_REQUEST", {"action": "NOTIFY_USER", "parameters": {"message": "proposed node 20"},
                        "blocking": False})
emit("COMPLETED", {"status": "success", "summary": "proposed"})
"""
)
READS_THE_ENVIRONMENT = ["sh", "-c", "cat /workspace/env-ready"]


def _approve_by_two(stack: Stack, namespace: str, intent: str) -> dict[str, Any]:
    for user in ("alice", "bob"):
        done = kubectl_as(
            stack, user, "annotate", "intent", intent, "-n", namespace, approval_request("approve")
        )
        assert done.returncode == 0, done.stderr
    return stack.wait_phase(namespace, "intents", intent, {"Succeeded", "Failed"})


def test_environment_proposal_becomes_a_gated_intent_then_the_next_runs_environment(
    stack: Stack, namespace: str
) -> None:
    setup_namespace(stack, namespace)
    for user in ("alice", "bob"):
        bind_role(stack, namespace, user, APPROVER_ROLE)
    stack.create(
        namespace,
        intent_doc(
            "proposer", ["python3", "-c", PROPOSER], trusted=True, allowedActions=["NOTIFY_USER"]
        ),
    )
    stack.wait_phase(namespace, "intents", "proposer", {"Succeeded"})
    parent = wait_for(
        lambda: (
            len((s := stack.get(namespace, "intents", "proposer")["status"]).get("proposals", []))
            == 3
            and s
        ),
        timeout=30,
        what="the three proposals listed on the parent",
    )
    prepare, runtime, everywhere = parent["proposals"]
    proposal = stack.wait_phase(namespace, "intents", prepare, {"AwaitingApproval"})
    spec = proposal["spec"]
    assert spec["kind"] == "environment_change"
    assert spec["proposedBy"]["type"] == "sprite"
    assert spec["params"]["environmentChange"]["suggestedAdjustment"]["type"] == (
        "add_preinstall_step"
    )
    assert proposal["status"]["classification"]["approversRequired"] == 2
    # NOTIFY_USER became an Event on the Intent.
    events = json.loads(
        stack.cluster.kubectl(
            "get",
            "events.events.k8s.io",
            "-n",
            namespace,
            "-o",
            "json",
            "--field-selector",
            "reason=NotifyUser",
        ).stdout
    )["items"]
    assert any("proposed node 20" in e.get("note", "") for e in events)
    assert any(e["regarding"]["name"] == "proposer" for e in events)

    # Approved: the Sprite's environment has the step; the next Run runs it before the agent.
    done = _approve_by_two(stack, namespace, prepare)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    [step] = stack.get(namespace, "sprites", "box")["spec"]["environment"]
    assert (step["name"], step["command"]) == (prepare, "echo prepared >> /workspace/env-ready")
    stack.create(namespace, intent_doc("after", READS_THE_ENVIRONMENT, trusted=True))
    run = stack.wait_phase(namespace, "runs", "after-run", {"Succeeded", "Failed"})
    assert run["status"]["phase"] == "Succeeded", run["status"]
    applied = run["status"]["environment"]
    assert (applied["state"], [s["name"] for s in applied["steps"]]) == ("Applied", [prepare])
    assert run["status"]["logTail"] == ["prepared"]
    # The same environment again: nothing runs twice (the file still has one line).
    stack.create(namespace, intent_doc("again", READS_THE_ENVIRONMENT, trusted=True))
    run = stack.wait_phase(namespace, "runs", "again-run", {"Succeeded", "Failed"})
    assert run["status"]["environment"]["state"] == "AlreadyApplied", run["status"]
    assert run["status"]["logTail"] == ["prepared"]

    # A runtime that is not there: its check fails the next Run, with its own reason.
    done = _approve_by_two(stack, namespace, runtime)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    stack.create(namespace, intent_doc("broken", READS_THE_ENVIRONMENT, trusted=True))
    run = stack.wait_phase(namespace, "runs", "broken-run", {"Succeeded", "Failed"})
    failed = next(c for c in run["status"]["conditions"] if c["type"] == "Succeeded")
    assert failed["reason"] == "EnvironmentFailed", run["status"]
    # (`command -v` of a missing name exits 1 or 127, by shell.)
    assert re.fullmatch(
        rf"environment step {runtime} \(runtime_install\) exited (1|127): "
        "command -v lattice-absent-runtime >/dev/null",
        failed["message"],
    ), failed
    assert len(run["status"]["attempts"]) == 1
    assert run["status"].get("logTail", []) == []  # the agent never started

    # A global candidate is recorded, not applied, until a human promotes it into a Sprite.
    done = _approve_by_two(stack, namespace, everywhere)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    reason = next(c for c in done["status"]["conditions"] if c["type"] == "Succeeded")["reason"]
    assert reason == "GlobalCandidate"
    assert len(stack.get(namespace, "sprites", "box")["spec"]["environment"]) == 2
    listed = lattice(stack, "env", "candidates", "-n", namespace).stdout
    assert listed.split("\t")[:2] == [everywhere, "add_preinstall_step"]
    out = lattice(stack, "env", "promote", everywhere, "--sprite", "box", "-n", namespace).stdout
    assert out.strip() == f"Sprite box: promoted {everywhere} (add_preinstall_step)"
    steps = stack.get(namespace, "sprites", "box")["spec"]["environment"]
    assert [s["name"] for s in steps] == [prepare, runtime, everywhere]

    # Promoted without --sprite: the cluster-wide Environment, which every Sprite's Runs get.
    try:
        _promoted_to_the_cluster_environment(stack, namespace, everywhere)
    finally:
        _delete_promoted(stack)


PROMOTER = f"{RELEASE}-lattice-operator-environment-promoter"
RBAC = "rbac.authorization.k8s.io"
READS_EVERYWHERE = ["sh", "-c", "test -f /workspace/env-everywhere && echo everywhere"]


def _delete_promoted(stack: Stack) -> None:
    """The cluster-wide objects this test made, gone for the next module (API deletes)."""
    rbac = stack.cluster.rbac
    deletes: tuple[Callable[[], object], ...] = (
        lambda: stack.cluster.custom.delete_cluster_custom_object(
            "lattice.dev", "v1alpha1", "environments", "default"
        ),
        lambda: rbac.delete_cluster_role_binding(f"carol-{PROMOTER}"),
        lambda: rbac.delete_cluster_role(PROMOTER),
    )
    for delete in deletes:
        try:
            delete()
        except ApiException as err:
            if err.status != 404:
                raise


def _promoted_to_the_cluster_environment(stack: Stack, namespace: str, everywhere: str) -> None:
    # Who may promote is RBAC on the Environment: a namespace's approver may not; the
    # chart's promoter ClusterRole, bound cluster-wide, may.
    bind_role(stack, namespace, "carol", APPROVER_ROLE)
    patch = json.dumps({"spec": {"steps": []}})
    assert lattice(stack, "env", "show").stdout == ""  # none yet
    out = lattice_in_process(stack, "env", "promote", everywhere, "-n", namespace).stdout
    assert out.strip() == f"Environment default: promoted {everywhere} (add_preinstall_step)"
    again = lattice_in_process(stack, "env", "promote", everywhere, "-n", namespace).stdout
    assert again.strip() == f"Environment default: step {everywhere} is there already"
    shown = lattice_in_process(stack, "env", "show").stdout.splitlines()
    assert shown == [f"{everywhere}\tadd_preinstall_step\ttouch /workspace/env-everywhere"]
    refused = kubectl_as(stack, "carol", "patch", "environment", "default", "--type=merge",
                         "-p", patch)  # fmt: skip
    assert refused.returncode != 0
    assert "forbidden" in refused.stderr.lower(), refused.stderr
    role = find(render(), "ClusterRole", PROMOTER)
    rbac = stack.cluster.rbac
    create_or_replace(
        lambda body: rbac.create_cluster_role(body),
        lambda: rbac.read_cluster_role(PROMOTER),
        lambda body: rbac.replace_cluster_role(PROMOTER, body),
        role,
    )
    binding: dict[str, Any] = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"carol-{PROMOTER}"},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": PROMOTER},
        "subjects": [{"apiGroup": RBAC, "kind": "User", "name": "carol"}],
    }
    create_or_replace(
        lambda body: rbac.create_cluster_role_binding(body),
        lambda: rbac.read_cluster_role_binding(binding["metadata"]["name"]),
        lambda body: rbac.replace_cluster_role_binding(binding["metadata"]["name"], body),
        binding,
    )
    dry = kubectl_as(stack, "carol", "patch", "environment", "default", "--type=merge",
                     "-p", patch, "--dry-run=server")  # fmt: skip
    assert dry.returncode == 0, dry.stderr

    # A Sprite with no environment of its own: its next Run runs the cluster-wide step first.
    stack.create(namespace, build("sprite.yaml", "plain", {"spec.networkPolicy": {"rules": []}}))
    stack.wait_sprite_ready(namespace, "plain")
    run_doc = build("run.yaml", "everywhere", {"spec.spriteRef.name": "plain"})
    run_doc["spec"]["command"] = READS_EVERYWHERE
    stack.create(namespace, run_doc)
    run = stack.wait_phase(namespace, "runs", "everywhere", {"Succeeded", "Failed"})
    assert run["status"]["phase"] == "Succeeded", run["status"]
    applied = run["status"]["environment"]
    assert (applied["state"], applied["clusterSteps"]) == ("Applied", [everywhere])
    assert [s["name"] for s in applied["steps"]] == [everywhere]
    assert run["status"]["logTail"] == ["everywhere"]

    # Its receipt, in the Run's sequence before the session's, names the cluster-wide step.
    def receipts() -> list[dict[str, Any]] | None:
        items = json.loads(
            stack.cluster.kubectl(
                "get", "events.events.k8s.io", "-n", namespace, "-o", "json",
                "-l", f"lattice.dev/run-uid={run['metadata']['uid']}",
            ).stdout
        )["items"]  # fmt: skip
        found = sorted(
            (json.loads(e["metadata"]["annotations"]["lattice.dev/receipt"]) for e in items),
            key=lambda r: r["sequence"],
        )
        return found if any(r["event"] == "session.ended" for r in found) else None

    first, second, *_ = wait_for(receipts, timeout=30, what="the Run's receipts")
    assert (first["event"], first["status"], first["sequence"]) == (
        "session.starting", "observed", 1,
    )  # fmt: skip
    assert first["telemetry_summary"]["transition"] == "environment_applied"
    assert first["telemetry_summary"]["cluster_steps"] == [everywhere]
    assert first["telemetry_summary"]["steps"] == []
    assert second["telemetry_summary"]["transition"] == "exec_starting"


def _exists(stack: Stack, namespace: str, plural: str, name: str) -> bool:
    from kubernetes.client import ApiException

    try:
        stack.get(namespace, plural, name)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


REFUSED_NOT_GRANTED = 'lattice_refused_actions_total{reason="not_granted"}'


@pytest.fixture(scope="module", autouse=True)
def metrics_at_start(stack: Stack) -> str:
    """The shared operator's metrics before this module's first test."""
    return _scrape(stack)


def _scrape(stack: Stack) -> str:
    return httpx.get(f"http://127.0.0.1:{stack.metrics_port}/metrics", trust_env=False).text


def _sample(text: str, series: str) -> float:
    """The value of `name{label="value",...}` in an exposition (0 when absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    name, _, rest = series.partition("{")
    labels = dict(re.findall(r'(\w+)="([^"]*)"', rest))
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and found.labels == labels:
                return float(found.value)
    return 0.0


def test_intent_metrics(stack: Stack, metrics_at_start: str) -> None:
    # Runs after the tests that produced every series below. The operator is shared with
    # other modules: each count grew during this module (the gauge, by phase, is present).
    text = _scrape(stack)
    assert 'lattice_intents{kind="sprite_task_exec",phase="Succeeded"}' in text
    assert 'lattice_intents{kind="environment_change",phase="Succeeded"}' in text
    for series in (
        'lattice_policy_decisions_total{outcome="allow",policy="team",rule="trusted-exec"}',
        'lattice_policy_decisions_total{outcome="deny",policy="team",rule="no-fileops"}',
        'lattice_approvals_total{outcome="approve"}',
        'lattice_approvals_total{outcome="reject"}',
        'lattice_approvals_total{outcome="unauthorized"}',
        "lattice_intent_awaiting_approval_seconds_count",
        REFUSED_NOT_GRANTED,
        'lattice_reconcile_total{kind="Intent",outcome="ok"}',
        'lattice_reconcile_duration_seconds_count{kind="Intent"}',
    ):
        assert series in text, series
        assert _sample(text, series) > _sample(metrics_at_start, series), series


# A hostile agent: given the secret, it echoes it everywhere it can, plain and encoded.
ECHOES_THE_SECRET = agent(
    r"""
import base64, urllib.parse
if os.path.exists("/workspace/.lattice/resume.json"):
    emit("INFO", {"message": "resumed"})  # the protocol: acknowledge the resume first
    inputs = json.load(open("/workspace/.lattice/resume.json"))["inputs"]
    value = open(inputs["path"]).read()
    forms = [value, base64.b64encode(value.encode()).decode(),
             urllib.parse.quote(value, safe=""), base64.urlsafe_b64encode(value.encode()).decode()]
    for form in forms:
        print("leaking " + form, flush=True)
        emit("INFO", {"message": "leak " + form, "metadata": {form: form}})
        emit("ARTIFACT", {"kind": "file", "name": form, "uri": "file:///" + form})
    emit("PHASE_STARTED", {"phase": value})
    emit("ACTION_REQUEST", {"action": "NOTIFY_USER", "parameters": {"message": "psst " + value},
                            "blocking": False})
    emit("INFO", {"message": "x" * 10, "sprite_id": value})
    emit("COMPLETED", {"status": "success", "summary": "done " + value,
                       "outputs": {"token": value}})
else:
    emit("ACTION_REQUEST", {"action": "FETCH_CREDENTIAL", "parameters": {"name": "gh"},
                            "blocking": True})
    emit("WAITING", {"reason": "CREDENTIAL", "checkpoint_id": checkpoint("before waiting"),
                     "expected_inputs": {"status": "string", "path": "string",
                                         "reason": "string"}})
"""
)


def test_a_secret_the_sprite_echoes_is_redacted_and_removed_at_the_end(
    stack: Stack, namespace: str
) -> None:
    import base64
    from urllib.parse import quote

    setup_namespace(stack, namespace)
    apply_secret(stack, namespace)
    stack.create(
        namespace,
        intent_doc(
            "echo",
            ["python3", "-c", ECHOES_THE_SECRET],
            trusted=True,
            allowedActions=["FETCH_CREDENTIAL", "NOTIFY_USER"],
            credentials=[{"name": "gh", "secretKeyRef": {"name": "tokens", "key": "gh"}}],
        ),
    )
    done = stack.wait_phase(namespace, "intents", "echo", {"Succeeded", "Failed"})
    assert done["status"]["phase"] == "Succeeded", done["status"]
    run = stack.get(namespace, "runs", "echo-run")
    assert run["status"]["events"]["completion"]["summary"] == "done [redacted]"
    assert any("leaking [redacted]" in line for line in run["status"]["logTail"])
    forms = {
        SECRET,
        base64.b64encode(SECRET.encode()).decode(),
        base64.b64encode(SECRET.encode()).decode().rstrip("="),
        quote(SECRET, safe=""),
    }
    for where, text in _written_by_the_operator(stack, namespace).items():
        for form in forms:
            assert form not in text, f"{form!r} leaked into the {where}"
    # The notification was sent, without the value.
    notes = stack.cluster.kubectl("get", "events.events.k8s.io", "-n", namespace, "-o", "json")
    assert "psst [redacted]" in notes.stdout

    # The credential file did not outlive the Run: a later Run on the Sprite finds nothing.
    stack.create(
        namespace,
        build(
            "run.yaml",
            "after",
            {
                "spec.command": ["sh", "-c", "test ! -e /dev/shm/lattice/credentials/gh"],
                "spec.spriteRef.name": "box",
            },
        ),
    )
    after = stack.wait_phase(namespace, "runs", "after", {"Succeeded", "Failed"})
    assert after["status"]["phase"] == "Succeeded", after["status"]


FETCHES_THEN_WORKS = agent(
    r"""
emit("ACTION_REQUEST", {"action": "FETCH_CREDENTIAL", "parameters": {"name": "gh"},
                        "blocking": False})
for _ in range(300):
    if os.path.exists("/dev/shm/lattice/credentials/gh"):
        break
    time.sleep(0.1)
emit("INFO", {"message": "got it, working"})
time.sleep(600)
"""
)


def test_a_delivered_credential_is_removed_when_the_run_is_canceled(
    stack: Stack, namespace: str
) -> None:
    setup_namespace(stack, namespace)
    apply_secret(stack, namespace)
    stack.create(
        namespace,
        intent_doc(
            "worker",
            ["python3", "-c", FETCHES_THEN_WORKS],
            trusted=True,
            allowedActions=["FETCH_CREDENTIAL"],
            credentials=[{"name": "gh", "secretKeyRef": {"name": "tokens", "key": "gh"}}],
        ),
    )
    sprite = str(stack.wait_sprite_ready(namespace, "box")["status"]["spriteName"])
    delivered = stack.sprites.host_shm(sprite) / "lattice" / "credentials" / "gh"

    def working() -> bool:
        run = stack.find(namespace, "runs", "worker-run")
        if run is None:  # not created yet
            return False
        return bool((run.get("status") or {}).get("events", {}).get("eventCount", 0) >= 2)

    wait_for(working, timeout=60, what="the agent got its credential and works")
    assert delivered.read_text() == SECRET
    lattice_in_process(stack, "cancel", "intent/worker", "-n", namespace)
    run = stack.wait_phase(namespace, "runs", "worker-run", {"Canceled", "Failed", "Succeeded"})
    assert run["status"]["phase"] == "Canceled", run["status"]
    assert not delivered.exists()


FETCHES_THEN_FAILS = agent(
    r"""
emit("ACTION_REQUEST", {"action": "FETCH_CREDENTIAL", "parameters": {"name": "gh"},
                        "blocking": False})
for _ in range(300):
    if os.path.exists("/dev/shm/lattice/credentials/gh"):
        break
    time.sleep(0.1)
value = open("/dev/shm/lattice/credentials/gh").read()
emit("INFO", {"message": "got it: %d bytes" % len(value)})
sys.exit(3)
"""
)


def test_a_delivered_credential_is_removed_when_the_run_fails(stack: Stack, namespace: str) -> None:
    setup_namespace(stack, namespace)
    apply_secret(stack, namespace)
    stack.create(
        namespace,
        intent_doc(
            "failing",
            ["python3", "-c", FETCHES_THEN_FAILS],
            trusted=True,
            allowedActions=["FETCH_CREDENTIAL"],
            credentials=[{"name": "gh", "secretKeyRef": {"name": "tokens", "key": "gh"}}],
        ),
    )
    sprite = str(stack.wait_sprite_ready(namespace, "box")["status"]["spriteName"])
    run = stack.wait_phase(namespace, "runs", "failing-run", {"Succeeded", "Failed"})
    assert run["status"]["phase"] == "Failed", run["status"]
    assert f"got it: {len(SECRET)} bytes" in json.dumps(run["status"]["events"])  # delivered
    assert not (stack.sprites.host_shm(sprite) / "lattice" / "credentials" / "gh").exists()
