"""The one fake of the cluster writer port (`ports.cluster.ClusterWriter`): objects in
memory, every call recorded, the port's answers as the adapter gives them (AlreadyExists is
False or a read, a status decided on another generation is None, a read of nothing NotFound);
Events and receipts posted are kept apart from the writes (`posted`, `receipts`); a
manifest with only `generateName` is named as the API server would, and a list's label
selector is applied (equality terms only: any other form is refused, never ignored)."""

from __future__ import annotations

import builtins
import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lattice_adapters.kube import Conflict, NotFound
from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.lifeloop.receipts import LifecycleReceipt

Resource = tuple[str, str, str]


@dataclass(frozen=True)
class Call:
    verb: str
    """create, create_or_read, read, list, delete, patch, patch_status or replace_status_if."""
    plural: str
    namespace: str
    name: str
    body: dict[str, Any] | None = None
    generation: int | None = None
    """replace_status_if: the generation the status was decided on."""
    selector: str | None = None
    """list: the label selector."""


@dataclass(frozen=True)
class Posted:
    """An Event posted through the port."""

    regarding: ObjectRef
    reason: str
    note: str
    warning: bool = False


class FakeClusterWriter:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        """By (plural, namespace, name); updated in place (a test's body sees the writes)."""
        self.calls: list[Call] = []
        self.posted: list[Posted] = []
        self.receipts: list[tuple[ObjectRef, LifecycleReceipt]] = []
        self._faults: dict[str, list[BaseException]] = {}
        self._generated = 0

    def fail(self, verb: str, *errors: BaseException) -> None:
        """The next calls of `verb` raise these, in order (after being recorded)."""
        self._faults.setdefault(verb, []).extend(errors)

    def _fault(self, verb: str) -> None:
        queued = self._faults.get(verb)
        if queued:
            raise queued.pop(0)

    def put(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store `obj` as it is (the same dict)."""
        meta = obj["metadata"]
        self.objects[(plural, meta.get("namespace", "ns"), meta["name"])] = obj
        return obj

    def verbs(self) -> list[str]:
        return [c.verb for c in self.calls]

    def _stored(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        try:
            return self.objects[(plural, namespace, name)]
        except KeyError:
            raise NotFound(404, "NotFound", f"{plural} {namespace}/{name} not found", {}) from None

    def _name(self, manifest: dict[str, Any]) -> str:
        meta = manifest["metadata"]
        if "name" not in meta:  # the API server's generateName: a fresh name every time
            self._generated += 1
            meta["name"] = f"{meta['generateName']}{self._generated:05d}"
        name: str = meta["name"]
        return name

    def _create(self, plural: str, namespace: str, manifest: dict[str, Any]) -> bool:
        name = manifest["metadata"]["name"]
        if (plural, namespace, name) in self.objects:
            return False
        stored = copy.deepcopy(manifest)
        stored["metadata"] = {**stored["metadata"], "namespace": namespace, "uid": f"{name}-uid"}
        self.objects[(plural, namespace, name)] = stored
        return True

    async def create(self, resource: Resource, namespace: str, manifest: dict[str, Any]) -> bool:
        manifest = copy.deepcopy(manifest)
        name = self._name(manifest)
        self.calls.append(Call("create", resource[2], namespace, name, manifest))
        self._fault("create")
        return self._create(resource[2], namespace, manifest)

    async def create_or_read(
        self, resource: Resource, namespace: str, manifest: dict[str, Any]
    ) -> tuple[dict[str, Any] | None, bool]:
        manifest = copy.deepcopy(manifest)
        name = self._name(manifest)
        self.calls.append(Call("create_or_read", resource[2], namespace, name, manifest))
        self._fault("create_or_read")
        created = self._create(resource[2], namespace, manifest)
        return copy.deepcopy(self.objects[(resource[2], namespace, name)]), created

    async def read(self, resource: Resource, namespace: str, name: str) -> dict[str, Any]:
        self.calls.append(Call("read", resource[2], namespace, name))
        self._fault("read")
        return copy.deepcopy(self._stored(resource[2], namespace, name))

    async def patch(
        self, resource: Resource, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        self.calls.append(Call("patch", resource[2], namespace, name, patch))
        self._fault("patch")
        stored = self._stored(resource[2], namespace, name)
        for key, value in patch.items():
            stored[key] = {**stored.get(key, {}), **value} if isinstance(value, dict) else value
        return copy.deepcopy(stored)

    async def list(
        self, resource: Resource, namespace: str, *, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        self.calls.append(Call("list", resource[2], namespace, "", selector=label_selector))
        wanted = equality_selector(label_selector or "")
        self._fault("list")
        return [
            copy.deepcopy(obj)
            for (plural, ns, _), obj in self.objects.items()
            if (plural, ns) == (resource[2], namespace)
            and wanted.items() <= (obj["metadata"].get("labels") or {}).items()
        ]

    def created(self, plural: str) -> builtins.list[dict[str, Any]]:
        """The bodies of the creates of that type, in order (made or found there)."""
        return [c.body for c in self.calls if c.verb == "create" and c.plural == plural and c.body]

    async def delete(
        self, resource: Resource, namespace: str, name: str, *, uid: str | None = None
    ) -> bool:
        self.calls.append(Call("delete", resource[2], namespace, name))
        self._fault("delete")
        key = (resource[2], namespace, name)
        stored = self.objects.get(key)
        if stored is None or (uid and stored["metadata"].get("uid") != uid):
            return False
        del self.objects[key]
        return True

    async def patch_status(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        status: dict[str, Any],
        *,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        self.calls.append(Call("patch_status", resource[2], namespace, name, status))
        self._fault("patch_status")
        stored = self._stored(resource[2], namespace, name)
        if resource_version and stored["metadata"].get("resourceVersion") != resource_version:
            raise Conflict(409, "Conflict", f"{name}: the object has been modified", {})
        stored["status"] = {**stored.get("status", {}), **status}
        return copy.deepcopy(stored)

    async def replace_status_if(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        status: dict[str, Any],
        *,
        generation: int | None,
    ) -> dict[str, Any] | None:
        self.calls.append(
            Call("replace_status_if", resource[2], namespace, name, status, generation)
        )
        self._fault("replace_status_if")
        stored = self._stored(resource[2], namespace, name)
        if stored["metadata"].get("generation") != generation:
            return None
        stored["status"] = status
        return copy.deepcopy(stored)

    async def post_event(
        self, regarding: ObjectRef, *, reason: str, note: str, warning: bool = False
    ) -> None:
        self.posted.append(Posted(regarding, reason, note, warning))

    async def publish_receipts(
        self, regarding: ObjectRef, receipts: Iterable[LifecycleReceipt]
    ) -> None:
        self.receipts.extend((regarding, r) for r in receipts)

    def reasons(self) -> builtins.list[str]:
        """The reasons of the Events posted, in order."""
        return [p.reason for p in self.posted]


def equality_selector(selector: str) -> dict[str, str]:
    """A label selector of equality terms (`k=v` or `k==v`, comma-separated; "" selects
    all) as the labels it requires; ValueError naming the term for any other form (`!=`,
    `in`, `notin`, `k`, `!k`), which this fake does not apply."""
    wanted: dict[str, str] = {}
    for term in filter(None, (t.strip() for t in selector.split(","))):
        key, sep, value = term.replace("==", "=", 1).partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or key.endswith("!") or "=" in value or " " in key:
            raise ValueError(
                f"label_selector term {term!r} of {selector!r}: FakeClusterWriter applies "
                "equality terms only (k=v[,k2=v2])"
            )
        wanted[key] = value
    return wanted
