"""`lattice cluster up|down|env`: the local control plane (development and tests)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="The local Kubernetes control plane built by hack/.", no_args_is_help=True)

StateDir = Annotated[
    Path,
    typer.Option("--state-dir", help="Where certificates, data, logs and the kubeconfig live."),
]
DEFAULT_STATE = Path(".lattice/cluster")


@app.command()
def up(
    state_dir: StateDir = DEFAULT_STATE,
    controller_manager: Annotated[
        bool, typer.Option(help="Also start kube-controller-manager (GC, namespace deletion).")
    ] = True,
) -> None:
    """Build (once) and start etcd, kube-apiserver and kube-controller-manager on 127.0.0.1."""
    from lattice_adapters.localcluster import ControlPlaneError, LocalControlPlane, find_bin_dir

    try:
        bin_dir = find_bin_dir()
        started = time.monotonic()
        plane = LocalControlPlane(
            bin_dir, state_dir.resolve(), controller_manager=controller_manager
        )
        state = plane.start()
    except ControlPlaneError as exc:
        typer.echo(f"cluster up failed: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"control plane ready in {time.monotonic() - started:.1f}s at {state.server}")
    typer.echo(f"export KUBECONFIG={state.kubeconfig}")


@app.command()
def down(state_dir: StateDir = DEFAULT_STATE) -> None:
    """Stop exactly the processes `lattice cluster up` started, and remove the state."""
    from lattice_adapters.localcluster import ControlPlaneError, stop_from_state

    try:
        stopped = stop_from_state(state_dir.resolve())
    except ControlPlaneError as exc:
        typer.echo(f"cluster down refused: {exc}", err=True)
        raise typer.Exit(1) from exc
    if stopped:
        typer.echo("control plane stopped")
    else:
        typer.echo(f"no control plane recorded in {state_dir}")
