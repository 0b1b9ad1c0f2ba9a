"""`lattice mcp --cluster` without a reachable cluster: the errors an agent sees.

The RBAC behaviour is tested against a real API server in tests/e2e/test_mcp_cluster.py.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import yaml

from tests.support.mcp_client import call, error_code, lattice_mcp


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


async def test_an_unreachable_api_server(tmp_path: Path) -> None:
    kubeconfig = _unreachable(tmp_path)
    async with lattice_mcp("--cluster", env={"KUBECONFIG": str(kubeconfig)}) as session:
        code = await error_code(session, "lattice_cluster_get", kind="runs", name="r")
        not_an_object = await error_code(session, "lattice_cluster_propose_intent", spec="x")
        bad_kind = await error_code(session, "lattice_cluster_list", kind="pods")
    assert code == "KUBE_UNREACHABLE"
    assert not_an_object == "INVALID_ARGUMENT"
    assert bad_kind == "INVALID_ARGUMENT"


async def test_a_path_as_a_name_is_an_invalid_argument_naming_it(tmp_path: Path) -> None:
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
    async with lattice_mcp("--cluster", env={"KUBECONFIG": str(kubeconfig)}) as session:
        errors = [(await call(session, tool, **args))["error"] for tool, args, _ in calls]
    for (_, _, parameter), error in zip(calls, errors, strict=True):
        assert error["code"] == "INVALID_ARGUMENT", error
        assert f"Parameter '{parameter}'" in error["message"], error


async def test_a_restore_proposal_names_exactly_one_checkpoint(tmp_path: Path) -> None:
    kubeconfig = _unreachable(tmp_path)
    async with lattice_mcp("--cluster", env={"KUBECONFIG": str(kubeconfig)}) as session:
        tool = "lattice_cluster_checkpoint_propose_restore"
        neither = (await call(session, tool, sprite="box"))["error"]
        both = (await call(session, tool, sprite="box", checkpoint="c", checkpoint_id="v1"))[
            "error"
        ]
    for error in (neither, both):
        assert error["code"] == "INVALID_ARGUMENT", error
        assert "Exactly one of 'checkpoint'" in error["message"], error
