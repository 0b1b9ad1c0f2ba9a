"""The cluster writer port (`lattice_operator.ports.cluster.ClusterWriter`) over the API
client: the handlers hand their plans' writes and Events to it, and only it knows REST
paths and which answers are not errors (AlreadyExists on a create, a failed JSON-patch
test, a refused Event)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lattice_adapters.kube.api_errors import AlreadyExists, Conflict, NotFound, PatchTestFailed
from lattice_adapters.kube.client import KubeClient, resource_path
from lattice_adapters.kube.events import post_notice
from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.builders import REPORTING_CONTROLLER
from lattice_operator.clock import Clock, SystemClock
from lattice_operator.lifeloop.receipts import LifecycleReceipt
from lattice_operator.ports.cluster import ReceiptPublisher

Resource = tuple[str, str, str]


class KubeClusterWriter:
    def __init__(
        self,
        kube: KubeClient,
        *,
        receipts: ReceiptPublisher | None = None,
        clock: Clock | None = None,
        instance: str = "lattice-operator",
    ) -> None:
        self._kube = kube
        self._receipts = receipts
        """The rate-limited receipt publisher (lattice_adapters.kube_events) of this operator."""
        self._clock = clock or SystemClock()
        self._instance = instance

    async def create(self, resource: Resource, namespace: str, manifest: dict[str, Any]) -> bool:
        try:
            await self._kube.create(resource_path(*resource, namespace), manifest)
        except AlreadyExists:
            return False
        return True

    async def create_or_read(
        self, resource: Resource, namespace: str, manifest: dict[str, Any]
    ) -> tuple[dict[str, Any] | None, bool]:
        try:
            return await self._kube.create(resource_path(*resource, namespace), manifest), True
        except AlreadyExists:
            pass
        try:
            return await self.read(resource, namespace, manifest["metadata"]["name"]), False
        except NotFound:
            return None, False

    async def read(self, resource: Resource, namespace: str, name: str) -> dict[str, Any]:
        return await self._kube.get(resource_path(*resource, namespace, name))

    async def list(
        self, resource: Resource, namespace: str, *, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        # The API server applies the selector (any of its forms): nothing else comes back.
        params = {"labelSelector": label_selector} if label_selector else None
        listed = await self._kube.get(resource_path(*resource, namespace), params)
        return list(listed.get("items") or [])

    async def delete(
        self, resource: Resource, namespace: str, name: str, *, uid: str | None = None
    ) -> bool:
        options = None
        if uid:
            options = {
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "preconditions": {"uid": uid},
                "propagationPolicy": "Background",
            }
        try:
            await self._kube.request(
                "DELETE", resource_path(*resource, namespace, name), body=options
            )
        except (NotFound, Conflict):  # Conflict: the uid precondition no longer holds
            return False
        return True

    async def patch(
        self, resource: Resource, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        return await self._kube.merge_patch(resource_path(*resource, namespace, name), patch)

    async def patch_status(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        status: dict[str, Any],
        *,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        path = resource_path(*resource, namespace, name, "status")
        body: dict[str, Any] = {"status": status}
        if resource_version:
            # A resourceVersion in a merge patch is a precondition: 409 if it moved on.
            body["metadata"] = {"resourceVersion": resource_version}
        return await self._kube.merge_patch(path, body)

    async def replace_status_if(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        status: dict[str, Any],
        *,
        generation: int | None,
    ) -> dict[str, Any] | None:
        # The generation moves with every spec edit and only then: the test is the
        # precondition "the spec this status was decided on".
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": "/metadata/generation", "value": generation},
            {"op": "add", "path": "/status", "value": status},
        ]
        try:
            return await self._kube.json_patch(
                resource_path(*resource, namespace, name, "status"), ops
            )
        except PatchTestFailed:
            return None

    async def post_event(
        self, regarding: ObjectRef, *, reason: str, note: str, warning: bool = False
    ) -> None:
        await post_notice(
            self,
            regarding,
            reason=reason,
            note=note,
            warning=warning,
            clock=self._clock,
            controller=REPORTING_CONTROLLER,
            instance=self._instance,
        )

    async def publish_receipts(
        self, regarding: ObjectRef, receipts: Iterable[LifecycleReceipt]
    ) -> None:
        if self._receipts is None:
            raise RuntimeError("the receipt publisher is not started yet")
        await self._receipts.publish(regarding, receipts)


__all__ = ["KubeClusterWriter"]
