"""`lattice mcp` and `lattice setup claude`: the MCP server for coding agents, registered."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lattice_operator.cli._kube import Context, Kubeconfig, Namespace, target


def mcp(
    project: Annotated[
        Path | None,
        typer.Option(help="Project root the tools work in (default: the git root of the cwd)."),
    ] = None,
    sprite: Annotated[
        bool, typer.Option("--sprite", help="Inside a sprite: the sprite protocol as tools.")
    ] = False,
    cluster: Annotated[
        bool,
        typer.Option("--cluster", help="Sprites, Runs and Intents under your kubeconfig identity."),
    ] = False,
    context: Context = None,
    kubeconfig: Kubeconfig = None,
    namespace: Namespace = None,
) -> None:
    """Serve the Lattice MCP tools over stdin/stdout (started by the agent, not by hand)."""
    from lattice_operator.mcp.entry import run_cluster, run_project, run_sprite
    from lattice_operator.mcp.errors import ToolError

    if sprite and cluster:
        typer.echo("--sprite and --cluster cannot be combined", err=True)
        raise typer.Exit(2)
    if cluster:
        where = target(kubeconfig, context, namespace)
        run_cluster(where.context, where.kubeconfig, where.namespace_flag)
        return

    if sprite:
        try:
            run_sprite()
        except ToolError as err:
            typer.echo(f"error: {err.message}. {err.suggestion}", err=True)
            raise typer.Exit(2) from None
        return
    from lattice_operator.mcp.setup_claude import find_project_root

    root = project if project is not None else find_project_root(Path.cwd())
    if not root.is_dir():
        typer.echo(f"project root {root} is not a directory", err=True)
        raise typer.Exit(2)
    run_project(root)


setup_app = typer.Typer(help="Register Lattice with coding agents.", no_args_is_help=True)


@setup_app.command("claude")
def setup_claude(
    check: Annotated[bool, typer.Option("--check", help="Verify the installation.")] = False,
    remove: Annotated[bool, typer.Option("--remove", help="Remove the Lattice entry.")] = False,
    user: Annotated[
        bool,
        typer.Option("--user", help="Use ~/.claude/settings.json instead of the project's."),
    ] = False,
) -> None:
    """Install (or --check, or --remove) the `lattice` MCP server in Claude Code's settings."""
    from lattice_operator.mcp import setup_claude as setup
    from lattice_operator.mcp.errors import SetupError

    if check and remove:
        typer.echo("--check and --remove cannot be combined", err=True)
        raise typer.Exit(2)
    try:
        root = setup.find_project_root(Path.cwd(), require_git=True)
        settings = setup.settings_path(root, user=user)
        if check:
            problems = setup.check(settings, root)
            for line in problems:
                typer.echo(f"✗ {line}", err=True)
            if problems:
                raise typer.Exit(1)
            typer.echo(f"✓ lattice MCP server installed in {settings}")
        elif remove:
            removed = setup.remove(settings)
            typer.echo(
                f"removed lattice from {settings}" if removed else "lattice was not installed"
            )
        else:
            setup.install(settings, root)
            typer.echo(f"installed lattice MCP server in {settings} for {root}")
    except SetupError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1) from None
