"""MCP servers: `lattice mcp` (project documents), `--sprite` (the protocol) and `--cluster`.

Modules here import the `mcp` SDK lazily (inside functions) where the CLI reaches them,
because agents spawn `lattice mcp` often and its cold start is paid every time.
"""

from __future__ import annotations

from lattice_operator.mcp.errors import ToolError

__all__ = ["ToolError"]
