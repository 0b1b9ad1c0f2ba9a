"""The cluster writer port (`lattice_operator.ports.cluster.ClusterWriter`) over the API
client: the handlers hand their plans' writes to it, and only it knows REST paths and
which answers are not errors (AlreadyExists on a create, a failed JSON-patch test)."""

from __future__ import annotations

from typing import Any

from lattice_adapters.kube.api_errors import AlreadyExists, NotFound, PatchTestFailed
from lattice_adapters.kube.client import KubeClient, resource_path

Resource = tuple[str, str, str]


class KubeClusterWriter:
    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube

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

    async def patch(
        self, resource: Resource, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        return await self._kube.merge_patch(resource_path(*resource, namespace, name), patch)

    async def patch_status(
        self, resource: Resource, namespace: str, name: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        path = resource_path(*resource, namespace, name, "status")
        return await self._kube.merge_patch(path, {"status": status})

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


__all__ = ["KubeClusterWriter"]
