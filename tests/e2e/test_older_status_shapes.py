"""An upgraded operator reading objects an earlier release wrote, in that release's status shape.

The CRD schemas have only grown, so the API server keeps serving such objects as they were
written (fields since removed are pruned; fields added since are absent). The new operator
must take them up without a crash loop: a Run that was running (status of 17b23fd: a
`sessionId` but no `spriteName`, the old `cursor` with `receiptSequence`), a Run that had
finished, and an Intent with an approval recorded before approvals named the spec they were
given for (2f25029: no `specDigest`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import Cluster, wait_for
from tests.support.sprites_server import LocalSprites
from tests.support.stack import Stack, operator_stack

pytestmark = pytest.mark.e2e

SAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "samples"
T0 = "2026-11-20T10:00:00Z"
T1 = "2026-11-20T10:00:05Z"


def _condition(type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": T0,
    }


def _run(name: str, command: str) -> dict[str, Any]:
    return {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Run",
        "metadata": {"name": name},
        "spec": {"spriteRef": {"name": "legacy"}, "command": ["sh", "-c", command]},
    }


# The status a Run had while its session ran, as release 17b23fd wrote it.
RUNNING_1 = {
    "phase": "Running",
    "observedGeneration": 1,
    "startTime": T0,
    "sessionId": "session-of-a-gone-operator",
    "cursor": {"outboxOffset": 0, "eventCount": 0, "receiptSequence": 3},
    "attempts": [{"number": 1, "sessionId": "session-of-a-gone-operator", "startTime": T0}],
    "conditions": [
        _condition("Succeeded", "Unknown", "Running", "session session-of-a-gone-operator")
    ],
}

# A Run that had finished, in the same shape.
SUCCEEDED_1 = {
    "phase": "Succeeded",
    "observedGeneration": 1,
    "startTime": T0,
    "completionTime": T1,
    "sessionId": "an-old-session",
    "cursor": {"outboxOffset": 120, "eventCount": 2, "lastDigest": "ab" * 8, "receiptSequence": 5},
    "attempts": [
        {
            "number": 1,
            "sessionId": "an-old-session",
            "startTime": T0,
            "completionTime": T1,
            "exitCode": 0,
            "outcome": "Succeeded",
        }
    ],
    "conditions": [_condition("Succeeded", "True", "Succeeded", "exit code 0")],
}

# An Intent waiting for approval, approved by alice before approvals carried specDigest: the
# webhook's record (annotation) and its copy in status.
APPROVAL_2 = {"user": "alice", "decision": "approve", "reason": "looks fine", "time": T1}
AWAITING_2 = {
    "phase": "AwaitingApproval",
    "observedGeneration": 1,
    "awaitingSince": T0,
    "approvals": [APPROVAL_2],
    "conditions": [
        _condition("Classified", "True", "PolicyDefault", "no rule matched: controlled"),
        _condition("Approved", "Unknown", "AwaitingApproval", "0/1 approvals"),
    ],
}


def _write_status(cluster: Cluster, namespace: str, kind: str, name: str, status: Any) -> None:
    cluster.kubectl(
        "-n", namespace, "patch", kind, name, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip


def _stop_operator(own: Stack) -> None:
    """The old release is gone: its webhooks with it (they would refuse every write)."""
    own.operator.stop()
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        own.cluster.kubectl("delete", kind, "lattice.dev", "--ignore-not-found", check=False)


def test_runs_and_intents_in_an_older_status_shape_are_taken_up(
    cluster: Cluster, namespace: str, local_sprites: LocalSprites, tmp_path: Path
) -> None:
    with operator_stack(cluster, local_sprites, tmp_path, "--namespace", namespace) as own:
        own.apply(namespace, {
            "apiVersion": "lattice.dev/v1alpha1", "kind": "Sprite",
            "metadata": {"name": "legacy"}, "spec": {},
        })  # fmt: skip
        own.wait_sprite_ready(namespace, "legacy")
        _stop_operator(own)

        own.apply(namespace, _run("legacy-running", "echo never-started-here"))
        _write_status(cluster, namespace, "run", "legacy-running", RUNNING_1)
        own.apply(namespace, _run("legacy-done", "echo done"))
        _write_status(cluster, namespace, "run", "legacy-done", SUCCEEDED_1)
        cluster.kubectl("-n", namespace, "apply", "-f", str(SAMPLES / "intentpolicy.yaml"))
        own.apply(namespace, _gated_intent())
        _write_status(cluster, namespace, "intent", "legacy-gated", AWAITING_2)
        stored = own.get(namespace, "runs", "legacy-running")["status"]
        assert "spriteName" not in stored
        assert "receiptSequence" not in stored["cursor"]  # pruned: the CRD has it no more

        own.start()  # the new release
        # The running Run's session is gone with the old operator: the Run ends, it does
        # not sit in Running with its driver failing again and again.
        ended = own.wait_phase(
            namespace, "runs", "legacy-running", {"Succeeded", "Failed"}, timeout=120
        )
        assert ended["status"]["spriteName"], ended["status"]
        done = own.get(namespace, "runs", "legacy-done")
        assert done["status"]["phase"] == "Succeeded"
        assert done["status"]["attempts"] == SUCCEEDED_1["attempts"]

        seen: list[Any] = []

        def reset() -> dict[str, Any] | None:
            status = own.get(namespace, "intents", "legacy-gated").get("status") or {}
            seen[:] = [status]
            for cond in status.get("conditions") or []:
                if cond["type"] == "Approved" and "alice: those approvals were reset" in cond.get(
                    "message", ""
                ):
                    return status
            return None

        try:
            status = wait_for(reset, timeout=60, what="the digest-less approval counted stale")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the Intent's status: {seen}") from None
        assert status["phase"] == "AwaitingApproval", status
        assert "runRef" not in status  # nothing ran on an approval of an unknown spec

        # And the new operator works: a new Run on the same Sprite completes.
        own.apply(namespace, _run("after-upgrade", "echo fine"))
        after = own.wait_phase(namespace, "runs", "after-upgrade", {"Succeeded", "Failed"})
        assert after["status"]["phase"] == "Succeeded", after["status"]
        log = own.operator.log()
        assert own.operator.alive(), log[-5000:]
        assert "Traceback" not in log, log[-8000:]


def _gated_intent() -> dict[str, Any]:
    return {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Intent",
        "metadata": {
            "name": "legacy-gated",
            "annotations": {"approval.lattice.dev/records": json.dumps([APPROVAL_2])},
        },
        "spec": {
            "kind": "sprite_task_exec",
            "summary": "An Intent from before approvals named their spec",
            "proposedBy": {"type": "user", "name": "alice"},
            "subject": {"type": "sprite", "ref": "legacy"},
            "params": {
                "spriteTaskExec": {
                    "spriteRef": {"name": "legacy"},
                    "command": ["sh", "-c", "echo gated"],
                }
            },
            "allowedActions": ["NOTIFY_USER", "FETCH_CREDENTIAL"],
        },
    }
