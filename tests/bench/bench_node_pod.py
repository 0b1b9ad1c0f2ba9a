"""A Run versus a Pod on the real node: apply → command started, p50 of 20, as a ratio
(issue 17's side-by-side row; `make bench`; bench-results/capacity.json, key "run_vs_pod",
one row of `python -m tests.bench.report`).

One node cluster (`lattice_devtools.localcluster.node`: etcd, kube-apiserver, scheduler,
controller manager, containerd, the kubelet, kube-proxy and a CNI bridge, in a network
namespace of its own; root) runs both sides on the same machine:

- the operator as a host process inside that namespace (`lattice run --standalone`, the test
  suite's settings, its webhooks on 127.0.0.1 there) with the local Sprites server beside it,
  both recorded with the cluster so stopping it stops them; one warm Sprite;
- Pods on the node: the operator image `make image` builds (already imported, as the node
  tests import it; imagePullPolicy Never), scheduled by the scheduler and started by the
  kubelet through containerd and runc, with a Pod network from the CNI bridge.

Twenty rounds, one object at a time (tests/support/node_runpod.py, run inside the namespace):
a Run and a Pod with the same command, `sh -c 'date +%s.%N'`; the Run always in a warm sprite
(idle past the local server's 5 s `warm_after`). "Command started" is measured two ways, the
same kind on both sides: as the runtime records it (the Run's `status.startTime`, stamped
when the sprite confirmed the exec; the container's `startedAt` in containerd's CRI status, in
ns) and as the command prints it. The ratio Pod / Run is taken at p50 within one run, so the
machine's load weighs on both. Marker `node` as well as `bench`: it needs root and the node's
binaries (`make node-tools`), like `make node-test`. Measurements: nothing is asserted about
a figure; only one node cluster may run on the machine at a time.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from lattice_devtools.localcluster.node import NodeCluster, start_node_cluster, stop_node_cluster
from tests.support.admission_cases import build
from tests.support.capacity import commit, load
from tests.support.cluster import wait_for
from tests.support.node_image import build_image
from tests.support.node_runpod import (
    MINIMAL_IMAGE,
    RUN_VS_POD,
    minimal_image,
    run_vs_pod_row,
    summarize,
)
from tests.support.stack import FAST_SETTINGS

pytestmark = pytest.mark.node

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench-results" / "capacity.json"
# As bench_capacity: LATTICE_BENCH_SCALE=0.1 for a quick look, never the figures to quote.
SCALE = float(os.environ.get("LATTICE_BENCH_SCALE", "1"))
ROUNDS = max(2, int(20 * SCALE))
# A Pod of the operator image spends 10-80 s having containerd's `native` snapshotter copy
# the image's ~300 MB filesystem: a few rounds of it say enough.
ROUNDS_OPERATOR_IMAGE = max(1, int(5 * SCALE))
IMAGE = "lattice.invalid/lattice-operator:0.2.0"
NAMESPACE, SPRITE = "rvp", "rvp"
SPRITES_PORT, LIVENESS_PORT, METRICS_PORT = 8480, 18081, 18090
SPRITES_TOKEN = "node-bench-token"
WARM_AFTER = 5.0


def python_env() -> dict[str, str]:
    source_roots = ("operator", "adapters", "devtools")  # sprites-local: the dev tools
    return {"PYTHONPATH": os.pathsep.join(str(REPO / root) for root in source_roots)}


def start_sprites(node: NodeCluster, work: Path) -> str:
    """The local Sprites server inside the namespace (127.0.0.1 there)."""
    state = work / "sprites"
    state.mkdir()
    node.spawn(
        "sprites-local",
        [
            sys.executable, "-m", "lattice_operator", "sprites-local",
            "--host", "127.0.0.1", "--port", str(SPRITES_PORT), "--state-dir", str(state),
            "--ready-file", str(state / "ready.json"),
            "--warm-after", str(WARM_AFTER), "--cold-after", "3600",
        ],
        env={**python_env(), "SPRITES_LOCAL_TOKEN": SPRITES_TOKEN},
    )  # fmt: skip
    wait_for(
        lambda: (state / "ready.json").exists(),
        timeout=60,
        interval=0.5,
        what="the local Sprites server",
    )
    return f"http://127.0.0.1:{SPRITES_PORT}"


def start_operator(node: NodeCluster, work: Path, sprites: str) -> None:
    """`lattice run --standalone` inside the namespace, with the test suite's settings."""
    config = work / "operator.yaml"
    config.write_text(yaml.safe_dump({**FAST_SETTINGS, "metrics_port": METRICS_PORT}))
    tmp = work / "operator-tmp"
    tmp.mkdir()
    node.spawn(
        "operator",
        [
            sys.executable, "-m", "lattice_operator", "run", "--standalone",
            "--liveness-port", str(LIVENESS_PORT), "--config", str(config),
        ],
        env={
            **python_env(),
            "KUBECONFIG": str(node.kubeconfig),
            "TMPDIR": str(tmp),
            "SPRITES_TOKEN": SPRITES_TOKEN,
            "SPRITES_API_URL": sprites,
        },
    )  # fmt: skip
    probe = f"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{LIVENESS_PORT}/healthz', timeout=1)"  # noqa: E501
    wait_for(
        lambda: node.run(sys.executable, "-c", probe, check=False).returncode == 0,
        timeout=120,
        interval=0.5,
        what="operator",
    )


def warm_sprite(node: NodeCluster) -> None:
    """The Sprite Ready, set up by one Run, then idle into `warm`."""
    sprite = build("sprite.yaml", SPRITE, {"spec.networkPolicy": {"rules": []}})
    node.kubectl("-n", NAMESPACE, "apply", "-f", "-", input=json.dumps(sprite))

    def ready() -> bool:
        obj = node.kube_json("-n", NAMESPACE, "get", "sprite", SPRITE)
        conditions = (obj.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    wait_for(ready, timeout=120, interval=0.5, what="the Sprite Ready")
    run = {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Run",
        "metadata": {"name": "rvp-warmup"},
        "spec": {"spriteRef": {"name": SPRITE}, "command": ["true"], "retries": 0},
    }
    node.kubectl("-n", NAMESPACE, "apply", "-f", "-", input=json.dumps(run))

    def finished() -> str:
        obj = node.kube_json("-n", NAMESPACE, "get", "run", "rvp-warmup")
        phase = str((obj.get("status") or {}).get("phase") or "")
        return phase if phase in ("Succeeded", "Failed") else ""

    assert wait_for(finished, timeout=120, interval=0.5, what="the warm-up Run") == "Succeeded"


def measure(node: NodeCluster, image_path: Path, work: Path) -> dict[str, Any]:
    node.import_image(image_path, IMAGE)
    node.import_image(minimal_image(work))
    node.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    node.kubectl("create", "namespace", NAMESPACE)
    start_operator(node, work, start_sprites(node, work))
    # The ServiceAccount admission needs the namespace's default account before a Pod.
    wait_for(
        lambda: node.kubectl("-n", NAMESPACE, "get", "sa", "default", check=False).returncode == 0,
        timeout=120,
        interval=0.5,
        what="the default ServiceAccount",
    )
    warm_sprite(node)
    pods = {"pod": MINIMAL_IMAGE, "pod_operator_image": IMAGE}
    row: dict[str, Any] = {
        "rounds": ROUNDS,
        "rounds_pod_operator_image": ROUNDS_OPERATOR_IMAGE,
        "pod_images": pods,
    }
    before = load()
    out = node.run(
        sys.executable, "-m", "tests.support.node_runpod",
        "--kubeconfig", str(node.kubeconfig), "--namespace", NAMESPACE,
        "--sprite", SPRITE, *(f"--pod={side}={image}" for side, image in pods.items()),
        "--containerd-root", str(node.state / "containerd" / "root"),
        "--count", str(ROUNDS), f"--limit=pod_operator_image={ROUNDS_OPERATOR_IMAGE}",
        "--warm-wait", str(WARM_AFTER + 1),
        timeout=ROUNDS * 60 + 120,
    )  # fmt: skip
    row["load_average_1m_before_after"] = [before, load()]
    (work / "rounds.json").write_text(out.stdout)  # kept (pytest's tmp) whatever follows
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    row["command"] = doc["command"]
    row.update(summarize(doc["rounds"], ["run", *pods]))
    row["rounds_detail"] = doc["rounds"]
    return row


def test_run_vs_pod(tmp_path: Path) -> None:
    image = build_image()
    started = load()
    state = tmp_path / "node"
    node = start_node_cluster(state, REPO)
    try:
        row = measure(node, image.path, tmp_path)
    finally:
        stop_node_cluster(state)
        node.reap()
    row["load_average_1m_at_node_start"] = started
    results: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results.setdefault("machine", {"cpus": os.cpu_count(), "python": platform.python_version()})
    row["measured"] = {
        "commit": commit(),
        "scale": SCALE,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    results["run_vs_pod"] = row
    # The table bench_capacity writes, with this row in it (placed last, as there).
    table = [r for r in results.get("table") or [] if r["measure"] != RUN_VS_POD]
    results["table"] = [*table, run_vs_pod_row(row)]
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps({k: row[k] for k in ("runtime", "printed", "load_average_1m_before_after")}))
