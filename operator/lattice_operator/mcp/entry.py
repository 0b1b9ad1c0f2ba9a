"""Entry points of the MCP servers the CLI starts (each imports only what it serves)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from lattice_operator.clock import Clock, SystemClock

if TYPE_CHECKING:
    from lattice_operator.mcp.documents import Project
    from lattice_operator.mcp.sprite_tools import SpriteSession


def project_server(project: Project, clock: Clock) -> Any:
    """The `lattice mcp` server for one project (an SDK low-level Server)."""
    from lattice_operator.mcp.project_tools import TOOLS, ProjectContext
    from lattice_operator.mcp.server import PublishedTool, build_server, package_version

    tools = {t.name: t for t in TOOLS}
    context = ProjectContext(project, clock)

    async def dispatch(name: str, args: dict[str, Any]) -> dict[str, Any]:
        return tools[name].run(context, args)

    published = [PublishedTool(t.name, t.description, t.input_schema()) for t in TOOLS]
    return build_server("lattice", package_version(), published, dispatch)


def run_project(root: Path) -> None:
    """`lattice mcp`: the project document tools over stdio, until stdin closes."""
    import anyio

    from lattice_operator.mcp.documents import Project
    from lattice_operator.mcp.server import serve_stdio

    anyio.run(serve_stdio, project_server(Project(root), SystemClock()))


def sprite_server(session: SpriteSession) -> Any:
    """The `lattice mcp --sprite` server for one agent session."""
    from lattice_operator.mcp.server import PublishedTool, build_server, package_version
    from lattice_operator.mcp.sprite_tools import SPRITE_TOOLS

    tools = {t.name: t for t in SPRITE_TOOLS}

    async def dispatch(name: str, args: dict[str, Any]) -> dict[str, Any]:
        return tools[name].run(session, args)

    published = [PublishedTool(t.name, t.description, t.input_schema()) for t in SPRITE_TOOLS]
    return build_server("lattice-sprite", package_version(), published, dispatch)


def run_sprite() -> None:
    """`lattice mcp --sprite`: the protocol tools over stdio, identity from the environment."""
    import anyio

    from lattice_operator.mcp.server import serve_stdio
    from lattice_operator.mcp.sprite_tools import SpriteSession

    session = SpriteSession.from_environment(SystemClock())
    anyio.run(serve_stdio, sprite_server(session))


def cluster_server(
    context: str | None, kubeconfig: str | None = None, namespace: str | None = None
) -> Any:
    """The `lattice mcp --cluster` server: the cluster under the caller's kubeconfig identity."""
    from lattice_operator.mcp.cluster_tools import CLUSTER_TOOLS, cluster_dispatch
    from lattice_operator.mcp.server import PublishedTool, build_server, package_version

    published = [PublishedTool(t.name, t.description, t.input_schema()) for t in CLUSTER_TOOLS]
    dispatch = cluster_dispatch(context, kubeconfig, namespace)
    return build_server("lattice-cluster", package_version(), published, dispatch)


def run_cluster(
    context: str | None, kubeconfig: str | None = None, namespace: str | None = None
) -> None:
    """`lattice mcp --cluster`: Sprites, Runs and Intents as tools, until stdin closes."""
    import anyio

    from lattice_operator.mcp.server import serve_stdio

    anyio.run(serve_stdio, cluster_server(context, kubeconfig, namespace))


__all__ = [
    "cluster_server",
    "project_server",
    "run_cluster",
    "run_project",
    "run_sprite",
    "sprite_server",
]
