"""Upgrades and rollbacks with work in flight, on the real node.

The previous release (hack/previous-release.env) is installed from the registry as its users
installed it: its chart, its image by tag, on a cluster that has never seen a Lattice CRD. A Run
streams events and an Intent that needs two approvals has one. Then the upgrade, as
docs/install.md tells a platform team: the new chart's CRDs applied with server-side apply
(Helm never upgrades `crds/`; the stored versions checked), then `helm upgrade`. The Run keeps
streaming under the new Pods and ends; the second approval, given to the new release, completes
the Intent. Then `helm rollback` to the previous release with the same work in flight.

For each Run: one attempt and one exec, the status counts every event the sprite emitted
exactly once, and its receipts run 1..N without a gap or a repeat, published by Pods of both
releases. The module runs first (tests/node/conftest.py) and removes what it installed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lattice_devtools.localcluster.node import NodeCluster
from lattice_operator.receipt_reader import receipt_event_params, receipts_from_events
from tests.support.agents import agent
from tests.support.node_e2e import (
    CHART,
    IMAGE_PATH,
    SAMPLES,
    TIMINGS,
    Released,
    condition,
    get,
    holder,
    install,
    operator_pods,
    ready,
    sprite_file,
    stop_run,
    user_values,
    wait_phase,
    wait_until,
)

pytestmark = pytest.mark.node

RELEASE, NAMESPACE = "lattice-up", "lattice-up-system"
WORK = "upgrade"  # where the Sprite, the Runs and the Intents live
APPROVERS = ("alice", "bob")
# This release's CRDs: the chart's crds/ (the previous release may have had fewer; the CRD step
# creates the new ones).
LATTICE_CRDS = tuple(
    sorted(
        path.name.removeprefix("lattice.dev_").removesuffix(".yaml")
        for path in (CHART / "crds").glob("lattice.dev_*.yaml")
    )
)

# Emits an INFO event every quarter second until the test drops /workspace/stop-<run> into
# the Sprite (bounded: 1,200 events, five minutes), then COMPLETED; counts its own execs.
STREAMING = agent(
    """
    count = f"/workspace/execs-{work}"
    execs = int(open(count).read()) + 1 if os.path.exists(count) else 1
    open(count, "w").write(str(execs))
    print(f"execs={execs}", flush=True)
    ticks = 0
    while not os.path.exists(f"/workspace/stop-{work}") and ticks < 1200:
        ticks += 1
        emit("INFO", {"message": f"tick {ticks}"})
        time.sleep(0.25)
    print(f"ticks={ticks}", flush=True)
    emit("COMPLETED", {"status": "success", "summary": f"{ticks} ticks"})
    """
)

POLICY = {
    "apiVersion": "lattice.dev/v1alpha1",
    "kind": "IntentPolicy",
    "metadata": {"name": "default"},
    "spec": {
        "rules": [
            {
                "name": "two-approvers",
                "match": "intent.spec.kind == 'sprite_task_exec'",
                "risk": "controlled",
                "outcome": "require_approval",
                "approvers": 2,
            }
        ]
    },
}


def kube(node: NodeCluster, *args: str, input: str | None = None) -> str:
    return node.kubectl("-n", WORK, *args, input=input).stdout


def apply(node: NodeCluster, doc: dict[str, Any]) -> None:
    kube(node, "apply", "-f", "-", input=json.dumps(doc))


@dataclass(frozen=True)
class Pods:
    """The operator Pods of one release revision: names and the image they run."""

    names: frozenset[str]
    image: str


def serving(node: NodeCluster) -> Pods:
    pods = operator_pods(node, NAMESPACE)
    images = {p["spec"]["containers"][0]["image"] for p in pods}
    assert len(images) == 1, images
    return Pods(frozenset(p["metadata"]["name"] for p in pods), images.pop())


def rolled_to(node: NodeCluster, before: Pods, image: str) -> Pods:
    """Wait until two Ready Pods none of which was serving `before` run `image` and one of
    them holds the Lease; those Pods."""

    def done() -> Pods | None:
        pods = operator_pods(node, NAMESPACE)
        if len(pods) != 2 or not all(ready(p) for p in pods):
            return None
        names = frozenset(p["metadata"]["name"] for p in pods)
        if names & before.names:
            return None
        if {p["spec"]["containers"][0]["image"] for p in pods} != {image}:
            return None
        return Pods(names, image) if holder(node, NAMESPACE, RELEASE) in names else None

    found: Pods = wait_until(done, f"two new Ready Pods on {image}, one holding the Lease", 300)
    return found


@dataclass(frozen=True)
class InFlight:
    run: str
    intent: str


def start_work(node: NodeCluster, phase: str) -> InFlight:
    """A streaming Run, Running with events coming; an Intent with one of its two approvals."""
    run, intent = f"{phase}-stream", f"{phase}-intent"
    apply(
        node,
        {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "Intent",
            "metadata": {"name": intent},
            "spec": {
                "kind": "sprite_task_exec",
                "summary": f"run once the {phase} is through",
                "proposedBy": {"type": "user", "name": "carol"},
                "subject": {"type": "sprite", "ref": "box"},
                "params": {
                    "spriteTaskExec": {
                        "spriteRef": {"name": "box"},
                        "command": ["sh", "-c", f"echo {phase} intent ran"],
                        "timeoutSeconds": 300,
                    }
                },
                "allowedActions": ["NOTIFY_USER"],
            },
        },
    )
    wait_phase(node, "intent", intent, {"AwaitingApproval"}, WORK)
    approve(node, intent, APPROVERS[0], f"before the {phase}")
    wait_until(
        lambda: [a["user"] for a in approvals(node, intent)] == [APPROVERS[0]],
        f"{APPROVERS[0]}'s approval of {intent} recorded",
        120,
    )
    assert get(node, "intent", intent, WORK)["status"]["phase"] == "AwaitingApproval"
    apply(
        node,
        {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "Run",
            "metadata": {"name": run},
            "spec": {
                "spriteRef": {"name": "box"},
                "command": ["python3", "-c", STREAMING],
                "timeoutSeconds": 900,
            },
        },
    )
    wait_until(lambda: event_count(node, run) >= 8, f"{run} streaming events", 180)
    return InFlight(run, intent)


def approve(node: NodeCluster, intent: str, user: str, reason: str) -> None:
    request = json.dumps({"decision": "approve", "reason": reason})
    node.kubectl(
        "--as", user, "-n", WORK, "annotate", "intent", intent,
        f"approval.lattice.dev/request={request}",
    )  # fmt: skip


def approvals(node: NodeCluster, intent: str) -> list[dict[str, Any]]:
    return list((get(node, "intent", intent, WORK).get("status") or {}).get("approvals") or [])


def event_count(node: NodeCluster, run: str) -> int:
    status = get(node, "run", run, WORK).get("status") or {}
    return int((status.get("events") or {}).get("eventCount") or 0)


def receipts(node: NodeCluster, run: dict[str, Any]) -> list[dict[str, Any]]:
    selector = receipt_event_params(run)["labelSelector"]
    listing = json.loads(kube(node, "get", "events.events.k8s.io", "-l", selector, "-o", "json"))
    found, untrusted = receipts_from_events(listing)
    assert untrusted == 0, listing
    return found


def check_landed(
    node: NodeCluster, sprites: str, work: InFlight, older: Pods, newer: Pods, *, ours: bool
) -> dict[str, int]:
    """The Run ended once, every event counted once, receipts 1..N published by Pods of both
    releases; the Intent's second approval, given to the newer Pods, ran it. `ours`: this
    tree's release took the Run over (its log tail is checked whole)."""
    before = event_count(node, work.run)
    # Events keep coming under the newer Pods before the Run is told to stop.
    wait_until(
        lambda: event_count(node, work.run) >= before + 8,
        f"{work.run} still streaming under the new Pods",
        120,
    )
    stop_run(node, sprites, work.run, sprite="box", namespace=WORK)
    phase = wait_phase(node, "run", work.run, {"Succeeded", "Failed", "Canceled"}, WORK)
    run = get(node, "run", work.run, WORK)
    status = run["status"]
    assert phase == "Succeeded", json.dumps(status)[-3000:]
    assert len(status["attempts"]) == 1, status["attempts"]  # never started again
    read, execs = sprite_file(
        node, sprites, f"/workspace/execs-{work.run}", sprite="box", namespace=WORK
    )
    assert (read, execs.strip()) == (200, "1"), "the Run's command ran more than once"
    (ticks,) = [int(line.split("=")[1]) for line in status["logTail"] if line.startswith("ticks=")]
    if ours:
        # What the previous release kept, then the live output: no fragment of a replay.
        assert status["logTail"] == ["execs=1", f"ticks={ticks}"], status["logTail"]
    events = status["events"]
    assert events["counts"]["info"] == ticks, (events["counts"], ticks)  # none lost, none twice
    assert events["counts"]["completed"] == 1, events["counts"]
    assert events["eventCount"] == ticks + 1, (events["eventCount"], ticks)
    assert status["cursor"]["eventCount"] == ticks + 1, status["cursor"]

    published = receipts(node, run)
    sequences = [r["sequence"] for r in published]
    dropped = {
        n
        for r in (status.get("receipts") or {}).get("droppedSequences") or []
        for n in range(r["first"], r["last"] + 1)
    }
    assert len(sequences) == len(set(sequences)), sequences  # no receipt twice
    assert sorted(set(sequences) | dropped) == list(range(1, max(sequences) + 1)), (
        sequences,
        dropped,
    )
    assert not [r for r in published if r["event"] == "receipt.gap_detected"], published
    reporters = {r["reporting_instance"] for r in published}
    assert reporters & older.names, (reporters, older.names)  # the Run began before...
    assert reporters & newer.names, (reporters, newer.names)  # ...and ended after

    approve(node, work.intent, APPROVERS[1], "after the change of release")
    phase = wait_phase(node, "intent", work.intent, {"Succeeded", "Failed", "Canceled"}, WORK)
    intent = get(node, "intent", work.intent, WORK)
    assert phase == "Succeeded", json.dumps(intent.get("status"))[-3000:]
    assert [a["user"] for a in approvals(node, work.intent)] == list(APPROVERS)
    return {"events": ticks + 1, "receipts": len(published)}


def crds_from(node: NodeCluster, released: Released, workdir: Path) -> Path:
    """The chart's crds/ directory, from the chart in the registry (`helm pull`)."""
    node.helm(
        "pull", *released.chart_args(), "--untar", "--untardir", str(workdir),
    )  # fmt: skip
    crds = workdir / "lattice-operator" / "crds"
    assert sorted(p.name for p in crds.glob("*.yaml")) == [
        f"lattice.dev_{name}.yaml" for name in LATTICE_CRDS
    ]
    return crds


def apply_crds(node: NodeCluster, crds: Path) -> int:
    """The documented CRD step: server-side apply of the new chart's CRDs; the number that
    changed. Every stored version must still be served (the API server refuses an update
    that drops one); after the step the cluster's CRDs are the chart's exactly."""
    ssa = ("--server-side", "--field-manager=lattice-crds", "--force-conflicts", "-f", str(crds))
    diff = node.kubectl("diff", *ssa, check=False)
    assert diff.returncode in (0, 1), diff.stderr
    changed = sum(line.startswith("diff ") for line in diff.stdout.splitlines())
    node.kubectl("apply", *ssa)
    for name in LATTICE_CRDS:
        crd = node.kube_json("get", "crd", f"{name}.lattice.dev")
        assert crd["status"]["storedVersions"] == ["v1alpha1"], crd["status"]
        served = [v["name"] for v in crd["spec"]["versions"] if v["served"]]
        assert set(crd["status"]["storedVersions"]) <= set(served), crd["spec"]["versions"]
        assert (condition(crd, "Established") or {}).get("status") == "True", crd["status"]
    after = node.kubectl("diff", *ssa, check=False)
    assert after.returncode == 0, after.stdout[-3000:]  # the cluster now has the chart's CRDs
    return changed


@pytest.fixture(scope="module")
def first_installed(
    node: NodeCluster, sprites: str, previous: Released, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NodeCluster]:
    """The previous release, installed from the registry on a cluster without Lattice CRDs;
    the Sprite the work runs in; two approvers. Afterwards everything removed again."""
    assert not node.kubectl("get", "crd", "-o", "name").stdout.count("lattice.dev")
    repository = f"{previous.registry.host}/{IMAGE_PATH}"
    TIMINGS["previous: helm install -> 2 Pods Ready"] = install(
        node, sprites, previous, RELEASE, NAMESPACE, "--set", f"image.repository={repository}"
    )
    node.kubectl("create", "namespace", WORK)
    apply(node, POLICY)
    node.kubectl("apply", "-f", str(SAMPLES.parent / "rbac" / "lattice-approver.yaml"))
    for user in APPROVERS:
        kube(node, "create", "rolebinding", f"{user}-approves", "--clusterrole=lattice-approver",
             f"--user={user}")  # fmt: skip
    sprite = {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Sprite",
        "metadata": {"name": "box"},
        "spec": {},
    }
    apply(node, sprite)
    wait_until(
        lambda: (
            (condition(get(node, "sprite", "box", WORK), "Ready") or {}).get("status") == "True"
        ),
        "the Sprite Ready",
    )
    yield node
    # The operator of whichever release is installed finishes the Sprite's deletion.
    node.kubectl("delete", "namespace", WORK, "--wait=true", "--timeout=180s")
    node.helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait")
    node.kubectl("delete", "namespace", NAMESPACE, "--wait=true", "--timeout=120s")


def test_upgrade_then_rollback_with_work_in_flight(
    first_installed: NodeCluster,
    sprites: str,
    previous: Released,
    released: Released,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    node = first_installed
    repository = f"{previous.registry.host}/{IMAGE_PATH}"
    values = [*user_values(sprites), "--set", f"image.repository={repository}"]
    old = serving(node)
    assert old.image == previous.image, old

    # Upgrade: CRDs first, then the chart, while a Run streams and an Intent waits.
    work = start_work(node, "upgrade")
    started = time.monotonic()
    crds = crds_from(node, released, tmp_path_factory.mktemp("chart"))
    TIMINGS["upgrade: CRDs that changed"] = apply_crds(node, crds)
    node.helm("upgrade", RELEASE, *released.chart_args(), "--namespace", NAMESPACE, *values)
    new = rolled_to(node, old, released.image)
    TIMINGS["upgrade: CRDs + helm upgrade -> new Pods Ready, leading"] = time.monotonic() - started
    landed = check_landed(node, sprites, work, old, new, ours=True)
    TIMINGS["upgrade: events checked"] = landed["events"]
    TIMINGS["upgrade: receipts checked"] = landed["receipts"]

    # Rollback to the previous release (revision 1); the CRDs stay the newer ones.
    work = start_work(node, "rollback")
    started = time.monotonic()
    node.helm("rollback", RELEASE, "1", "--namespace", NAMESPACE)
    back = rolled_to(node, new, previous.image)
    TIMINGS["rollback: helm rollback -> old Pods Ready, leading"] = time.monotonic() - started
    landed = check_landed(node, sprites, work, new, back, ours=False)
    TIMINGS["rollback: events checked"] = landed["events"]
    TIMINGS["rollback: receipts checked"] = landed["receipts"]
    history = json.loads(
        node.helm("history", RELEASE, "--namespace", NAMESPACE, "-o", "json").stdout
    )
    assert [h["chart"] for h in history] == [
        f"lattice-operator-{previous.version}",
        f"lattice-operator-{released.version}",
        f"lattice-operator-{previous.version}",
    ], history
