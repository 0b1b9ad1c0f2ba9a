"""Without the right to create mount namespaces the server refuses to run, saying why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture
def mount_points() -> None:
    # As the server would: the empty mount points exist (created by root).
    for point in ("/workspace", "/.sprite"):
        os.makedirs(point, exist_ok=True)


def run_as_nobody(code: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT / 'operator'}:{ROOT / 'adapters'}:{ROOT / 'devtools'}",
    }
    return subprocess.run(
        [*NOBODY, sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd="/tmp",
        timeout=60,
        check=False,
    )


@pytest.mark.usefixtures("mount_points")
def test_launcher_explains_a_missing_permission() -> None:
    result = run_as_nobody(
        "from lattice_devtools.sprites_local import LauncherError\n"
        # The launcher is private to the local server; this checks its message as nobody.
        "from lattice_devtools.sprites_local._launcher import NamespaceLauncher\n"
        "try:\n    NamespaceLauncher().prepare_host()\n"
        "except LauncherError as e:\n    print(e)\nelse:\n    print('NO ERROR')\n"
    )
    assert result.returncode == 0, result.stderr
    message = result.stdout
    assert "cannot isolate sprite processes" in message
    assert "Operation not permitted" in message
    assert "root (or CAP_SYS_ADMIN)" in message
    assert "refusing to run sprite commands in the host's /workspace" in message


@pytest.mark.usefixtures("mount_points")
def test_cli_exits_with_the_reason(tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    result = run_as_nobody(
        "import sys; sys.argv = ['lattice', 'sprites-local', '--port', '0', '--token', 't',"
        f" '--state-dir', '{tmp_path / 'state'}']\n"
        "from lattice_operator.cli import main\nmain()\n"
    )
    assert result.returncode == 2
    assert "error: sprites-local cannot isolate sprite processes" in result.stderr
