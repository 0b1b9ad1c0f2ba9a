"""The `lattice` command line: one typer app, one module per command group."""

from __future__ import annotations

import typer

from lattice_operator.cli import (
    _cluster,
    _crds,
    _dev,
    _errors,
    _events,
    _intents,
    _mcp,
    _run,
    _runs,
    _sprites_local,
    _watch,
)

app = typer.Typer(
    name="lattice",
    help="Lattice Operator: Kubernetes as the control plane for AI-agent sandboxes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("run")(_run.run)
app.command("crds")(_crds.crds)
app.command("sprites-local")(_sprites_local.sprites_local)
app.add_typer(_cluster.app, name="cluster")
app.add_typer(_events.app, name="events")
app.command("dev")(_dev.dev)
app.command("resume")(_runs.resume)
app.command("cancel")(_runs.cancel)
app.command("logs")(_runs.logs)
app.command("approve")(_intents.approve)
app.command("reject")(_intents.reject)
app.command("watch")(_watch.watch)
app.command("mcp")(_mcp.mcp)
app.add_typer(_mcp.setup_app, name="setup")


def main() -> None:
    """Entry point of the `lattice` console script: errors end as one line, never a traceback."""
    try:
        app()
    except Exception as exc:
        raise SystemExit(_errors.report(exc)) from None


__all__ = ["app", "main"]
