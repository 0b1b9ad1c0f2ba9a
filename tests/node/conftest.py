"""Fixtures of the node tests, one of each for the whole run: the node cluster, the local
Sprites server inside its network namespace, the private registry, this tree's release
published there (the image `make image` builds, the chart pinned to its digest), and the
previous release published there too; and this release installed (`installed`), which the
modules after test_upgrade.py share.

The modules run in ORDER, one cluster for all. The upgrade module runs first: it installs the
previous release on a cluster that has never seen a Lattice CRD, as its users did, and leaves
the cluster as it found it for the rest. The others then work on one installation, in the order
of a platform team's life with it (install, samples, monitoring, rollouts), its RBAC audit once
all of them have used it, its uninstall, and last a second installation in namespaced mode."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lattice_devtools.localcluster.node import NODE_IP, NodeCluster
from tests.support.node_e2e import (
    CHART_PATH,
    IMAGE_PATH,
    LATTICE,
    NAMESPACE,
    RELEASE,
    ROOT,
    SPRITES_PORT,
    SPRITES_TOKEN,
    TIMINGS,
    VERSION,
    Released,
    install,
    lattice_cli,
    wait_until,
)
from tests.support.node_image import OciArchive, build_image
from tests.support.previous_release import build_image as build_previous_image
from tests.support.previous_release import checkout
from tests.support.registry import Registry, archive_digest, start_registry

# The modules in the order they run, on one node cluster: test_upgrade.py meets a cluster with
# no release installed yet; test_install.py … test_rollouts.py share `installed`, which
# test_audit.py audits once they have used it, before test_uninstall.py removes it;
# test_namespaced.py installs the second release on the cluster left.
HERE = Path(__file__).resolve().parent
ORDER = (
    "test_upgrade.py",
    "test_image.py",
    "test_install.py",
    "test_samples.py",
    "test_prometheus.py",
    "test_rollouts.py",
    "test_audit.py",
    "test_uninstall.py",
    "test_namespaced.py",
)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Where the node tests' set-up time went, at the end of their report (node-test.log)."""
    if TIMINGS:
        timings = {k: round(v, 1) for k, v in TIMINGS.items()}
        terminalreporter.write_line(f"node e2e timings (s): {json.dumps(timings)}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The hook sees the whole session's items: only this folder's are reordered, in place.
    slots = [i for i, item in enumerate(items) if item.path.parent == HERE]
    mine = [items[i] for i in slots]
    unplaced = sorted({item.path.name for item in mine} - set(ORDER))
    if unplaced:
        raise pytest.UsageError(f"tests/node/conftest.py: place {unplaced} in ORDER")
    mine.sort(key=lambda item: ORDER.index(item.path.name))  # stable: file order within one
    for slot, item in zip(slots, mine, strict=True):
        items[slot] = item


@pytest.fixture(scope="session")
def image() -> OciArchive:
    return build_image()


@pytest.fixture(scope="session")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeCluster]:
    """The node cluster, started as a newcomer starts it: `lattice cluster up --node`."""
    state = tmp_path_factory.mktemp("node") / "cluster"
    started = time.monotonic()
    up = lattice_cli("cluster", "up", "--node", "--audit-log", "--state-dir", str(state))
    assert up.returncode == 0, up.stdout + up.stderr
    TIMINGS["node start"] = time.monotonic() - started
    cluster = NodeCluster.load(state)
    assert f"export KUBECONFIG={cluster.kubeconfig}" in up.stdout
    assert cluster.kubectl("get", "--raw=/readyz").stdout.strip() == "ok"
    try:
        yield cluster
    finally:
        records = list(cluster.records)
        down = lattice_cli("cluster", "down", "--state-dir", str(state))
        cluster.reap()
    assert down.returncode == 0, down.stdout + down.stderr
    assert "node cluster stopped" in down.stdout
    still = [r.name for r in records if cluster.alive(r.name)]
    assert not still, f"still running after `lattice cluster down`: {still}"
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    assert cluster.netns not in namespaces.stdout


@pytest.fixture(scope="session")
def sprites(node: NodeCluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The local Sprites server, a process inside the node's network namespace (recorded
    with the cluster, so `lattice cluster down` stops it too)."""
    state = tmp_path_factory.mktemp("sprites")
    node.spawn(
        "sprites-local",
        [
            LATTICE, "sprites-local", "--host", NODE_IP, "--port", str(SPRITES_PORT),
            "--state-dir", str(state), "--ready-file", str(state / "ready.json"),
        ],
        env={"SPRITES_LOCAL_TOKEN": SPRITES_TOKEN},
    )  # fmt: skip
    wait_until(lambda: (state / "ready.json").exists(), "the local Sprites server", 60)
    return f"http://{NODE_IP}:{SPRITES_PORT}"


@pytest.fixture(scope="session")
def registry(node: NodeCluster, tmp_path_factory: pytest.TempPathFactory) -> Registry:
    return start_registry(node, tmp_path_factory.mktemp("registry"))


@pytest.fixture(scope="session")
def released(
    registry: Registry, image: OciArchive, tmp_path_factory: pytest.TempPathFactory
) -> Released:
    """The release steps: crane pushes the image's OCI layout; hack/package-chart.sh pins
    the chart's default image to the pushed digest; helm pushes the chart."""
    started = time.monotonic()
    digest = registry.push_image(image.path, IMAGE_PATH, VERSION)
    TIMINGS["image push (crane)"] = time.monotonic() - started
    assert digest == archive_digest(image.path)  # byte for byte: the digest make image built
    repository = f"{registry.host}/{IMAGE_PATH}"
    destination = tmp_path_factory.mktemp("release")
    out = subprocess.run(
        ["bash", str(ROOT / "hack" / "package-chart.sh"), repository, digest, str(destination)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "HELM": str(registry.node.bin_dir / "helm")},
    )
    assert out.returncode == 0, out.stderr
    package = Path(out.stdout.strip().splitlines()[-1])
    registry.login_helm()
    started = time.monotonic()
    registry.push_chart(package, CHART_PATH)
    TIMINGS["chart push (helm push)"] = time.monotonic() - started
    return Released(
        registry,
        f"{repository}@{digest}",
        digest,
        f"oci://{registry.host}/{CHART_PATH}/lattice-operator",
    )


@pytest.fixture(scope="session")
def previous(registry: Registry, tmp_path_factory: pytest.TempPathFactory) -> Released:
    """The previous release (hack/previous-release.env), published as it was: its image,
    built from its tree, pushed with its version as the tag (its chart names the image by
    tag), its chart packaged and pushed beside ours."""
    release = checkout(tmp_path_factory.mktemp("previous") / "tree")
    started = time.monotonic()
    archive = build_previous_image(release)
    TIMINGS["previous image (build or cache)"] = time.monotonic() - started
    started = time.monotonic()
    digest = registry.push_image(archive.path, IMAGE_PATH, release.version)
    TIMINGS["previous image push (crane)"] = time.monotonic() - started
    destination = tmp_path_factory.mktemp("previous-chart")
    registry.node.helm("package", str(release.chart_dir), "--destination", str(destination))
    package = destination / f"lattice-operator-{release.version}.tgz"
    assert package.is_file(), sorted(destination.iterdir())
    registry.login_helm()
    registry.push_chart(package, CHART_PATH)
    return Released(
        registry,
        f"{registry.host}/{IMAGE_PATH}:{release.version}",
        digest,
        f"oci://{registry.host}/{CHART_PATH}/lattice-operator",
        release.version,
    )


@pytest.fixture(scope="session")
def installed(node: NodeCluster, sprites: str, released: Released) -> NodeCluster:
    TIMINGS["helm install -> 2 operator Pods Ready"] = install(
        node, sprites, released, RELEASE, NAMESPACE, github=True
    )
    pulls = [
        pulled_seconds(e["message"])
        for e in node.kube_json("-n", NAMESPACE, "get", "events")["items"]
        if e.get("reason") == "Pulled" and released.image in e.get("message", "")
    ]
    if pulls:
        TIMINGS["node pulls the image (kubelet)"] = max(pulls)
    return node


GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def pulled_seconds(message: str) -> float:
    """From the kubelet's `Successfully pulled image "…" in 1m2.5s (…)` (a Go duration)."""
    found = re.search(r" in ([0-9.hms]+) ", message)
    parts = GO_DURATION.findall(found.group(1)) if found else []
    return sum(float(value) * UNIT_SECONDS[unit] for value, unit in parts)
