"""`lattice run`: the operator."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer


def run(
    config: Annotated[
        Path | None,
        typer.Option(help="YAML file of operator settings (see lattice_operator.settings)."),
    ] = None,
    namespace: Annotated[
        list[str] | None,
        typer.Option(
            "--namespace", "-n", help="Namespace (glob) to serve; repeatable. Default: all."
        ),
    ] = None,
    standalone: Annotated[
        bool, typer.Option(help="Run without peering (a single replica, or tests).")
    ] = False,
    peering: Annotated[
        str | None, typer.Option(help="Name of the ClusterKopfPeering to join.")
    ] = None,
    priority: Annotated[
        int | None, typer.Option(help="Peering priority; distinct per replica.")
    ] = None,
    liveness_host: Annotated[str | None, typer.Option(help="Liveness endpoint address.")] = None,
    liveness_port: Annotated[
        int | None, typer.Option(help="Liveness endpoint port (/healthz); 0 disables it.")
    ] = None,
    metrics_host: Annotated[str | None, typer.Option(help="/metrics address.")] = None,
    metrics_port: Annotated[int | None, typer.Option(help="/metrics port; 0 disables it.")] = None,
    sprites_url: Annotated[
        str | None, typer.Option(help="Sprites API base URL (default: $SPRITES_API_URL).")
    ] = None,
    sprites_token_secret: Annotated[
        str | None,
        typer.Option(
            help="namespace/name of a Secret with the Sprites token (default: $SPRITES_TOKEN)."
        ),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Run the operator against the current kubeconfig (or in-cluster credentials)."""
    import yaml
    from pydantic import ValidationError

    from lattice_operator.settings import OperatorSettings

    data: dict[str, Any] = {}
    if config is not None:
        data = yaml.safe_load(config.read_text()) or {}
    overrides: dict[str, Any] = {
        "namespaces": tuple(namespace) if namespace else None,
        "metrics_host": metrics_host,
        "metrics_port": metrics_port,
    }
    _merge(data, overrides)
    _merge(
        data.setdefault("peering", {}),
        {"standalone": standalone or None, "name": peering, "priority": priority},
    )
    _merge(data.setdefault("probe", {}), {"host": liveness_host, "port": liveness_port})
    _merge(
        data.setdefault("backend", {}),
        {"api_url": sprites_url, "token_secret": sprites_token_secret},
    )
    try:
        settings = OperatorSettings.model_validate(data)
    except ValidationError as exc:
        typer.echo(f"invalid settings:\n{exc}", err=True)
        raise typer.Exit(2) from exc
    from lattice_operator.boot import run_operator

    run_operator(settings, verbose=verbose)


def _merge(target: dict[str, Any], values: dict[str, Any]) -> None:
    target.update({k: v for k, v in values.items() if v is not None})
