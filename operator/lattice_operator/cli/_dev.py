"""`lattice dev`: the whole stack on this machine, with a sample driven to completion."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from pathlib import Path
from typing import Annotated

import typer
import yaml


def dev(
    exit_after_demo: Annotated[
        bool, typer.Option("--exit", help="Stop the stack after the demo instead of staying up.")
    ] = False,
    state_dir: Annotated[Path, typer.Option(help="Where the stack keeps its state.")] = Path(
        ".lattice/dev"
    ),
) -> None:
    """Start the local control plane, the CRDs, the operator and a sample; stay up until Ctrl-C."""
    from lattice_adapters.devstack import DevStackError, dev_stack

    repo = Path.cwd()
    samples = repo / "manifests" / "samples"

    def say(text: str) -> None:
        typer.secho(f"▸ {text}", fg=typer.colors.CYAN)

    try:
        with dev_stack(repo, state_dir.resolve(), say) as stack:
            stack.start_cluster()
            stack.apply_crds()
            stack.start_operator()
            sprite = yaml.safe_load((samples / "sprite.yaml").read_text())
            stack.apply(sprite)
            say("applied manifests/samples/sprite.yaml")

            def sprite_seen() -> bool:
                out = stack.kubectl("get", "sprite", "sample", "-o", "json", check=False)
                conditions = json.loads(out or "{}").get("status", {}).get("conditions", [])
                return any(c["type"] == "Ready" for c in conditions)

            stack.wait_for("the operator to report on the sample Sprite", sprite_seen)
            typer.echo(stack.kubectl("get", "lattice", "-A"))
            if exit_after_demo:
                return
            typer.secho(
                f"stack is up. In another terminal:\n  export KUBECONFIG={stack.kubeconfig}\n"
                "  kubectl get lattice -A\nPress Ctrl-C to stop.",
                fg=typer.colors.GREEN,
            )
            stopped = threading.Event()
            signal.signal(signal.SIGTERM, lambda *_: stopped.set())
            with contextlib.suppress(KeyboardInterrupt):
                stopped.wait()
            say("stopping")
    except DevStackError as exc:
        typer.secho(f"lattice dev failed: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from exc
