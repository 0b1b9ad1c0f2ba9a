"""`lattice setup claude`: the `lattice` entry under `mcpServers` in Claude Code's settings."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from lattice_operator.mcp.errors import SetupError

SERVER_KEY = "lattice"
# Recorded in the entry so --check can tell that `lattice` was updated since installation.
VERSION_ENV = "LATTICE_MCP_INSTALLED_VERSION"


def find_project_root(start: Path, require_git: bool = False) -> Path:
    """The enclosing git repository's top directory (a `.git` dir, or file in a worktree)."""
    start = start.resolve()
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists():
            return candidate
    if require_git:
        raise SetupError(f"{start} is not inside a git repository; run this in your project")
    return start


def settings_path(root: Path, user: bool) -> Path:
    base = Path.home() if user else root
    return base / ".claude" / "settings.json"


def lattice_binary() -> str:
    """The absolute path of the `lattice` executable running now."""
    invoked = Path(sys.argv[0])
    if invoked.name == "lattice" and invoked.is_file():
        return str(invoked.absolute())
    found = shutil.which("lattice")
    if found is None:
        raise SetupError("cannot find the `lattice` executable on PATH")
    return str(Path(found).absolute())


def expected_entry(root: Path, version: str) -> dict[str, Any]:
    return {
        "command": lattice_binary(),
        "args": ["mcp", "--project", str(root)],
        "env": {VERSION_ENV: version},
    }


def _load(settings: Path) -> dict[str, Any]:
    if not settings.exists():
        return {}
    try:
        data = json.loads(settings.read_text(encoding="utf-8") or "{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise SetupError(
            f"{settings} is not valid JSON ({err}); fix it by hand, it was not changed"
        ) from None
    if not isinstance(data, dict):
        raise SetupError(f"{settings} does not hold a JSON object; it was not changed")
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise SetupError(f"{settings}: 'mcpServers' is not an object; it was not changed")
    return data


def _write(settings: Path, data: dict[str, Any]) -> None:
    settings.parent.mkdir(parents=True, exist_ok=True)
    tmp = settings.with_name(f".{settings.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, settings)


def install(settings: Path, root: Path, version: str | None = None) -> None:
    from lattice_operator.mcp.server import package_version

    data = _load(settings)
    data.setdefault("mcpServers", {})[SERVER_KEY] = expected_entry(
        root, version or package_version()
    )
    _write(settings, data)


def check(settings: Path, root: Path, version: str | None = None) -> list[str]:
    """What is wrong with the installation; empty when it is correct."""
    from lattice_operator.mcp.server import package_version

    if not settings.exists():
        return [f"{settings} does not exist; run `lattice setup claude`"]
    try:
        data = _load(settings)
    except SetupError as err:
        return [str(err)]
    entry = data.get("mcpServers", {}).get(SERVER_KEY)
    if not isinstance(entry, dict):
        return [
            f"no '{SERVER_KEY}' entry under mcpServers in {settings}; run `lattice setup claude`"
        ]
    problems = []
    want = expected_entry(root, version or package_version())
    command = entry.get("command")
    if command != want["command"]:
        problems.append(f"command is {command!r}, but this lattice binary is {want['command']!r}")
    elif not os.access(str(command), os.X_OK):
        problems.append(f"command {command!r} is not executable")
    if entry.get("args") != want["args"]:
        problems.append(f"args are {entry.get('args')!r}, expected {want['args']!r}")
    installed = (entry.get("env") or {}).get(VERSION_ENV)
    current = want["env"][VERSION_ENV]
    if installed != current:
        problems.append(
            f"version mismatch: installed by lattice {installed}, this is lattice {current}; "
            "run `lattice setup claude` again"
        )
    return problems


def remove(settings: Path) -> bool:
    """Remove the entry, keeping every other server; False when it was not installed."""
    if not settings.exists():
        return False
    data = _load(settings)
    servers = data.get("mcpServers", {})
    if SERVER_KEY not in servers:
        return False
    del servers[SERVER_KEY]
    _write(settings, data)
    return True


__all__ = ["check", "find_project_root", "install", "remove", "settings_path"]
