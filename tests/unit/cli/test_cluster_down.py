"""`lattice cluster down` never signals on the word of a corrupt or foreign state file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lattice_devtools.localcluster.controlplane import proc_start_time

LATTICE = [sys.executable, "-c", "from lattice_operator.cli import main; main()"]


def state_file(directory: Path, processes: list[dict[str, object]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "state.json").write_text(
        json.dumps(
            {
                "state_dir": str(directory),
                "server": "https://127.0.0.1:1",
                "kubeconfig": str(directory / "kubeconfig"),
                "etcd_url": "http://127.0.0.1:2",
                "processes": processes,
            }
        )
    )
    return directory


def down(directory: Path) -> subprocess.CompletedProcess[str]:
    # A session of its own: were it to signal its own process group, only it would die.
    return subprocess.run(
        [*LATTICE, "cluster", "down", "--state-dir", str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
        check=False,
    )


def test_a_corrupt_state_file_is_refused_without_a_signal(tmp_path: Path) -> None:
    directory = state_file(tmp_path / "s", [{"name": "etcd", "pid": 0, "start_time": None}])
    result = down(directory)
    assert result.returncode == 1, result  # killpg(0) would have ended it by SIGTERM (-15)
    assert "invalid pid 0" in result.stderr
    assert "Traceback" not in result.stderr
    assert (directory / "state.json").exists()  # nothing removed either


def test_unreadable_state_files_are_refused(tmp_path: Path) -> None:
    for name, text in {"a": "{not json", "b": "[]", "c": '{"processes": [7]}'}.items():
        directory = tmp_path / name
        directory.mkdir()
        (directory / "state.json").write_text(text)
        result = down(directory)
        assert result.returncode == 1, result
        assert "Traceback" not in result.stderr
        assert result.stderr.startswith("cluster down refused:")


def test_a_live_process_that_does_not_lead_its_own_group_is_not_signalled(
    tmp_path: Path,
) -> None:
    # Started in our process group, as a pid reused by an unrelated process would be.
    victim = subprocess.Popen(["sleep", "60"])
    try:
        start = proc_start_time(victim.pid)
        assert start is not None
        directory = state_file(
            tmp_path / "s", [{"name": "etcd", "pid": victim.pid, "start_time": start, "log": ""}]
        )
        result = down(directory)
        assert result.returncode == 1, result
        assert "does not lead a process group" in result.stderr
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait(timeout=10)


def node_state(directory: Path, **changes: object) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    doc = {
        "netns": "lattice-node-abc123",
        "state": str(directory),
        "bin_dir": str(directory),
        "node_bin": str(directory),
        "kubeconfig": str(directory / "admin.kubeconfig"),
        "processes": [],
        **changes,
    }
    (directory / "node-state.json").write_text(json.dumps(doc))
    return directory


def test_a_corrupt_node_state_file_is_refused_without_a_signal(tmp_path: Path) -> None:
    cases = {
        "pid": {"processes": [{"name": "kubelet", "pid": -1, "start_time": "1"}]},
        "netns": {"netns": "default"},  # a namespace this harness never made is never deleted
        "shape": {"processes": "kubelet"},
    }
    for name, changes in cases.items():
        directory = node_state(tmp_path / name, **changes)
        result = down(directory)
        assert result.returncode == 1, (name, result)
        assert result.stderr.startswith("cluster down refused:"), result.stderr
        assert "Traceback" not in result.stderr
        assert (directory / "node-state.json").exists()


def test_cluster_up_node_needs_root_or_says_why(tmp_path: Path) -> None:
    """Without root the node cluster is refused with a reason (as root, tests/node runs it)."""
    import os

    if os.geteuid() == 0:
        result = subprocess.run(
            [*LATTICE, "cluster", "up", "--node", "--state-dir", str(node_state(tmp_path / "n"))],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert result.returncode == 1
        assert "already holds a node cluster" in result.stderr  # refused before starting
    else:
        result = subprocess.run(
            [*LATTICE, "cluster", "up", "--node", "--state-dir", str(tmp_path / "n")],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert result.returncode == 1
        assert "needs root" in result.stderr
