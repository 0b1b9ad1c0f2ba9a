"""A Sprite's checkpoints through the API server, with the caller's identity: list them,
take one (a SpriteCheckpoint object), propose a restore (a checkpoint_restore Intent, which
policy classifies and, by default, a person approves). Used by `lattice mcp --cluster` and by
`lattice checkpoints`."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from pydantic import Field

from lattice_operator.api.v1alpha1.resources import (
    API_VERSION,
    INTENTS,
    SPRITE_CHECKPOINTS,
    SPRITES,
)
from lattice_operator.mcp.errors import ToolError
from lattice_operator.mcp.tool_input import Tool, ToolInput, tool

COMMENT_CHARS = 1024


def _path(plural: str, namespace: str, name: str | None = None) -> str:
    from lattice_adapters.kube import resource_path

    return resource_path(SPRITES.group, SPRITES.version, plural, namespace, name)


NAMESPACE = Field(
    default=None, description="Namespace (default: the kubeconfig context's, else default)"
)
GENERATED = Field(default=None, description="Default: a generated name")


def checked_name(value: str | None, parameter: str) -> str:
    """An object name Kubernetes would accept, else INVALID_ARGUMENT naming the parameter."""
    from lattice_adapters.kube import InvalidName, check_name

    if not value:
        raise ToolError(
            "INVALID_ARGUMENT",
            f"Parameter '{parameter}' must be a non-empty string",
            "Pass the object's name as shown",
        )
    try:
        return check_name(value)
    except InvalidName as err:
        raise ToolError(
            "INVALID_ARGUMENT",
            f"Parameter '{parameter}': {err}",
            "Pass the object's name as shown",
        ) from None


def _optional_name(value: str | None, parameter: str) -> str | None:
    return None if value is None else checked_name(value, parameter)


def _namespace(value: str | None) -> str:
    from lattice_adapters.kube import InvalidName, check_namespace

    try:
        return check_namespace(value or "default")
    except InvalidName as err:
        raise ToolError(
            "INVALID_ARGUMENT", f"Parameter 'namespace': {err}", "Pass a namespace's name"
        ) from None


class ListInput(ToolInput):
    sprite: str
    namespace: str | None = NAMESPACE


class TakeInput(ToolInput):
    sprite: str
    comment: str | None = Field(default=None, max_length=COMMENT_CHARS)
    name: str | None = GENERATED
    namespace: str | None = NAMESPACE


class RestoreInput(ToolInput):
    sprite: str
    checkpoint: str | None = None
    checkpoint_id: str | None = None
    name: str | None = GENERATED
    namespace: str | None = NAMESPACE


def checkpoint_body(sprite: str, comment: str, name: str | None) -> dict[str, Any]:
    """A SpriteCheckpoint of `sprite` (a generated name unless `name`)."""
    metadata: dict[str, Any] = {"name": name} if name else {"generateName": f"{sprite[:50]}-"}
    return {
        "apiVersion": API_VERSION,
        "kind": SPRITE_CHECKPOINTS.kind,
        "metadata": metadata,
        "spec": {"spriteRef": {"name": sprite}, "comment": comment},
    }


def restore_body(
    sprite: str, *, checkpoint: str | None, checkpoint_id: str | None, name: str | None
) -> dict[str, Any]:
    """A checkpoint_restore Intent (a generated name unless `name`)."""
    which = {"checkpoint": checkpoint} if checkpoint else {"checkpointId": checkpoint_id}
    metadata: dict[str, Any] = (
        {"name": name} if name else {"generateName": f"restore-{sprite[:40]}-"}
    )
    return {
        "apiVersion": API_VERSION,
        "kind": INTENTS.kind,
        "metadata": metadata,
        "spec": {
            "kind": "checkpoint_restore",
            "summary": f"restore Sprite {sprite} to {checkpoint or checkpoint_id}",
            "subject": {"type": "sprite", "ref": sprite},
            "proposedBy": {"type": "user"},
            "params": {"checkpointRestore": {"sprite": sprite, **which}},
        },
    }


async def list_checkpoints(kube: Any, args: ListInput) -> dict[str, Any]:
    """The Sprite's newest backend checkpoints (its status) and its SpriteCheckpoints."""
    namespace, sprite = _namespace(args.namespace), checked_name(args.sprite, "sprite")
    obj = await kube.get(_path(SPRITES.plural, namespace, sprite))
    listing = await kube.get(_path(SPRITE_CHECKPOINTS.plural, namespace))
    objects = [
        {
            "name": o["metadata"]["name"],
            "phase": (o.get("status") or {}).get("phase"),
            "checkpoint_id": (o.get("status") or {}).get("checkpointId"),
            "comment": (o.get("spec") or {}).get("comment", ""),
            "deletion_policy": (o.get("spec") or {}).get("deletionPolicy", "Delete"),
            "created": o["metadata"].get("creationTimestamp"),
        }
        for o in listing.get("items", [])
        if ((o.get("spec") or {}).get("spriteRef") or {}).get("name") == sprite
    ]
    return {
        "sprite": sprite,
        "checkpoints": (obj.get("status") or {}).get("checkpoints") or [],
        "objects": objects,
    }


async def take_checkpoint(kube: Any, args: TakeInput) -> dict[str, Any]:
    """Create a SpriteCheckpoint; the operator takes the backend checkpoint."""
    namespace, sprite = _namespace(args.namespace), checked_name(args.sprite, "sprite")
    name = _optional_name(args.name, "name")
    body = checkpoint_body(sprite, args.comment or "", name)
    created = await kube.create(_path(SPRITE_CHECKPOINTS.plural, namespace), body)
    return {
        "name": created["metadata"]["name"],
        "namespace": namespace,
        "sprite": sprite,
        "note": "Created. The operator takes the checkpoint once the Sprite is Ready; "
        "status.phase becomes Ready with status.checkpointId.",
    }


async def propose_restore(kube: Any, args: RestoreInput) -> dict[str, Any]:
    """Create a checkpoint_restore Intent for a SpriteCheckpoint or a backend id."""
    namespace, sprite = _namespace(args.namespace), checked_name(args.sprite, "sprite")
    checkpoint = _optional_name(args.checkpoint, "checkpoint")
    checkpoint_id = args.checkpoint_id
    if (checkpoint is None) == (checkpoint_id is None):
        raise ToolError(
            "INVALID_ARGUMENT",
            "Exactly one of 'checkpoint' (a SpriteCheckpoint) or 'checkpoint_id' (a backend "
            "id such as v3) must be given",
            "See lattice_cluster_checkpoints_list",
        )
    if checkpoint_id is not None and not checkpoint_id:
        raise ToolError(
            "INVALID_ARGUMENT", "Parameter 'checkpoint_id' must be a non-empty string", "e.g. v3"
        )
    body = restore_body(
        sprite,
        checkpoint=checkpoint,
        checkpoint_id=checkpoint_id,
        name=_optional_name(args.name, "name"),
    )
    created = await kube.create(_path(INTENTS.plural, namespace), body)
    return {
        "name": created["metadata"]["name"],
        "namespace": namespace,
        "phase": (created.get("status") or {}).get("phase"),
        "note": "Proposed. Policy decides; by default a person approves it with "
        "`lattice approve` under their own identity. It is refused while a Run holds the Sprite.",
    }


Handler = Awaitable[dict[str, Any]]
LIST_CHECKPOINTS: Tool[Any, Handler] = tool(
    "lattice_cluster_checkpoints_list",
    "A Sprite's checkpoints: its newest backend checkpoints (Runs' too) and the "
    "SpriteCheckpoint objects that hold some (name, phase, checkpoint id, comment).",
    ListInput,
    list_checkpoints,
)
TAKE_CHECKPOINT: Tool[Any, Handler] = tool(
    "lattice_cluster_checkpoint_take",
    "Take a checkpoint of a Sprite's filesystem: creates a SpriteCheckpoint (deleting it "
    "later deletes the backend checkpoint).",
    TakeInput,
    take_checkpoint,
)
PROPOSE_RESTORE: Tool[Any, Handler] = tool(
    "lattice_cluster_checkpoint_propose_restore",
    "Propose rolling a Sprite back to a checkpoint (a checkpoint_restore Intent): give "
    "'checkpoint' (a SpriteCheckpoint) or 'checkpoint_id' (v3). Policy decides; approval, "
    "when needed, is a person's act and not a tool.",
    RestoreInput,
    propose_restore,
)


__all__ = [
    "GENERATED",
    "LIST_CHECKPOINTS",
    "NAMESPACE",
    "PROPOSE_RESTORE",
    "TAKE_CHECKPOINT",
    "checked_name",
    "checkpoint_body",
    "list_checkpoints",
    "propose_restore",
    "restore_body",
    "take_checkpoint",
]
