"""`lattice cluster up|down`: the local control plane (development and tests), or with
`--node` a whole single-node cluster in a network namespace of its own."""

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
DEFAULT_NODE_STATE = Path(".lattice/node")


@app.command()
def up(
    state_dir: StateDir = DEFAULT_STATE,
    controller_manager: Annotated[
        bool, typer.Option(help="Also start kube-controller-manager (GC, namespace deletion).")
    ] = True,
    node: Annotated[
        bool,
        typer.Option(
            "--node",
            help="A whole cluster with a node (kubelet, containerd, kube-proxy, a CNI bridge) "
            "in a network namespace of its own, where Pods run. Needs root.",
        ),
    ] = False,
    audit_log: Annotated[
        bool, typer.Option(help="With --node: the API server's audit log in the state dir.")
    ] = False,
) -> None:
    """Build (once) and start etcd, kube-apiserver and kube-controller-manager on 127.0.0.1;
    with --node, a single-node cluster instead."""
    if node:
        _node_up(
            (DEFAULT_NODE_STATE if state_dir == DEFAULT_STATE else state_dir).resolve(), audit_log
        )
        return
    from lattice_devtools.localcluster import ControlPlaneError, LocalControlPlane, find_bin_dir

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


def _node_up(state_dir: Path, audit_log: bool) -> None:
    from lattice_devtools.localcluster.node import NodeError, start_node_cluster

    repo = Path.cwd()  # the clone: hack/ builds the node's binaries
    started = time.monotonic()
    try:
        cluster = start_node_cluster(state_dir, repo, audit_log=audit_log)
    except NodeError as exc:
        typer.echo(f"cluster up --node failed: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"node cluster ready in {time.monotonic() - started:.1f}s")
    typer.echo(f"network namespace: {cluster.netns} (the API server is reachable only inside it)")
    typer.echo(f"export KUBECONFIG={cluster.kubeconfig}")
    typer.echo(f"enter it:  nsenter --net=/run/netns/{cluster.netns} bash")
    typer.echo(f"stop it:   lattice cluster down --state-dir {state_dir}")


@app.command()
def down(state_dir: StateDir = DEFAULT_STATE) -> None:
    """Stop exactly the processes `lattice cluster up` started, and remove the state (without
    --state-dir: the default control plane and the default node cluster)."""
    from lattice_devtools.localcluster import ControlPlaneError, stop_from_state
    from lattice_devtools.localcluster.node import NodeError, stop_node_cluster

    node_state = DEFAULT_NODE_STATE if state_dir == DEFAULT_STATE else state_dir
    try:
        if stop_node_cluster(node_state.resolve()):
            typer.echo("node cluster stopped")
            if state_dir != DEFAULT_STATE:
                return
    except NodeError as exc:
        typer.echo(f"cluster down refused: {exc}", err=True)
        raise typer.Exit(1) from exc
    try:
        stopped = stop_from_state(state_dir.resolve())
    except ControlPlaneError as exc:
        typer.echo(f"cluster down refused: {exc}", err=True)
        raise typer.Exit(1) from exc
    if stopped:
        typer.echo("control plane stopped")
    else:
        typer.echo(f"no control plane recorded in {state_dir}")
