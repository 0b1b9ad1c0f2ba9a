"""The local control plane is a real, complete enough Kubernetes for the operator."""

from __future__ import annotations

import json

import pytest
from kubernetes.client import ApiException, V1ConfigMap, V1ObjectMeta, V1OwnerReference

from tests.support.admission_cases import build
from tests.support.cluster import Cluster, wait_for

pytestmark = pytest.mark.e2e


def test_server_reports_the_pinned_version(cluster: Cluster) -> None:
    out = json.loads(cluster.kubectl("version", "-o", "json").stdout)
    assert out["clientVersion"]["gitVersion"] == "v1.37.1"
    if cluster.local is not None:
        assert out["serverVersion"]["gitVersion"] == "v1.37.1"


def test_kubectl_explain_shows_field_descriptions(cluster: Cluster) -> None:
    out = cluster.kubectl("explain", "run.spec").stdout
    assert "argv of the command" in out
    assert "spriteRef" in out
    out = cluster.kubectl("explain", "sprite.spec.deletionPolicy").stdout
    assert "Orphan" in out


def test_get_lattice_lists_all_three_kinds(cluster: Cluster, namespace: str) -> None:
    for doc in (
        build("sprite.yaml", "cat-sprite", {}),
        build("run.yaml", "cat-run", {}),
        build("intent-sprite-task-exec.yaml", "cat-intent", {}),
    ):
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))
    out = cluster.kubectl("get", "lattice", "-n", namespace).stdout
    assert "sprite.lattice.dev/cat-sprite" in out
    assert "run.lattice.dev/cat-run" in out
    assert "intent.lattice.dev/cat-intent" in out


def test_short_names_and_printer_columns(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", input=json.dumps(build("run.yaml", "cols", {}))
    )
    out = cluster.kubectl("get", "lrun", "-n", namespace).stdout
    header = out.splitlines()[0].split()
    assert header[:4] == ["NAME", "PHASE", "SPRITE", "EVENTS"]


def test_garbage_collector_removes_dependents(cluster: Cluster, namespace: str) -> None:
    if cluster.local is None:
        pytest.skip("garbage collection is the given cluster's own business")
    owner = cluster.core.create_namespaced_config_map(
        namespace, V1ConfigMap(metadata=V1ObjectMeta(name="owner"))
    )
    cluster.core.create_namespaced_config_map(
        namespace,
        V1ConfigMap(
            metadata=V1ObjectMeta(
                name="dependent",
                owner_references=[
                    V1OwnerReference(
                        api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid
                    )
                ],
            )
        ),
    )
    cluster.core.delete_namespaced_config_map("owner", namespace)

    def dependent_gone() -> bool:
        try:
            cluster.core.read_namespaced_config_map("dependent", namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for(dependent_gone, timeout=90, what="the garbage collector to delete the dependent")


def test_namespace_deletion_completes(cluster: Cluster) -> None:
    if cluster.local is None:
        pytest.skip("namespace deletion is the given cluster's own business")
    name = cluster.create_namespace("deleted")
    cluster.core.create_namespaced_config_map(name, V1ConfigMap(metadata=V1ObjectMeta(name="x")))
    cluster.delete_namespace(name)

    def gone() -> bool:
        try:
            cluster.core.read_namespace(name)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone, timeout=90, what="the namespace controller to finish deleting")


def test_service_account_tokens_can_be_requested(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl("create", "serviceaccount", "robot", "-n", namespace)
    token = cluster.kubectl("create", "token", "robot", "-n", namespace).stdout.strip()
    assert token.count(".") == 2  # a JWT
