"""`lattice run`: the operator."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from lattice_operator.cli._errors import CliError
from lattice_operator.cli._kube import Context, Kubeconfig


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
        bool,
        typer.Option(help="Reconcile at once, without leader election (one replica, or tests)."),
    ] = False,
    lease_name: Annotated[
        str | None, typer.Option(help="Name of the leader Lease the replicas share.")
    ] = None,
    liveness_host: Annotated[str | None, typer.Option(help="Liveness endpoint address.")] = None,
    liveness_port: Annotated[
        int | None, typer.Option(help="Liveness endpoint port (/healthz); 0 disables it.")
    ] = None,
    metrics_host: Annotated[str | None, typer.Option(help="/metrics address.")] = None,
    metrics_port: Annotated[int | None, typer.Option(help="/metrics port; 0 disables it.")] = None,
    stream_host: Annotated[str | None, typer.Option(help="Stream and live page address.")] = None,
    stream_port: Annotated[
        int | None, typer.Option(help="Stream and live page port; 0 disables them.")
    ] = None,
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
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """Run the operator against the current kubeconfig (or in-cluster credentials)."""
    from pydantic import ValidationError

    from lattice_adapters.kube import use_by_default

    use_by_default(kubeconfig, context)

    from lattice_operator.settings import OperatorSettings

    data: dict[str, Any] = {} if config is None else _read_config(config)
    overrides: dict[str, Any] = {
        "namespaces": tuple(namespace) if namespace else None,
        "metrics_host": metrics_host,
        "metrics_port": metrics_port,
    }
    _merge(data, overrides)
    _merge(
        _section(data, "leader_election"),
        {"enabled": False if standalone else None, "lease_name": lease_name},
    )
    _merge(_section(data, "probe"), {"host": liveness_host, "port": liveness_port})
    _merge(_section(data, "stream"), {"host": stream_host, "port": stream_port})
    _merge(
        _section(data, "backend"),
        {"api_url": sprites_url, "token_secret": sprites_token_secret},
    )
    try:
        settings = OperatorSettings.model_validate(data)
    except ValidationError as exc:
        where = f" in {config}" if config is not None else ""
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}"
            for e in exc.errors()
        )
        raise CliError(f"invalid settings{where}: {problems}", exit_code=2) from exc
    with _kubernetes_client_hidden():
        from lattice_operator.boot import run_operator

    code = run_operator(settings, verbose=verbose)
    if code:
        raise typer.Exit(code)


@contextlib.contextmanager
def _kubernetes_client_hidden() -> Iterator[None]:
    """Within the block, `import kubernetes` fails as if the package were not installed
    (unless it is loaded already); it is importable again afterwards (the tests use it).

    Importing kopf and creating its default registry import the `kubernetes` client if it
    is installed (~0.35 s of CPU, a seventh of the operator's start), only to recognise its
    model objects in adopt() and to offer logging in through it. The operator hands kopf
    plain dicts and logs in with its own handlers (handlers/_registry.py), before which
    kopf's fallback logins never run."""
    if "kubernetes" in sys.modules:
        yield
        return
    sys.modules["kubernetes"] = None  # type: ignore[assignment]  # None: "not installed"
    try:
        yield
    finally:
        del sys.modules["kubernetes"]


def _read_config(path: Path) -> dict[str, Any]:
    """The settings file as a mapping, or a CliError that says what is wrong with it."""
    import yaml

    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise CliError(f"cannot read settings file {path}: {reason}", exit_code=2) from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CliError(f"settings file {path} is not valid YAML: {exc}", exit_code=2) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CliError(
            f"settings file {path} must be a mapping of settings, not a {type(data).__name__}",
            exit_code=2,
        )
    return data


def _section(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.setdefault(key, {})
    if not isinstance(value, dict):
        raise CliError(f"invalid settings: {key} must be a mapping", exit_code=2)
    return value


def _merge(target: dict[str, Any], values: dict[str, Any]) -> None:
    target.update({k: v for k, v in values.items() if v is not None})
