"""The `lattice` command line: one typer app, one module per command group (the dev tools'
commands are added by their own distribution: _extensions)."""

from __future__ import annotations

import typer

from lattice_operator.cli import (
    _checkpoints,
    _crds,
    _env,
    _errors,
    _events,
    _extensions,
    _intents,
    _kube,
    _mcp,
    _run,
    _runs,
    _watch,
    _whoami,
    _workflow,
)

app = typer.Typer(
    name="lattice",
    help="Lattice Operator: Kubernetes as the control plane for AI-agent sandboxes.",
    no_args_is_help=True,
    # --install-completion / --show-completion (bash, zsh): docs/user-guide.md.
    add_completion=True,
    pretty_exceptions_enable=False,
    # `lattice dev`, `lattice cluster` and `lattice sprites-local` come from the dev tools, a
    # distribution of their own (devtools/), found through an entry point group.
    cls=_extensions.LatticeGroup,
)
app.callback()(_kube.remember)
app.command("run")(_run.run)
app.command("crds")(_crds.crds)
app.add_typer(_events.app, name="events")
app.add_typer(_checkpoints.app, name="checkpoints")
app.command("resume")(_runs.resume)
app.command("cancel")(_runs.cancel)
app.command("logs")(_runs.logs)
app.command("approve")(_intents.approve)
app.command("reject")(_intents.reject)
app.add_typer(_env.app, name="env")
app.command("watch")(_watch.watch)
app.command("whoami")(_whoami.whoami)
app.command("mcp")(_mcp.mcp)
app.add_typer(_mcp.setup_app, name="setup")
# The seed's workflow over project documents (docs/mcp.md): `lat prime` is `lattice prime`.
for _name in ("prime", "overview", "ready", "show", "claim", "close", "check", "fmt"):
    app.command(_name)(getattr(_workflow, _name))
app.add_typer(_workflow.skills_app, name="skills")


KUBECTL_PLUGIN = "kubectl lattice"


def main() -> None:
    """Entry point of the `lattice` console script: errors end as one line, never a traceback."""
    try:
        app()
    except Exception as exc:
        raise SystemExit(_errors.report(exc)) from None


def kubectl_main() -> None:
    """Entry point of `kubectl-lattice`, which kubectl runs for `kubectl lattice …`."""
    try:
        app(prog_name=KUBECTL_PLUGIN)
    except Exception as exc:
        raise SystemExit(_errors.report(exc)) from None


def kubectl_complete_main() -> None:
    """Entry point of `kubectl_complete-lattice`: kubectl runs it to complete `kubectl lattice`."""
    from lattice_operator.cli import _kubectl_complete

    _kubectl_complete.main(typer.main.get_command(app), KUBECTL_PLUGIN)


__all__ = ["app", "kubectl_complete_main", "kubectl_main", "main"]
