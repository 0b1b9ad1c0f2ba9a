"""The local control plane is a real, complete enough Kubernetes for the operator."""

from __future__ import annotations

import json

import pytest
from kubernetes.client import ApiException, V1ConfigMap, V1ObjectMeta, V1OwnerReference

from lattice_adapters.kube import (
    AlreadyExists,
    Conflict,
    Invalid,
    KubeClient,
    KubeConfig,
    NotFound,
    PatchTestFailed,
    resource_path,
)
from lattice_adapters.kube.writer import KubeClusterWriter
from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.api.v1alpha1.resources import INTENTS
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


async def test_the_api_servers_errors_arrive_typed(cluster: Cluster, namespace: str) -> None:
    """Each error type the operator relies on, as the real API server answers it: NotFound,
    AlreadyExists, Conflict (a stale resourceVersion), Invalid with its causes, and a failed
    JSON-patch `test` on an Intent's status (the guard of an Intent's phase change)."""
    configmaps = resource_path("", "v1", "configmaps", namespace)
    async with KubeClient(KubeConfig.load(cluster.kubeconfig)) as kube:
        with pytest.raises(NotFound):
            await kube.get(f"{configmaps}/absent")
        stored = await kube.create(configmaps, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
        with pytest.raises(AlreadyExists):
            await kube.create(configmaps, {"metadata": {"name": "cm"}})
        await kube.merge_patch(f"{configmaps}/cm", {"data": {"a": "2"}})
        with pytest.raises(Conflict) as stale:
            await kube.replace(f"{configmaps}/cm", stored)
        assert type(stale.value) is Conflict
        with pytest.raises(Invalid) as invalid:
            await kube.create(configmaps, {"metadata": {"name": "bad"}, "data": {"a b": "1"}})
        assert type(invalid.value) is Invalid
        assert [(c.field, c.reason) for c in invalid.value.causes] == [
            ("data[a b]", "FieldValueInvalid")
        ], invalid.value.body

        intents = resource_path(*INTENTS.gvp, namespace)
        manifest = build("intent-sprite-task-exec.yaml", "guarded", {})
        generation = (await kube.create(intents, manifest))["metadata"]["generation"]
        status = f"{intents}/guarded/status"
        with pytest.raises(PatchTestFailed) as failed:
            await kube.json_patch(
                status,
                [
                    {"op": "test", "path": "/metadata/generation", "value": generation + 1},
                    {"op": "add", "path": "/status", "value": {"phase": "Approved"}},
                ],
            )
        assert failed.value.status == 422, failed.value.body
        assert failed.value.failed == ["/metadata/generation"]
        # Another patch that cannot be applied is Invalid, not a failed test, with or
        # without a test that holds.
        for ops in (
            [{"op": "replace", "path": "/nothing/here", "value": 1}],
            [
                {"op": "test", "path": "/metadata/generation", "value": generation},
                {"op": "replace", "path": "/nothing/here", "value": 1},
            ],
        ):
            with pytest.raises(Invalid) as unapplied:
                await kube.json_patch(status, ops)
            assert type(unapplied.value) is Invalid, unapplied.value.body
        await kube.json_patch(
            status,
            [
                {"op": "test", "path": "/metadata/generation", "value": generation},
                {"op": "add", "path": "/status", "value": {"phase": "Classified"}},
            ],
        )


async def test_the_cluster_writer_against_the_api_server(cluster: Cluster, namespace: str) -> None:
    """The writer port's answers that are not errors, as the adapter gets them from the real
    API server: a create of one already there, a status decided on another generation or
    on an older version, a delete of another object of the name or of none, an Event posted
    (and one refused)."""
    intents = INTENTS.gvp
    manifest = build("intent-sprite-task-exec.yaml", "written", {})
    async with KubeClient(KubeConfig.load(cluster.kubeconfig)) as kube:
        writer = KubeClusterWriter(kube)
        assert await writer.create(intents, namespace, manifest) is True
        assert await writer.create(intents, namespace, manifest) is False
        stored, created = await writer.create_or_read(intents, namespace, manifest)
        assert created is False
        assert stored is not None
        generation = stored["metadata"]["generation"]
        stale = await writer.replace_status_if(
            intents, namespace, "written", {"phase": "Approved"}, generation=generation + 1
        )
        assert stale is None
        assert "status" not in await writer.read(intents, namespace, "written")
        fresh = await writer.replace_status_if(
            intents, namespace, "written", {"phase": "Classified"}, generation=generation
        )
        assert fresh is not None
        assert fresh["status"]["phase"] == "Classified"
        patched = await writer.patch_status(intents, namespace, "written", {"phase": "Proposed"})
        assert patched["status"]["phase"] == "Proposed"
        # A status decided on an older view of the object is refused, not written.
        version = stored["metadata"]["resourceVersion"]
        with pytest.raises(Conflict):
            await writer.patch_status(
                intents, namespace, "written", {"phase": "Approved"}, resource_version=version
            )
        assert [i["metadata"]["name"] for i in await writer.list(intents, namespace)] == ["written"]
        # A label selector is the API server's to apply (ReceiptEvents lists a Run's this way).
        await writer.patch(intents, namespace, "written", {"metadata": {"labels": {"t": "a"}}})
        for selector, names in (("t=a", ["written"]), ("t=b", []), ("t!=a", [])):
            listed = await writer.list(intents, namespace, label_selector=selector)
            assert [i["metadata"]["name"] for i in listed] == names
        # A delete by uid of another object of that name, or of nothing, is no error.
        assert await writer.delete(intents, namespace, "written", uid="another") is False
        assert await writer.delete(intents, namespace, "missing") is False
        # An Event regarding it, as people read it (core/v1 shows events.k8s.io's too); one
        # the API server refuses (no such namespace) is logged, not raised: evidence only.
        regarding = ObjectRef(
            "lattice.dev/v1alpha1", "Intent", namespace, "written", stored["metadata"]["uid"]
        )
        await writer.post_event(regarding, reason="Tried", note="a notice", warning=True)
        await writer.post_event(
            ObjectRef("lattice.dev/v1alpha1", "Intent", "no-such-namespace", "x", "u"),
            reason="Lost",
            note="refused",
        )
        assert await writer.delete(intents, namespace, "written", uid=regarding.uid) is True
    events = json.loads(cluster.kubectl("-n", namespace, "get", "events", "-o", "json").stdout)
    [event] = [e for e in events["items"] if e["reason"] == "Tried"]
    assert (event["type"], event["message"]) == ("Warning", "a notice")
    assert event["involvedObject"]["name"] == "written"
