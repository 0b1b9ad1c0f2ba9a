"""A Sprite's checkpoints through the API server, with the caller's identity: list them,
take one (a SpriteCheckpoint object), propose a restore (a checkpoint_restore Intent, which
policy classifies and, by default, a person approves). Used by `lattice mcp --cluster` and by
`lattice checkpoints`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lattice_operator.api.v1alpha1.resources import (
    API_VERSION,
    INTENTS,
    SPRITE_CHECKPOINTS,
    SPRITES,
)
from lattice_operator.mcp.errors import ToolError

COMMENT_CHARS = 1024


def _path(plural: str, namespace: str, name: str | None = None) -> str:
    from lattice_adapters.kube import resource_path

    return resource_path(SPRITES.group, SPRITES.version, plural, namespace, name)


def _checked(args: Mapping[str, Any], name: str, *, optional: bool = False) -> str | None:
    """An object name Kubernetes would accept, else INVALID_ARGUMENT naming the parameter."""
    from lattice_adapters.kube import InvalidName, check_name

    value = args.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise ToolError(
            "INVALID_ARGUMENT",
            f"Parameter '{name}' must be a non-empty string",
            "Pass the object's name as shown",
        )
    try:
        return check_name(value)
    except InvalidName as err:
        raise ToolError(
            "INVALID_ARGUMENT", f"Parameter '{name}': {err}", "Pass the object's name as shown"
        ) from None


def _namespace(args: Mapping[str, Any]) -> str:
    from lattice_adapters.kube import InvalidName, check_namespace

    try:
        return check_namespace(str(args.get("namespace") or "default"))
    except InvalidName as err:
        raise ToolError(
            "INVALID_ARGUMENT", f"Parameter 'namespace': {err}", "Pass a namespace's name"
        ) from None


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


async def list_checkpoints(kube: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    """The Sprite's newest backend checkpoints (its status) and its SpriteCheckpoints."""
    namespace, sprite = _namespace(args), _checked(args, "sprite")
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


async def take_checkpoint(kube: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    """Create a SpriteCheckpoint; the operator takes the backend checkpoint."""
    namespace, sprite = _namespace(args), _checked(args, "sprite")
    comment = args.get("comment", "")
    if not isinstance(comment, str) or len(comment) > COMMENT_CHARS:
        raise ToolError(
            "INVALID_ARGUMENT",
            f"Parameter 'comment' must be a string of at most {COMMENT_CHARS} characters",
            "Shorten it",
        )
    body = checkpoint_body(sprite or "", comment, _checked(args, "name", optional=True))
    created = await kube.create(_path(SPRITE_CHECKPOINTS.plural, namespace), body)
    return {
        "name": created["metadata"]["name"],
        "namespace": namespace,
        "sprite": sprite,
        "note": "Created. The operator takes the checkpoint once the Sprite is Ready; "
        "status.phase becomes Ready with status.checkpointId.",
    }


async def propose_restore(kube: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    """Create a checkpoint_restore Intent for a SpriteCheckpoint or a backend id."""
    namespace, sprite = _namespace(args), _checked(args, "sprite")
    checkpoint = _checked(args, "checkpoint", optional=True)
    checkpoint_id = args.get("checkpoint_id")
    if (checkpoint is None) == (checkpoint_id is None):
        raise ToolError(
            "INVALID_ARGUMENT",
            "Exactly one of 'checkpoint' (a SpriteCheckpoint) or 'checkpoint_id' (a backend "
            "id such as v3) must be given",
            "See lattice_cluster_checkpoints_list",
        )
    if checkpoint_id is not None and (not isinstance(checkpoint_id, str) or not checkpoint_id):
        raise ToolError(
            "INVALID_ARGUMENT", "Parameter 'checkpoint_id' must be a non-empty string", "e.g. v3"
        )
    body = restore_body(
        sprite or "",
        checkpoint=checkpoint,
        checkpoint_id=checkpoint_id,
        name=_checked(args, "name", optional=True),
    )
    created = await kube.create(_path(INTENTS.plural, namespace), body)
    return {
        "name": created["metadata"]["name"],
        "namespace": namespace,
        "phase": (created.get("status") or {}).get("phase"),
        "note": "Proposed. Policy decides; by default a person approves it with "
        "`lattice approve` under their own identity. It is refused while a Run holds the Sprite.",
    }


__all__ = [
    "checkpoint_body",
    "list_checkpoints",
    "propose_restore",
    "restore_body",
    "take_checkpoint",
]
