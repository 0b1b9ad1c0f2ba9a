"""`lattice setup claude` (and --check, --remove) against temporary HOME and project dirs.

The command runs in process (typer's runner, with the same environment, working directory and
program path as the console script), a second of CPU less per call than a subprocess; the last
test runs the real `lattice` executable and then the server it registered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lattice_operator.cli import app
from lattice_operator.mcp.setup_claude import VERSION_ENV

LATTICE = Path(sys.executable).parent / "lattice"
OTHER = {"command": "npx", "args": ["-y", "other-server"], "env": {"TOKEN": "x"}}


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    # The program path the console script sees: the entry records it (lattice_binary).
    monkeypatch.setattr(sys, "argv", [str(LATTICE)])
    return {**os.environ, "HOME": str(home)}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "sub" / "dir").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@dataclass(frozen=True)
class Done:
    returncode: int
    stdout: str
    stderr: str


def _setup(cwd: Path, env: dict[str, str], *flags: str) -> Done:
    """`lattice setup claude FLAGS` run in CWD with ENV (os.environ only for the call)."""
    before = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, ["setup", "claude", *flags], env=env)
    finally:
        os.chdir(before)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return Done(result.exit_code, result.stdout, result.stderr)


def _setup_process(cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LATTICE), "setup", "claude"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _settings(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_install_from_a_subdirectory_finds_the_git_root(project: Path, env: dict[str, str]) -> None:
    done = _setup(project / "sub" / "dir", env)
    assert done.returncode == 0, done.stderr
    settings = project / ".claude" / "settings.json"  # the directory did not exist
    entry = _settings(settings)["mcpServers"]["lattice"]
    assert entry["command"] == str(LATTICE)
    assert entry["args"] == ["mcp", "--project", str(project.resolve())]
    assert entry["env"][VERSION_ENV]
    check = _setup(project, env, "--check")
    assert check.returncode == 0, check.stderr
    assert "installed" in check.stdout


def test_user_scope_preserves_other_servers_and_keys(project: Path, env: dict[str, str]) -> None:
    settings = Path(env["HOME"]) / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"theme": "dark", "mcpServers": {"other": OTHER}}))
    assert _setup(project, env, "--user").returncode == 0
    data = _settings(settings)
    assert data["theme"] == "dark"
    assert data["mcpServers"]["other"] == OTHER
    assert "lattice" in data["mcpServers"]
    assert not (project / ".claude").exists()
    removed = _setup(project, env, "--user", "--remove")
    assert removed.returncode == 0
    assert _settings(settings) == {"theme": "dark", "mcpServers": {"other": OTHER}}


def test_invalid_json_is_reported_not_overwritten(project: Path, env: dict[str, str]) -> None:
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"mcpServers": {"other": ')
    for flags in ((), ("--check",), ("--remove",)):
        done = _setup(project, env, *flags)
        assert done.returncode == 1, flags
        assert "not valid JSON" in done.stderr
        assert "Traceback" not in done.stderr
        assert settings.read_text() == '{"mcpServers": {"other": '


def test_check_reports_version_mismatch_and_wrong_binary(
    project: Path, env: dict[str, str]
) -> None:
    assert _setup(project, env).returncode == 0
    settings = project / ".claude" / "settings.json"
    data = _settings(settings)
    data["mcpServers"]["lattice"]["env"][VERSION_ENV] = "0.0.1"
    settings.write_text(json.dumps(data))
    done = _setup(project, env, "--check")
    assert done.returncode == 1
    assert "version mismatch" in done.stderr
    assert "0.0.1" in done.stderr
    data["mcpServers"]["lattice"]["command"] = "/usr/local/bin/lat"
    settings.write_text(json.dumps(data))
    assert "/usr/local/bin/lat" in _setup(project, env, "--check").stderr
    assert _setup(project, env).returncode == 0  # reinstalling repairs it
    assert _setup(project, env, "--check").returncode == 0


def test_check_when_absent_and_remove_is_a_clean_no_op(project: Path, env: dict[str, str]) -> None:
    missing = _setup(project, env, "--check")
    assert missing.returncode == 1
    assert "does not exist" in missing.stderr
    removed = _setup(project, env, "--remove")
    assert removed.returncode == 0
    assert "not installed" in removed.stdout
    assert not (project / ".claude").exists()
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"mcpServers": {"other": OTHER}}))
    before = settings.read_text()
    assert _setup(project, env, "--remove").returncode == 0
    assert settings.read_text() == before
    assert "no 'lattice' entry" in _setup(project, env, "--check").stderr


def test_outside_a_git_repository_is_an_error(tmp_path: Path, env: dict[str, str]) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    done = _setup(plain, {**env, "GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert done.returncode == 1
    assert "not inside a git repository" in done.stderr
    assert not (plain / ".claude").exists()


async def test_the_installed_entry_starts_a_working_server(
    project: Path, env: dict[str, str]
) -> None:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    done = _setup_process(project, env)
    assert done.returncode == 0, done.stderr
    entry = _settings(project / ".claude" / "settings.json")["mcpServers"]["lattice"]
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        tools = await session.list_tools()
    assert init.server_info.name == "lattice"
    assert "lattice_create_task" in {t.name for t in tools.tools}
