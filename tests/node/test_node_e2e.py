"""End to end on a real node: the image `make image` builds, imported into the node's
containerd, installed with the Helm chart, drives the samples to completion.

Opt-in (`make node-test`, marker `node`): it starts a whole single-node cluster in a network
namespace of its own, which needs root and takes minutes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.node_cluster import NODE_IP, NodeCluster, node_cluster
from tests.support.node_image import OciArchive

pytestmark = pytest.mark.node

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "lattice-operator"
SAMPLES = ROOT / "manifests" / "samples"
RELEASE, NAMESPACE = "lattice", "lattice-system"
IMAGE_REPO = "lattice.invalid/lattice-operator"
SPRITES_PORT = 8480
SPRITES_TOKEN = "node-test-token"
TIMINGS: dict[str, float] = {}


def wait_until(predicate: Any, what: str, timeout: float = 300) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeCluster]:
    started = time.monotonic()
    with node_cluster(tmp_path_factory.mktemp("node"), audit_log=True) as cluster:
        TIMINGS["node start"] = time.monotonic() - started
        yield cluster
    print(f"\nnode e2e timings (s): {json.dumps({k: round(v, 1) for k, v in TIMINGS.items()})}")


@pytest.fixture(scope="module")
def sprites(node: NodeCluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The local Sprites server, a process inside the node's network namespace."""
    state = tmp_path_factory.mktemp("sprites")
    node.spawn(
        "sprites-local",
        [
            str(ROOT / ".venv" / "bin" / "lattice"),
            "sprites-local",
            "--host",
            NODE_IP,
            "--port",
            str(SPRITES_PORT),
            "--state-dir",
            str(state),
            "--ready-file",
            str(state / "ready.json"),
        ],
        env={"SPRITES_LOCAL_TOKEN": SPRITES_TOKEN},
    )
    wait_until(lambda: (state / "ready.json").exists(), "the local Sprites server", 60)
    return f"http://{NODE_IP}:{SPRITES_PORT}"


def operator_pods(node: NodeCluster) -> list[dict[str, Any]]:
    pods = node.kube_json(
        "-n", NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/name=lattice-operator"
    )
    return [p for p in pods["items"] if p["metadata"].get("deletionTimestamp") is None]


def ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@pytest.fixture(scope="module")
def installed(node: NodeCluster, sprites: str, image: OciArchive) -> NodeCluster:
    node.import_image(image.path, f"{IMAGE_REPO}:0.1.0")
    node.kubectl("create", "namespace", NAMESPACE)
    node.kubectl(
        "-n", NAMESPACE, "create", "secret", "generic", "sprites",
        f"--from-literal=token={SPRITES_TOKEN}",
    )  # fmt: skip
    started = time.monotonic()
    node.helm(
        "install", RELEASE, str(CHART), "--namespace", NAMESPACE,
        "--set", f"image.repository={IMAGE_REPO}",
        "--set", f"sprites.apiUrl={sprites}",
        "--set", "sprites.tokenSecret=sprites",
        "--set", f"networkPolicy.spritesPorts={{{SPRITES_PORT}}}",
    )  # fmt: skip
    wait_until(
        lambda: len([p for p in operator_pods(node) if ready(p)]) == 2,
        "both operator Pods Ready",
    )
    TIMINGS["helm install -> 2 operator Pods Ready"] = time.monotonic() - started
    return node


def get(node: NodeCluster, kind: str, name: str, namespace: str = "default") -> Any:
    out = node.kubectl("-n", namespace, "get", kind, name, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else {}


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in obj.get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return dict(c)
    return None


def test_both_operator_pods_run_as_the_image_with_one_active(installed: NodeCluster) -> None:
    pods = operator_pods(installed)
    assert len(pods) == 2
    for pod in pods:
        (status,) = pod["status"]["containerStatuses"]
        assert status["image"].endswith(f"{IMAGE_REPO}:0.1.0")
        assert status["ready"] is True
    peering = installed.kube_json("get", "clusterkopfpeering", f"{RELEASE}-lattice-operator")
    peers = peering.get("status", {})
    priorities = sorted(p.get("priority") for p in peers.values() if isinstance(p, dict))
    assert priorities == [0, 1], peers  # distinct: only the highest (Pod index 1) works


def test_helm_test_reaches_the_webhook_over_tls(installed: NodeCluster) -> None:
    out = installed.helm("test", RELEASE, "--namespace", NAMESPACE, "--logs", check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "webhook answers with TLS" in out.stdout


def test_operator_logs_are_readable_through_the_api(installed: NodeCluster) -> None:
    pod = operator_pods(installed)[0]["metadata"]["name"]
    out = installed.kubectl("-n", NAMESPACE, "logs", pod)
    assert out.stdout.strip()


def test_samples_complete_on_the_node(installed: NodeCluster) -> None:
    node = installed
    node.kubectl("apply", "-f", str(SAMPLES / "sprite.yaml"))
    wait_until(
        lambda: (condition(get(node, "sprite", "sample"), "Ready") or {}).get("status") == "True",
        "the sample Sprite Ready",
    )
    started = time.monotonic()
    node.kubectl("apply", "-f", str(SAMPLES / "agent-run.yaml"))
    wait_until(
        lambda: get(node, "run", "sample-agent").get("status", {}).get("phase") == "Waiting",
        "the sample agent Waiting",
    )
    waiting = get(node, "run", "sample-agent")["status"]["events"]["waiting"]
    resume = node.run(
        str(ROOT / ".venv" / "bin" / "lattice"), "resume", "sample-agent",
        "-i", "approved=true", "-i", 'comments=["ship it"]',
        check=False,
    )  # fmt: skip
    assert resume.returncode == 0, resume.stdout + resume.stderr + json.dumps(waiting)
    phase = wait_until(
        lambda: (
            (
                get(node, "run", "sample-agent").get("status", {}).get("phase")
                in {"Succeeded", "Failed", "Canceled"}
            )
            and get(node, "run", "sample-agent")["status"]["phase"]
        ),
        "the sample agent to finish",
    )
    TIMINGS["agent Run (with resume)"] = time.monotonic() - started
    assert phase == "Succeeded", json.dumps(get(node, "run", "sample-agent")["status"])[-3000:]


def phase_of(node: NodeCluster, kind: str, name: str) -> str:
    return str(get(node, kind, name).get("status", {}).get("phase") or "")


def wait_phase(node: NodeCluster, kind: str, name: str, phases: set[str]) -> str:
    return str(
        wait_until(
            lambda: phase_of(node, kind, name) in phases and phase_of(node, kind, name),
            f"{kind} {name} in {sorted(phases)}",
        )
    )


def test_gated_intent_is_approved_through_the_chart_webhook(installed: NodeCluster) -> None:
    node = installed
    node.kubectl("apply", "-f", str(SAMPLES / "intentpolicy.yaml"))
    node.kubectl("apply", "-f", str(SAMPLES.parent / "rbac" / "lattice-approver.yaml"))
    node.kubectl("apply", "-f", str(SAMPLES / "intent-gated-task.yaml"))
    wait_phase(node, "intent", "gated-task", {"AwaitingApproval"})
    # `lattice approve` writes an approval annotation: the mutating webhook served by the
    # operator Pods behind the chart's Service (TLS from the chart's CA) must stamp it.
    out = node.run(
        str(ROOT / ".venv" / "bin" / "lattice"), "approve", "gated-task", "--reason", "node e2e",
        check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    phase = wait_phase(node, "intent", "gated-task", {"Succeeded", "Failed", "Canceled"})
    assert phase == "Succeeded", json.dumps(get(node, "intent", "gated-task")["status"])[-3000:]


def test_a_health_check_fires_on_schedule_and_keeps_its_history(installed: NodeCluster) -> None:
    node = installed
    node.kubectl("apply", "-f", str(SAMPLES / "intentpolicy.yaml"))  # health_detect: allow
    check = {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "HealthCheck",
        "metadata": {"name": "node-smoke", "namespace": "default"},
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
            "get", "intents", "-n", "default", "-l", "lattice.dev/health-check=node-smoke"
        )
        return list(listing["items"])

    def passing_for_three_firings() -> bool:
        status = get(node, "healthcheck", "node-smoke").get("status", {})
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
    node.kubectl("delete", "healthcheck", "node-smoke", "-n", "default", "--wait=true")


# Counts its own executions in the Sprite: a second exec of the same attempt would print 2.
COUNTING_COMMAND = (
    "n=$(($(cat /workspace/execs-$RUN 2>/dev/null || echo 0)+1)); echo $n > /workspace/execs-$RUN; "
    "echo execs=$n; sleep 12; echo done"
)


def counting_run(node: NodeCluster, name: str) -> None:
    run = {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Run",
        "metadata": {"name": name},
        "spec": {
            "spriteRef": {"name": "sample"},
            "command": ["sh", "-c", COUNTING_COMMAND],
            "env": [{"name": "RUN", "value": name}],
            "timeoutSeconds": 600,
        },
    }
    node.kubectl("apply", "-f", "-", input=json.dumps(run))
    wait_phase(node, "run", name, {"Running"})


def assert_ran_once(node: NodeCluster, name: str) -> None:
    phase = wait_phase(node, "run", name, {"Succeeded", "Failed", "Canceled"})
    status = get(node, "run", name)["status"]
    assert phase == "Succeeded", json.dumps(status)[-3000:]
    assert len(status["attempts"]) == 1, status["attempts"]
    assert "execs=1" in status["logTail"], status["logTail"]
    assert "done" in status["logTail"], status["logTail"]


def resumes(node: NodeCluster, pod: str) -> int:
    out = node.kubectl("-n", NAMESPACE, "logs", pod, check=False)
    return out.stdout.count("Resuming operations after the pause")


def test_helm_upgrade_rolls_the_pods_while_a_run_completes(installed: NodeCluster) -> None:
    node = installed
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in operator_pods(node)}
    counting_run(node, "upgrade-run")
    node.helm(
        "upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "--reuse-values",
        "--set", "verbose=true",
    )  # fmt: skip
    wait_until(
        lambda: (
            all(
                ready(p) and p["metadata"]["uid"] != before.get(p["metadata"]["name"])
                for p in operator_pods(node)
            )
            and len(operator_pods(node)) == 2
        ),
        "both operator Pods replaced and Ready",
    )
    for pod in operator_pods(node):
        assert "--verbose" in pod["spec"]["containers"][0]["args"]
    assert_ran_once(node, "upgrade-run")


def test_deleting_the_active_pod_hands_over_to_the_standby(installed: NodeCluster) -> None:
    node = installed
    standby, active = "lattice-lattice-operator-0", "lattice-lattice-operator-1"
    counting_run(node, "failover-run")
    failovers: list[float] = []
    for round_ in range(5):
        wait_until(lambda: len([p for p in operator_pods(node) if ready(p)]) == 2, "2 Ready")
        seen = resumes(node, standby)
        started = time.monotonic()
        node.kubectl("-n", NAMESPACE, "delete", "pod", active, "--wait=false")
        wait_until(lambda: resumes(node, standby) > seen, "the standby to resume", 120)  # noqa: B023
        failovers.append(time.monotonic() - started)
        if round_ == 0:
            assert_ran_once(node, "failover-run")
    failovers.sort()
    TIMINGS["failover p50 (5 rounds)"] = failovers[len(failovers) // 2]
    TIMINGS["failover max"] = failovers[-1]


# Grants the operator holds that this test run does not exercise, each with its reason.
UNEXERCISED_GRANTS: dict[tuple[str, str, str], str] = {
    ("", "events", "create"): "kopf posts a handler's errors and warnings as core Events; "
    "a clean run has none",
    ("lattice.dev", "sprites", "create"): "sprite_create Intents create Sprites; "
    "the samples here do not use that kind",
    ("lattice.dev", "runs", "delete"): "retention deletes finished Runs after "
    "ttlSecondsAfterFinished or past the history limit; no Run here lives that long",
    ("lattice.dev", "intents", "get"): "an Intent decided on an outdated spec is read again; "
    "only a conflicting write reaches it",
}


def _granted(node: NodeCluster) -> set[tuple[str, str, str]]:
    role = node.kube_json("get", "clusterrole", f"{RELEASE}-lattice-operator")
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule.get("verbs", [])
    }


def test_audit_log_shows_every_operator_request_allowed_and_every_grant_used(
    installed: NodeCluster,
) -> None:
    node = installed
    user = f"system:serviceaccount:{NAMESPACE}:{RELEASE}-lattice-operator"
    used: set[tuple[str, str, str]] = set()
    denied: set[tuple[str, str, str]] = set()
    for line in (node.state / "audit.log").read_text().splitlines():
        event = json.loads(line)
        if (
            event.get("user", {}).get("username") != user
            or event.get("stage") != "ResponseComplete"
        ):
            continue
        ref = event.get("objectRef") or {}
        if not ref.get("resource"):
            continue  # discovery (nonResourceURLs), allowed to every authenticated user
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        used.add((ref.get("apiGroup", ""), resource, event["verb"]))
        decision = event.get("annotations", {}).get("authorization.k8s.io/decision")
        if decision != "allow":
            denied.add((ref.get("apiGroup", ""), resource, event["verb"]))
    assert used, "no request of the operator's ServiceAccount in the audit log"
    assert not denied, f"refused: {sorted(denied)}"
    granted = _granted(node)
    assert set(UNEXERCISED_GRANTS) <= granted, "an exception names a grant the chart dropped"
    never = granted - used - set(UNEXERCISED_GRANTS)
    assert not never, f"granted but never used: {sorted(never)}; used: {sorted(used)}"


def test_a_missing_token_secret_leaves_the_operator_running(installed: NodeCluster) -> None:
    node = installed
    before = {p["metadata"]["uid"] for p in operator_pods(node)}
    node.helm(
        "upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "--reuse-values",
        "--set", "sprites.tokenSecret=no-such-secret",
    )  # fmt: skip
    assert "no-such-secret" in get_settings(node)

    def rolled_and_ready() -> bool:
        pods = operator_pods(node)
        return len(pods) == 2 and all(ready(p) and p["metadata"]["uid"] not in before for p in pods)

    wait_until(rolled_and_ready, "both operator Pods Ready without the token Secret", 150)
    sprite = {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Sprite",
        "metadata": {"name": "no-token"},
        "spec": {},
    }
    node.kubectl("apply", "-f", "-", input=json.dumps(sprite))
    cond = wait_until(
        lambda: condition(get(node, "sprite", "no-token"), "Ready"), "the Sprite's Ready"
    )
    assert cond["status"] != "True"
    assert cond["reason"]
    # The operator answered the new Sprite, so it runs; none of its containers restarted.
    for pod in operator_pods(node):
        (status,) = pod["status"]["containerStatuses"]
        assert status["restartCount"] == 0, status
        assert status["ready"] is True


def get_settings(node: NodeCluster) -> str:
    cm = get(node, "configmap", f"{RELEASE}-lattice-operator", NAMESPACE)
    return str(cm.get("data", {}).get("settings.yaml", ""))


def test_helm_uninstall_keeps_crds_and_custom_resources(installed: NodeCluster) -> None:
    node = installed
    node.helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait")
    left = node.kubectl(
        "-n", NAMESPACE, "get", "statefulset,service,configmap,secret,serviceaccount",
        "-l", "app.kubernetes.io/instance=lattice", "-o", "name",
    )  # fmt: skip
    assert left.stdout.strip() == ""
    crds = node.kubectl("get", "crd", "-o", "name").stdout
    assert "sprites.lattice.dev" in crds
    assert get(node, "sprite", "sample"), "the Sprite must outlive the chart"
    assert get(node, "run", "sample-agent"), "the Run must outlive the chart"
