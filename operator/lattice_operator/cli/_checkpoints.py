"""`lattice checkpoints list|take|restore`: a Sprite's checkpoints, with your identity.

take creates a SpriteCheckpoint (the operator takes the backend checkpoint); restore proposes
a checkpoint_restore Intent, which policy classifies and a person approves (`lattice approve`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any

import typer

from lattice_operator.cli._format import safe
from lattice_operator.cli._kube import Context, Kubeconfig, Namespace, target

app = typer.Typer(help="A Sprite's checkpoints: list, take, restore.", no_args_is_help=True)

SpriteArg = Annotated[str, typer.Argument(help="The Sprite.")]
NameOpt = Annotated[
    str | None, typer.Option("--name", help="The new object's name (default: generated).")
]


def _call(
    handler: Callable[[Any, Mapping[str, Any]], Awaitable[dict[str, Any]]],
    args: dict[str, Any],
    namespace: str | None,
    kubeconfig: str | None,
    context: str | None,
) -> dict[str, Any]:
    from lattice_operator.cli._errors import CliError
    from lattice_operator.mcp.errors import ToolError

    where = target(kubeconfig, context, namespace)
    given = {**{k: v for k, v in args.items() if v is not None}, "namespace": where.namespace}
    try:
        return where.call(lambda kube: handler(kube, given))
    except ToolError as exc:
        raise CliError(exc.message, exit_code=2) from exc


@app.command("list")
def list_(
    sprite: SpriteArg,
    namespace: Namespace = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """The Sprite's newest checkpoints (Runs' too) and the SpriteCheckpoints that hold some."""
    from lattice_operator.mcp.checkpoint_tools import LIST_CHECKPOINTS

    found = _call(LIST_CHECKPOINTS.run, {"sprite": sprite}, namespace, kubeconfig, context)
    typer.echo(f"{'ID':<12} {'CREATED':<26} {'OBJECT':<30} COMMENT")
    for entry in found["checkpoints"]:
        typer.echo(
            f"{safe(entry['id']):<12} {safe(entry.get('createTime') or '-'):<26} "
            f"{safe(entry.get('object') or '-'):<30} {safe(entry.get('comment') or '')}"
        )
    pending = [o for o in found["objects"] if o["phase"] != "Ready"]
    for obj in pending:
        typer.echo(f"{'-':<12} {'-':<26} {safe(obj['name']):<30} ({obj['phase'] or 'Pending'})")


@app.command("take")
def take(
    sprite: SpriteArg,
    comment: Annotated[str, typer.Option("--comment", "-m", help="Stored with it.")] = "",
    name: NameOpt = None,
    namespace: Namespace = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """Take a checkpoint of the Sprite's filesystem (creates a SpriteCheckpoint)."""
    from lattice_operator.mcp.checkpoint_tools import TAKE_CHECKPOINT

    args = {"sprite": sprite, "comment": comment, "name": name}
    made = _call(TAKE_CHECKPOINT.run, args, namespace, kubeconfig, context)
    typer.echo(f"spritecheckpoint/{safe(made['name'])} created")


@app.command("restore")
def restore(
    sprite: SpriteArg,
    checkpoint: Annotated[
        str | None, typer.Argument(help="The SpriteCheckpoint to restore.")
    ] = None,
    checkpoint_id: Annotated[
        str | None, typer.Option("--id", help="A backend checkpoint id (v3) instead.")
    ] = None,
    name: NameOpt = None,
    namespace: Namespace = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """Propose rolling the Sprite back to a checkpoint (a checkpoint_restore Intent)."""
    from lattice_operator.mcp.checkpoint_tools import PROPOSE_RESTORE

    args = {"sprite": sprite, "checkpoint": checkpoint, "checkpoint_id": checkpoint_id}
    made = _call(PROPOSE_RESTORE.run, {**args, "name": name}, namespace, kubeconfig, context)
    typer.echo(
        f"intent/{safe(made['name'])} proposed; approve it with "
        f"`lattice approve {safe(made['name'])}` if policy asks for approval"
    )


__all__ = ["app"]
