"""`lattice mcp --cluster` without a reachable cluster: the errors an agent sees.

The first test runs the real `lattice mcp --cluster` process; the others talk to the same
server object in process (what `run_cluster` serves, $KUBECONFIG set for the test), as the
errors do not depend on the transport. The RBAC behaviour is tested against a real API
server in tests/e2e/test_mcp_cluster.py.
"""

from __future__ import annotations

import socket
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp import Client

from lattice_operator.mcp.entry import cluster_server
from tests.support.mcp_client import call, error_code, in_process, lattice_mcp


async def test_without_a_kubeconfig(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "missing")}
    async with lattice_mcp("--cluster", env=env) as session:
        tools = {t.name for t in (await session.list_tools()).tools}
        code = await error_code(session, "lattice_cluster_list", kind="runs")
    assert tools == {
        "lattice_cluster_list",
        "lattice_cluster_get",
        "lattice_cluster_run_events",
        "lattice_cluster_run_receipts",
        "lattice_cluster_propose_intent",
        "lattice_cluster_checkpoints_list",
        "lattice_cluster_checkpoint_take",
        "lattice_cluster_checkpoint_propose_restore",
    }
    assert code == "NO_KUBECONFIG"


def _served(
    kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> AbstractAsyncContextManager[Client]:
    # What `lattice mcp --cluster` serves with KUBECONFIG=kubeconfig (entry.run_cluster).
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    return in_process(cluster_server(None))


def _unreachable(tmp_path: Path) -> Path:
    """A kubeconfig whose API server is a local port nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return kubeconfig


async def test_an_unreachable_api_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kubeconfig = _unreachable(tmp_path)
    async with _served(kubeconfig, monkeypatch) as session:
        code = await error_code(session, "lattice_cluster_get", kind="runs", name="r")
        not_an_object = await error_code(session, "lattice_cluster_propose_intent", spec="x")
        bad_kind = await error_code(session, "lattice_cluster_list", kind="pods")
    assert code == "KUBE_UNREACHABLE"
    assert not_an_object == "INVALID_ARGUMENT"
    assert bad_kind == "INVALID_ARGUMENT"


async def test_a_path_as_a_name_is_an_invalid_argument_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Refused before any request: the API server here is a port nobody listens on.
    kubeconfig = _unreachable(tmp_path)
    calls: list[tuple[str, dict[str, Any], str]] = [
        ("lattice_cluster_get", {"kind": "runs", "name": "../../api/v1/secrets"}, "name"),
        ("lattice_cluster_run_events", {"name": "r", "namespace": "../kube-system"}, "namespace"),
        ("lattice_cluster_list", {"kind": "runs", "namespace": "a/b"}, "namespace"),
        ("lattice_cluster_run_receipts", {"name": "R?dryRun=All"}, "name"),
        ("lattice_cluster_propose_intent", {"spec": {}, "name": "../x"}, "name"),
        ("lattice_cluster_checkpoints_list", {"sprite": "a/../b"}, "sprite"),
        ("lattice_cluster_checkpoint_take", {"sprite": "box", "name": "X?y"}, "name"),
        (
            "lattice_cluster_checkpoint_propose_restore",
            {"sprite": "box", "checkpoint": "../c"},
            "checkpoint",
        ),
        (
            "lattice_cluster_checkpoint_propose_restore",
            {"sprite": "box", "namespace": "a/b", "checkpoint": "c"},
            "namespace",
        ),
    ]
    async with _served(kubeconfig, monkeypatch) as session:
        errors = [(await call(session, tool, **args))["error"] for tool, args, _ in calls]
    for (_, _, parameter), error in zip(calls, errors, strict=True):
        assert error["code"] == "INVALID_ARGUMENT", error
        assert f"Parameter '{parameter}'" in error["message"], error


async def test_a_restore_proposal_names_exactly_one_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = _unreachable(tmp_path)
    async with _served(kubeconfig, monkeypatch) as session:
        tool = "lattice_cluster_checkpoint_propose_restore"
        neither = (await call(session, tool, sprite="box"))["error"]
        both = (await call(session, tool, sprite="box", checkpoint="c", checkpoint_id="v1"))[
            "error"
        ]
    for error in (neither, both):
        assert error["code"] == "INVALID_ARGUMENT", error
        assert "Exactly one of 'checkpoint'" in error["message"], error
