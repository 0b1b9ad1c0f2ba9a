"""The cluster-side ports of the Run driver: Sprites from memory, grants and secrets, status
writes and receipt Events (the handlers implement them over kopf and the API server)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.api.v1alpha1.sprite import EnvironmentStep
from lattice_operator.lifeloop.receipts import LifecycleReceipt
from lattice_operator.ports.forge import Forge


@dataclass(frozen=True)
class SpriteView:
    """What a Run needs to know about its Sprite."""

    ready: bool
    """Ready=True: the backend sprite exists and matches the spec."""
    backend_name: str | None
    """The sprite's name at the backend."""
    reason: str = ""
    """Why it is not ready, for humans."""
    run_policy: str = "Any"
    """`spec.runPolicy`: Any, or IntentOnly (only Runs an Intent created)."""
    environment: tuple[EnvironmentStep, ...] = ()
    """`spec.environment`: the steps a Run runs in the sprite before the agent's command."""
    cluster_environment: tuple[EnvironmentStep, ...] = ()
    """The cluster-wide Environment's steps, run before the Sprite's own."""


class SpriteDirectory(Protocol):
    """Looks Sprites up from memory (kopf's index), without API calls."""

    def lookup(self, namespace: str, name: str) -> SpriteView | None: ...

    def holder(self, namespace: str, sprite: str, run_uid: str) -> str | None:
        """The name of the Run that has the Sprite before `run_uid` (one active Run per Sprite)."""
        ...


@dataclass(frozen=True)
class ForgeGrant:
    """The forge work an Intent was made for: where its sprite's forge actions go."""

    repo: str
    """owner/name."""
    issue: int | None = None
    """The issue the Intent is about (POST_COMMENT and LABEL_ISSUE default to it)."""
    pull: int | None = None
    """The pull request it is about."""
    base_branch: str | None = None
    """The branch the sprite's workspace was made from (OPEN_PR's `base`)."""
    base_sha: str | None = None
    """The commit the sprite was given (its branch must descend from it)."""
    head_branch: str | None = None
    """The one branch the sprite may have pushed (OPEN_PR's `head`)."""
    expected_head: str | None = None
    """Where that branch is on the forge now (None: not pushed yet)."""


@dataclass(frozen=True)
class Grants:
    """What an Intent grants the sprite doing its work."""

    intent: str
    """The Intent's name."""
    allowed_actions: frozenset[str]
    """ACTION_REQUEST actions the sprite may ask for."""
    credentials: dict[str, tuple[str, str]]
    """Credential name → (Secret name, key) the sprite may FETCH."""
    uid: str = ""
    """The Intent's uid: its own Run has a controller ownerReference to it."""
    phase: str = "Proposed"
    """The Intent's phase: grants apply only while it is approved and executing."""
    run: str | None = None
    """The Run the Intent created (its status.runRef): the only Run its grants apply to."""
    forge: ForgeGrant | None = None
    """For a GitHub Intent: its repository, issue or pull request, and workspace."""


class ActionServices(Protocol):
    """What the Run driver needs to carry out a sprite's action requests."""

    def grants(self, namespace: str, intent: str) -> Grants | None:
        """The Intent's grants (None when there is no such Intent)."""
        ...

    async def secret_value(self, namespace: str, name: str, key: str) -> bytes:
        """A Secret's key (never logged, never put in status)."""
        ...

    async def notify(self, namespace: str, intent: str | None, run: str, message: str) -> None:
        """NOTIFY_USER: an Event on the Intent (or the Run when there is none)."""
        ...

    async def propose(self, manifest: dict[str, Any]) -> None:
        """Create an Intent proposed by a sprite (AlreadyExists is success)."""
        ...

    def forge(self) -> ForgeAccess | None:
        """The forge the operator acts on (None: no GitHub is configured)."""
        ...


@dataclass(frozen=True)
class ForgeAccess:
    """The operator's forge and the limits a sprite's branch must keep."""

    forge: Forge
    max_bundle_bytes: int
    max_commits: int
    protected_branches: tuple[str, ...]


class RunStatusWriter(Protocol):
    """Writes a Run's status subresource."""

    async def write_run_status(self, namespace: str, name: str, status: dict[str, Any]) -> None: ...


Resource = tuple[str, str, str]
"""(group, version, plural) of a resource type; group "" is the core API."""


class ClusterWriter(Protocol):
    """The writes and Events a handler hands its reconciler's plan to (implemented once over
    the API client in the adapters, faked once in tests/support). Errors other than the answers
    named here are the adapter's (`KubeApiError` and its types)."""

    async def create(self, resource: Resource, namespace: str, manifest: dict[str, Any]) -> bool:
        """Create the object; False if one of that name is already there (not an error: a
        retried pass finds its own)."""
        ...

    async def create_or_read(
        self, resource: Resource, namespace: str, manifest: dict[str, Any]
    ) -> tuple[dict[str, Any] | None, bool]:
        """Create the object: (the object as stored, whether this call created it); one of
        that name already there is read instead (None: deleted before the read)."""
        ...

    async def read(self, resource: Resource, namespace: str, name: str) -> dict[str, Any]:
        """The object as stored now."""
        ...

    async def list(
        self, resource: Resource, namespace: str, *, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        """The objects of that type in the namespace, as stored now; with `label_selector`
        (equality terms `k=v[,k2=v2]`), only those whose labels match every term."""
        ...

    async def delete(
        self, resource: Resource, namespace: str, name: str, *, uid: str | None = None
    ) -> bool:
        """Delete the object; False if it was already gone (not an error). With `uid`, only
        that object: False too when the name is another object's now."""
        ...

    async def patch(
        self, resource: Resource, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        """Merge-patch the object; the object as stored afterwards."""
        ...

    async def patch_status(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        status: dict[str, Any],
        *,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """Merge `status` into the status subresource; the object as stored afterwards. With
        `resource_version`, only onto that version of the object (the adapter's Conflict
        otherwise: a view older than the stored object writes nothing)."""
        ...

    async def replace_status_if(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        status: dict[str, Any],
        *,
        generation: int | None,
    ) -> dict[str, Any] | None:
        """Replace the whole status only if the object's metadata.generation is still
        `generation` (its spec unchanged since it was read); None: it is not, nothing was
        written."""
        ...

    async def post_event(
        self, regarding: ObjectRef, *, reason: str, note: str, warning: bool = False
    ) -> None:
        """An Event regarding the object (a notice for people: evidence, not state, so a
        refused post is logged, never raised)."""
        ...

    async def publish_receipts(
        self, regarding: ObjectRef, receipts: Iterable[LifecycleReceipt]
    ) -> None:
        """Lifeloop receipts as Events regarding the object, rate-limited per object (the
        Run driver's publisher: a receipt over the limit is counted as dropped)."""
        ...


class EventStore(Protocol):
    """The part of `ClusterWriter` the receipt publisher needs: create an Event (one of that
    name already there is False, not an error: a receipt posted before a restart) and list
    Events by label. Any `ClusterWriter` is one."""

    async def create(self, resource: Resource, namespace: str, manifest: dict[str, Any]) -> bool:
        """As `ClusterWriter.create`."""
        ...

    async def list(
        self, resource: Resource, namespace: str, *, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        """As `ClusterWriter.list`."""
        ...


class ReceiptPublisher(Protocol):
    """Publishes receipts as Events regarding an object."""

    async def publish(self, regarding: ObjectRef, receipts: Iterable[LifecycleReceipt]) -> None: ...

    async def published_sequences(self, regarding: ObjectRef) -> set[int]:
        """Sequence numbers already published regarding the object (those still kept)."""
        ...

    def dropped(self, uid: str) -> int:
        """Receipts of this object not posted (rate limited)."""
        ...

    def dropped_sequences(self, uid: str) -> list[tuple[int, int]]:
        """The sequence numbers of those receipts, as inclusive ranges, oldest first."""
        ...


__all__ = [
    "ActionServices",
    "ClusterWriter",
    "EventStore",
    "ForgeAccess",
    "ForgeGrant",
    "Grants",
    "ReceiptPublisher",
    "Resource",
    "RunStatusWriter",
    "SpriteDirectory",
    "SpriteView",
]
