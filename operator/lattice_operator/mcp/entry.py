"""Entry points of the MCP servers the CLI starts (each imports only what it serves)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from lattice_operator.clock import Clock, SystemClock

if TYPE_CHECKING:
    from lattice_operator.mcp.documents import Project


def project_server(project: Project, clock: Clock) -> Any:
    """The `lattice mcp` server for one project (an SDK low-level Server)."""
    from lattice_operator.mcp.project_tools import TOOLS
    from lattice_operator.mcp.server import PublishedTool, build_server, package_version

    handlers = {t.name: t.handler for t in TOOLS}

    async def dispatch(name: str, args: dict[str, Any]) -> dict[str, Any]:
        return handlers[name](project, clock, args)

    published = [PublishedTool(t.name, t.description, t.input_schema) for t in TOOLS]
    return build_server("lattice", package_version(), published, dispatch)


def run_project(root: Path) -> None:
    """`lattice mcp`: the project document tools over stdio, until stdin closes."""
    import anyio

    from lattice_operator.mcp.documents import Project
    from lattice_operator.mcp.server import serve_stdio

    anyio.run(serve_stdio, project_server(Project(root), SystemClock()))


__all__ = ["project_server", "run_project"]
