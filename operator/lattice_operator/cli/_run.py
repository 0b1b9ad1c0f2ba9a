"""`lattice run`: the operator."""

from __future__ import annotations

from typing import Annotated

import typer

from lattice_operator.settings import OperatorSettings, PeeringSettings, ProbeSettings


def run(
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
        str, typer.Option(help="Name of the ClusterKopfPeering to join.")
    ] = "lattice",
    priority: Annotated[int, typer.Option(help="Peering priority; distinct per replica.")] = 0,
    liveness_host: Annotated[str, typer.Option(help="Liveness endpoint address.")] = "127.0.0.1",
    liveness_port: Annotated[
        int, typer.Option(help="Liveness endpoint port (/healthz); 0 disables it.")
    ] = 8080,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Run the operator against the current kubeconfig (or in-cluster credentials)."""
    settings = OperatorSettings(
        namespaces=tuple(namespace or ()),
        peering=PeeringSettings(name=peering, standalone=standalone, priority=priority),
        probe=ProbeSettings(host=liveness_host, port=liveness_port),
    )
    from lattice_operator.boot import run_operator

    run_operator(settings, verbose=verbose)
