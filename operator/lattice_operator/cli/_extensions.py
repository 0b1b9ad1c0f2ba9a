"""Commands another distribution adds to `lattice`: the dev tools (`lattice-devtools`, in
devtools/) add `dev`, `cluster` and `sprites-local` through the entry point group
`lattice.cli_commands`. An entry point names a typer app (a command group) or a command's
function, as `app.add_typer` and `app.command` take them.

The installed distributions are scanned only when the command line names a command this CLI
does not have, or for the list of commands in the help, so no other command pays for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

from lattice_operator.cli._errors import CliError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from typer import _click  # typer vendors click

ENTRY_POINTS = "lattice.cli_commands"
DEV_TOOLS = ("cluster", "dev", "sprites-local")
"""The commands the dev tools add: named in the error when they are not installed."""
DEV_TOOLS_MISSING = (
    "`lattice {name}` is one of the dev tools, which are not installed here: "
    "pip install lattice-devtools (in a clone: make venv, or pip install -e ./devtools)"
)


def entry_points() -> dict[str, EntryPoint]:
    """The commands installed distributions add, by name (first one wins)."""
    from importlib.metadata import entry_points as installed

    found: dict[str, EntryPoint] = {}
    for entry in installed(group=ENTRY_POINTS):
        found.setdefault(entry.name, entry)
    return found


def as_command(name: str, target: Any, panel: str | None = None) -> _click.Command:
    """The click command `lattice` runs for an entry point's object, named `name` (listed
    in the help under `panel`)."""
    holder = typer.Typer(add_completion=False)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name, rich_help_panel=panel)
    elif callable(target):
        holder.command(name, rich_help_panel=panel)(target)
    else:
        raise CliError(f"the command `{name}` is installed as {target!r}, not a command")
    return typer.main.get_group(holder).commands[name]


class LatticeGroup(TyperGroup):
    """The `lattice` group: its own commands, then those other distributions add."""

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        entry = entry_points().get(cmd_name)
        if entry is not None:
            origin = entry.dist.name if entry.dist else "another distribution"
            return as_command(cmd_name, entry.load(), panel=f"Commands of {origin}")
        if cmd_name in DEV_TOOLS and not ctx.resilient_parsing:  # not while completing
            raise CliError(DEV_TOOLS_MISSING.format(name=cmd_name))
        return None

    def list_commands(self, ctx: _click.Context) -> list[str]:
        own = super().list_commands(ctx)  # in the order they were added
        return [*own, *sorted(set(entry_points()) - set(own))]


__all__ = ["DEV_TOOLS", "ENTRY_POINTS", "LatticeGroup", "as_command", "entry_points"]
