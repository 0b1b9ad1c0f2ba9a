"""The samples and checks the node tests drive on both installations (cluster-wide in
tests/node/test_samples.py, in one namespace in tests/node/test_namespaced.py), and the stream
Service's viewer.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from lattice_devtools.localcluster.node import NodeCluster
from lattice_operator.forge.builders import triage_name
from tests.support.node_e2e import (
    LATTICE,
    RELEASE,
    SAMPLES,
    condition,
    get,
    http,
    service_url,
    wait_phase,
    wait_until,
)


def drive_the_agent_sample(node: NodeCluster, namespace: str) -> None:
    """The sample Sprite Ready; the sample agent Run through WAITING, resumed, Succeeded."""
    node.kubectl("-n", namespace, "apply", "-f", str(SAMPLES / "sprite.yaml"))
    wait_until(
        lambda: (
            (condition(get(node, "sprite", "sample", namespace), "Ready") or {}).get("status")
            == "True"
        ),
        "the sample Sprite Ready",
    )
    node.kubectl("-n", namespace, "apply", "-f", str(SAMPLES / "agent-run.yaml"))
    wait_phase(node, "run", "sample-agent", {"Waiting"}, namespace)
    waiting = get(node, "run", "sample-agent", namespace)["status"]["events"]["waiting"]
    resume = node.run(
        LATTICE, "resume", "sample-agent", "-n", namespace,
        "-i", "approved=true", "-i", 'comments=["ship it"]',
        check=False,
    )  # fmt: skip
    assert resume.returncode == 0, resume.stdout + resume.stderr + json.dumps(waiting)
    phase = wait_phase(node, "run", "sample-agent", {"Succeeded", "Failed", "Canceled"}, namespace)
    status = get(node, "run", "sample-agent", namespace)["status"]
    assert phase == "Succeeded", json.dumps(status)[-3000:]


def approve_the_gated_sample(node: NodeCluster, namespace: str) -> None:
    """The gated sample Intent waits for approval; `lattice approve` (through the chart's
    mutating webhook, its Service and the operator's certificate) lets it complete."""
    node.kubectl("-n", namespace, "apply", "-f", str(SAMPLES / "intentpolicy.yaml"))
    node.kubectl("apply", "-f", str(SAMPLES.parent / "rbac" / "lattice-approver.yaml"))
    node.kubectl("-n", namespace, "apply", "-f", str(SAMPLES / "intent-gated-task.yaml"))
    wait_phase(node, "intent", "gated-task", {"AwaitingApproval"}, namespace)
    out = node.run(
        LATTICE, "approve", "gated-task", "-n", namespace, "--reason", "node e2e", check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    phase = wait_phase(node, "intent", "gated-task", {"Succeeded", "Failed", "Canceled"}, namespace)
    status = get(node, "intent", "gated-task", namespace).get("status")
    assert phase == "Succeeded", json.dumps(status)[-3000:]


STREAM = f"{RELEASE}-lattice-operator-stream"


GITHUB = f"{RELEASE}-lattice-operator-github"


VIEWER = "stream-viewer"


def viewer_token(node: NodeCluster, namespace: str = "default") -> str:
    """A ServiceAccount that may get Intents, Runs and Sprites in `namespace`, and its token."""
    node.kubectl("-n", namespace, "create", "serviceaccount", VIEWER)
    node.kubectl(
        "-n", namespace, "create", "role", VIEWER, "--verb=get,list,watch",
        "--resource=intents.lattice.dev,runs.lattice.dev,sprites.lattice.dev",
    )  # fmt: skip
    node.kubectl(
        "-n", namespace, "create", "rolebinding", VIEWER, f"--role={VIEWER}",
        f"--serviceaccount={namespace}:{VIEWER}",
    )  # fmt: skip
    return node.kubectl("-n", namespace, "create", "token", VIEWER).stdout.strip()


def health_check_fires_and_keeps_its_history(node: NodeCluster, namespace: str) -> None:
    """A HealthCheck on the sample Sprite: a bad schedule refused by the chart's webhook; three
    firings pass; the history limit makes the operator delete older check Intents."""
    node.kubectl("-n", namespace, "apply", "-f", str(SAMPLES / "intentpolicy.yaml"))
    check = {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "HealthCheck",
        "metadata": {"name": "node-smoke", "namespace": namespace},
        "spec": {
            "schedule": "@every 5s",
            "successfulHistoryLimit": 1,
            "probe": {"spriteRef": {"name": "sample"}, "command": ["true"]},
        },
    }
    # Through the chart's webhook: a schedule the operator cannot parse is refused.
    bad = json.loads(json.dumps(check))
    bad["spec"]["schedule"] = "61 * * * *"
    refused = node.kubectl("create", "-f", "-", input=json.dumps(bad), check=False)
    assert refused.returncode != 0, refused.stdout
    assert "spec.schedule: not a cron expression" in refused.stderr, refused.stderr
    started = datetime.now(UTC)
    node.kubectl("apply", "-f", "-", input=json.dumps(check))

    def detects() -> list[dict[str, Any]]:
        listing = node.kube_json(
            "get", "intents", "-n", namespace, "-l", "lattice.dev/health-check=node-smoke"
        )
        return list(listing["items"])

    def passing_for_three_firings() -> bool:
        status = get(node, "healthcheck", "node-smoke", namespace).get("status", {})
        healthy = condition({"status": status}, "Healthy") or {}
        last = status.get("lastScheduleTime")
        return (
            healthy.get("status") == "True"
            and last is not None
            and datetime.fromisoformat(last) >= started + timedelta(seconds=10)
        )

    wait_until(passing_for_three_firings, "three firings, the check passing")
    # successfulHistoryLimit 1: the older passed check Intents were deleted by the operator.
    wait_until(
        lambda: sum(i.get("status", {}).get("phase") == "Succeeded" for i in detects()) <= 1,
        "old check Intents deleted",
    )
    node.kubectl("delete", "healthcheck", "node-smoke", "-n", namespace, "--wait=true")


def github_repository_reports_its_secret(
    node: NodeCluster, namespace: str, deliver: bool = False
) -> None:
    """The sample GitHubRepository, its webhook Secret missing: Ready False naming the Secret;
    once the Secret exists and the spec changes, Ready True. `deliver`: then a webhook
    delivery through the github Service, signed with that Secret, creates the triage Intent;
    a wrongly signed one is refused."""
    node.kubectl("-n", namespace, "apply", "-f", str(SAMPLES / "githubrepository.yaml"))

    def ready_reason() -> str | None:
        status = get(node, "githubrepository", "sample-app", namespace).get("status", {})
        ready = condition({"status": status}, "Ready") or {}
        return ready.get("reason")

    wait_until(lambda: ready_reason() == "SecretMissing", "Ready False: the Secret is missing")
    node.kubectl(
        "-n", namespace, "create", "secret", "generic", "github-webhook",
        "--from-literal=secret=node-e2e",
    )  # fmt: skip
    node.kubectl(
        "-n", namespace, "patch", "githubrepository", "sample-app", "--type=merge",
        "-p", json.dumps({"spec": {"baseBranch": "trunk"}}),
    )  # fmt: skip
    wait_until(lambda: ready_reason() == "SecretReadable", "Ready True: the Secret is readable")
    if deliver:
        deliver_an_opened_issue(node, namespace)
    node.kubectl("-n", namespace, "delete", "githubrepository", "sample-app", "--wait=true")


def deliver_an_opened_issue(node: NodeCluster, namespace: str) -> None:
    payload = json.dumps(
        {
            "action": "opened",
            "repository": {"full_name": "example/app"},
            "sender": {"login": "octocat", "type": "User"},
            "issue": {"number": 7, "title": "Node e2e", "body": "from the node test",
                      "user": {"login": "octocat"}, "labels": []},
        }
    )  # fmt: skip
    signature = "sha256=" + hmac.new(b"node-e2e", payload.encode(), hashlib.sha256).hexdigest()
    url = f"{service_url(node, GITHUB)}/github/{namespace}/sample-app"
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": "node-e2e-1",
    }
    status, _, text = http(
        node, url, method="POST", body=payload,
        headers={**headers, "X-Hub-Signature-256": "sha256=" + "0" * 64},
    )  # fmt: skip
    assert status == 401, text  # nothing done
    name = triage_name("example/app", 7)
    assert not get(node, "intent", name, namespace)
    status, _, text = http(
        node,
        url,
        method="POST",
        body=payload,
        headers={**headers, "X-Hub-Signature-256": signature},
    )
    assert status == 201, text
    assert json.loads(text) == {"outcome": "created", "detail": name}
    intent = get(node, "intent", name, namespace)
    assert intent["spec"]["kind"] == "issue_triage"
    assert intent["spec"]["params"]["issueTriage"]["issueNumber"] == 7
    node.kubectl("-n", namespace, "delete", "intent", name, "--wait=true")
