"""Two operator processes against one cluster: only the holder of the leader Lease
reconciles; a standby serves admission and nothing else; kill -9 the leader and the standby
takes over within the Lease's duration, finishing the Run in flight exactly once; a clean
stop hands the Lease over at once; a leader that loses its Lease exits; the leader label
follows the Lease from Pod to Pod."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from lattice_devtools.localcluster.controlplane import free_port
from lattice_operator.leadership import JITTER
from tests.support.admission_cases import build
from tests.support.cluster import Cluster, wait_for
from tests.support.operator import (
    OperatorProcess,
    remove_webhook_configurations,
    spawn_operator,
)
from tests.support.sprites_server import LocalSprites
from tests.support.stack import FAST_SETTINGS, wait_webhooks_served

pytestmark = pytest.mark.e2e

LEASE = "lattice-e2e"
TIMINGS = {"lease_duration": 4.0, "renew_deadline": 3.0, "retry_period": 0.5}
# The standby takes over once the record has not changed for lease_duration on its clock:
# at most one retry period (jittered) after the leader's last renewal, plus its own period.
TAKEOVER_BOUND = TIMINGS["lease_duration"] + 2 * TIMINGS["retry_period"] * (1 + JITTER) + 1.0

# Counts its own executions in the Sprite: a second exec of the same attempt would print 2.
COUNTING = (
    "n=$(($(cat /workspace/execs-$RUN 2>/dev/null || echo 0)+1)); echo $n > /workspace/execs-$RUN; "
    "echo execs=$n; sleep 8; echo done"
)


class Replica:
    def __init__(self, name: str, op: OperatorProcess, metrics_port: int) -> None:
        self.name, self.op, self.metrics_port = name, op, metrics_port

    def leader_gauge(self) -> float | None:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2) as r:
                text = r.read().decode()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith("lattice_leader "):
                return float(line.split()[1])
        return None


@pytest.fixture
def replicas(
    cluster: Cluster, namespace: str, local_sprites: LocalSprites, tmp_path: Path
) -> Iterator[Any]:
    started: list[Replica] = []

    def start(name: str, **election: Any) -> Replica:
        port = free_port()
        settings = {
            **FAST_SETTINGS,
            "metrics_port": port,
            "leader_election": {
                "lease_name": LEASE,
                "lease_namespace": namespace,
                **TIMINGS,
                **election,
            },
        }
        config = tmp_path / f"{name}.yaml"
        config.write_text(yaml.safe_dump(settings))
        env = {
            "SPRITES_TOKEN": local_sprites.token,
            "SPRITES_API_URL": local_sprites.base_url,
            "POD_NAME": name,
        }
        op = spawn_operator(
            cluster.kubeconfig,
            tmp_path,
            "--config",
            str(config),
            "--namespace",
            namespace,
            env=env,
            standalone=False,
        )
        replica = Replica(name, op, port)
        started.append(replica)
        # Live comes before the webhooks are registered (the admission policies first, since
        # issue 30): a write at once could meet none (a bad IntentPolicy admitted, once).
        wait_webhooks_served(cluster)
        return replica

    yield start
    for replica in started:
        replica.op.stop()
    remove_webhook_configurations(cluster)


# Reads go through the API client, not kubectl: the waits below poll every 0.05-0.1 s, and a
# kubectl process per poll was CPU taken from the operators under test.
GROUPS = {"leases": ("coordination.k8s.io", "v1"), "runs": ("lattice.dev", "v1alpha1")}
GROUPS["sprites"] = GROUPS["runs"]


def _read(cluster: Cluster, namespace: str, plural: str, name: str) -> dict[str, Any]:
    group, version = GROUPS[plural]
    try:
        found = cast(
            dict[str, Any],
            cluster.custom.get_namespaced_custom_object(group, version, namespace, plural, name),
        )
    except ApiException as err:
        if err.status == 404:
            return {}
        raise
    return found


def lease(cluster: Cluster, namespace: str) -> dict[str, Any]:
    return dict(_read(cluster, namespace, "leases", LEASE).get("spec") or {})


def holder(cluster: Cluster, namespace: str) -> str:
    return str(lease(cluster, namespace).get("holderIdentity") or "")


def wait_holder(cluster: Cluster, namespace: str, name: str, timeout: float = 30) -> float:
    started = time.monotonic()
    wait_for(
        lambda: holder(cluster, namespace) == name,
        timeout=timeout,
        interval=0.05,
        what=f"{name} to hold the Lease",
    )
    return time.monotonic() - started


def apply(cluster: Cluster, namespace: str, doc: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))


def get(cluster: Cluster, namespace: str, plural: str, name: str) -> dict[str, Any]:
    return _read(cluster, namespace, plural, name)


def phase(cluster: Cluster, namespace: str, plural: str, name: str) -> str:
    return str(get(cluster, namespace, plural, name).get("status", {}).get("phase") or "")


def sprite_ready(cluster: Cluster, namespace: str, name: str) -> bool:
    conditions = get(cluster, namespace, "sprites", name).get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def receipts(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    """The Events posted about one object (receipts and notices)."""
    out = cluster.kubectl("-n", namespace, "get", "events.events.k8s.io", "-o", "json")
    return [e for e in json.loads(out.stdout)["items"] if e["regarding"]["name"] == name]


def event_time(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00"))


def test_only_the_holder_reconciles_and_a_standby_takes_over_after_a_crash(
    replicas: Any, cluster: Cluster, namespace: str, local_sprites: LocalSprites
) -> None:
    a = replicas("op-a")
    wait_holder(cluster, namespace, "op-a")
    b = replicas("op-b")
    wait_for(lambda: a.leader_gauge() == 1.0, what="op-a's lattice_leader 1")
    assert b.leader_gauge() == 0.0

    apply(cluster, namespace, build("sprite.yaml", "box", {"spec.networkPolicy": {"rules": []}}))
    wait_for(lambda: sprite_ready(cluster, namespace, "box"), timeout=60, what="Sprite Ready")
    run = build("run.yaml", "flight", {"spec.command": ["sh", "-c", COUNTING]})
    run["spec"].update({"spriteRef": {"name": "box"}, "env": [{"name": "RUN", "value": "f"}]})
    run["spec"].pop("retries", None)
    apply(cluster, namespace, run)
    wait_for(lambda: phase(cluster, namespace, "runs", "flight") == "Running", timeout=60)
    before = receipts(cluster, namespace, "flight")
    assert before
    assert {e.get("reportingInstance") for e in before} == {"op-a"}
    assert holder(cluster, namespace) == "op-a"

    killed_at = datetime.now(UTC)
    a.op.kill()
    takeover = wait_holder(cluster, namespace, "op-b", timeout=30)
    assert takeover < TAKEOVER_BOUND, f"took {takeover:.1f}s, more than {TAKEOVER_BOUND}s"
    assert lease(cluster, namespace)["leaseTransitions"] == 1
    wait_for(lambda: b.leader_gauge() == 1.0, what="op-b's lattice_leader 1")

    wait_for(
        lambda: phase(cluster, namespace, "runs", "flight") in {"Succeeded", "Failed"},
        timeout=90,
        what="the Run in flight to finish",
    )
    status = get(cluster, namespace, "runs", "flight")["status"]
    assert status["phase"] == "Succeeded", json.dumps(status)[-2000:]
    assert len(status["attempts"]) == 1, status["attempts"]
    # Once, by the command's own count in the Sprite. (Not "execs=1" in the log tail: op-a
    # may be killed before it stored that line, and the scrollback op-b attaches to is not
    # added to the tail; found by make soak, a test that assumed timing.)
    backend = get(cluster, namespace, "sprites", "box")["status"]["spriteName"]
    assert (local_sprites.host_root(backend) / "execs-f").read_text() == "1\n"
    assert "done" in status["logTail"], status["logTail"]
    after = receipts(cluster, namespace, "flight")
    instances = {e.get("reportingInstance") for e in after}
    assert instances == {"op-a", "op-b"}, instances
    # Never both at once: everything op-b posted came after op-a was killed.
    assert all(event_time(e) >= killed_at for e in after if e["reportingInstance"] == "op-b")
    assert b.op.alive()


def test_a_standby_reconciles_nothing_but_serves_admission(
    replicas: Any, cluster: Cluster, namespace: str
) -> None:
    """While another holds the Lease, a replica writes nothing to our objects; it answers
    the admission webhooks all the same; when the Lease runs out, it takes over."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    held = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": LEASE, "namespace": namespace},
        "spec": {
            "holderIdentity": "someone-else",
            "leaseDurationSeconds": 4,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        },
    }
    apply(cluster, namespace, held)
    renewing = threading.Event()
    renewing.set()

    def renew() -> None:  # the other holder, alive: renews every second
        while renewing.is_set():
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            patch = {"spec": {"renewTime": stamp}}
            cluster.kubectl(
                "-n", namespace, "patch", "lease", LEASE, "--type=merge", "-p", json.dumps(patch),
                check=False,
            )  # fmt: skip
            time.sleep(1)

    renewer = threading.Thread(target=renew, daemon=True)
    renewer.start()
    try:
        b = replicas("op-b")
        apply(cluster, namespace, build("sprite.yaml", "idle", {}))
        # One the leader reconciled already: its finalizer must stay (kopf removes its
        # finalizer from objects it has no deletion handler for).
        owned = build("sprite.yaml", "owned", {})
        owned["metadata"]["finalizers"] = ["lattice.dev/finalizer"]
        apply(cluster, namespace, owned)
        bad = build("intentpolicy.yaml", "bad", {})
        bad["spec"]["rules"][0]["match"] = "intent.spec.kind + 1"  # a type error
        refused = cluster.kubectl(
            "apply", "-n", namespace, "-f", "-", input=json.dumps(bad), check=False
        )
        assert refused.returncode != 0
        # Refused by the standby's webhook, which compiled the rules.
        assert "check-policy.lattice.dev" in refused.stderr, refused.stderr
        assert "invalid rules" in refused.stderr, refused.stderr
        time.sleep(6)  # longer than a lease duration: the standby must still do nothing
        sprite = get(cluster, namespace, "sprites", "idle")
        assert "status" not in sprite, sprite.get("status")
        assert not sprite["metadata"].get("finalizers")
        assert not [k for k in sprite["metadata"].get("annotations", {}) if "lattice.dev" in k]
        owned = get(cluster, namespace, "sprites", "owned")
        assert owned["metadata"]["finalizers"] == ["lattice.dev/finalizer"]
        assert "status" not in owned
        assert b.leader_gauge() == 0.0
        assert holder(cluster, namespace) == "someone-else"
    finally:
        renewing.clear()
        renewer.join()
    wait_holder(cluster, namespace, "op-b", timeout=TAKEOVER_BOUND + 2)
    assert lease(cluster, namespace)["leaseTransitions"] == 1
    wait_for(
        lambda: "status" in get(cluster, namespace, "sprites", "idle"),
        timeout=30,
        what="the new leader to reconcile the Sprite",
    )


def test_a_clean_stop_hands_the_lease_over_at_once(
    replicas: Any, cluster: Cluster, namespace: str
) -> None:
    slow = {"lease_duration": 15.0, "renew_deadline": 10.0, "retry_period": 0.5}
    a = replicas("op-a", **slow)
    wait_holder(cluster, namespace, "op-a")
    replicas("op-b", **slow)
    started = time.monotonic()
    assert a.op.stop() == 0  # SIGTERM: stop reconciling, release the Lease, exit
    wait_holder(cluster, namespace, "op-b", timeout=30)
    takeover = time.monotonic() - started  # op-a's own shutdown included
    # Released, not expired: well inside the 15 s an expiry would take.
    assert takeover < 8, f"the standby took {takeover:.1f}s"
    assert "released Lease" in a.op.log()
    assert lease(cluster, namespace)["leaseTransitions"] == 1


def test_a_leader_that_loses_its_lease_exits(
    replicas: Any, cluster: Cluster, namespace: str
) -> None:
    a = replicas("op-a")
    wait_holder(cluster, namespace, "op-a")
    spec = {"spec": {"holderIdentity": "intruder", "leaseTransitions": 9}}
    cluster.kubectl(
        "-n", namespace, "patch", "lease", LEASE, "--type=merge", "-p", json.dumps(spec)
    )
    wait_for(lambda: not a.op.alive(), timeout=TIMINGS["renew_deadline"] + 5, what="op-a exit")
    assert a.op.proc.returncode == 3
    assert "lost Lease" in a.op.log()
    assert holder(cluster, namespace) == "intruder"  # it left without writing again


LEADER_LABEL = "lattice.dev/leader"


def pod_labels(cluster: Cluster, namespace: str) -> dict[str, str | None]:
    """Each Pod's leader label (None: it has none)."""
    pods = json.loads(cluster.kubectl("-n", namespace, "get", "pods", "-o", "json").stdout)
    return {
        p["metadata"]["name"]: (p["metadata"].get("labels") or {}).get(LEADER_LABEL)
        for p in pods["items"]
    }


def test_the_leader_label_follows_the_lease(
    replicas: Any, cluster: Cluster, namespace: str
) -> None:
    """Pods as the Deployment makes them (never scheduled here: no node), one of them a stale
    leader's; the holder labels its own Pod and unlabels the stale one, but not a Pod of
    another installation; a clean stop takes the label off, and the next leader puts it on."""
    for name, labels in (
        ("op-a", {"app": "ours"}),
        ("op-b", {"app": "ours", LEADER_LABEL: "true"}),  # a dead leader's, lingering
        ("theirs", {"app": "theirs", LEADER_LABEL: "true"}),  # another installation's leader
    ):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "lattice.invalid/none"}]},
        }
        apply(cluster, namespace, pod)
    label = {"pod_label": LEADER_LABEL, "pod_selector": "app=ours"}
    slow = {"lease_duration": 15.0, "renew_deadline": 10.0, "retry_period": 0.5}
    a = replicas("op-a", **slow, **label)
    wait_holder(cluster, namespace, "op-a")
    expected: dict[str, str | None] = {"op-a": "true", "op-b": None, "theirs": "true"}
    wait_for(
        lambda: pod_labels(cluster, namespace) == expected,
        timeout=30,
        what=f"the labels {expected}",
    )
    b = replicas("op-b", **slow, **label)
    # A standby takes the label off its own Pod only (at start), never the leader's.
    wait_for(lambda: "is waiting for Lease" in b.op.log(), timeout=30, what="op-b standing by")
    assert pod_labels(cluster, namespace) == expected
    assert a.op.stop() == 0
    wait_holder(cluster, namespace, "op-b", timeout=30)
    expected = {"op-a": None, "op-b": "true", "theirs": "true"}
    wait_for(
        lambda: pod_labels(cluster, namespace) == expected,
        timeout=30,
        what=f"the labels {expected}",
    )
