"""The suite refuses a KUBECONFIG that points away from this machine unless opted in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.cluster_guard import OPT_IN, refusal

ROOT = Path(__file__).resolve().parents[2]


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}
        ],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(
    "server", ["https://127.0.0.1:6443", "https://localhost:35123", "https://[::1]:6443"]
)
def test_a_cluster_on_this_machine_is_used(tmp_path: Path, server: str) -> None:
    assert refusal(_kubeconfig(tmp_path, server), None) is None


def test_a_remote_cluster_is_refused_unless_named(tmp_path: Path) -> None:
    server = "https://prod.example.com:6443"
    config = _kubeconfig(tmp_path, server)
    why = refusal(config, None)
    assert why is not None
    assert f"{OPT_IN}={server}" in why
    assert refusal(config, "https://staging.example.com:6443") is not None  # another server
    assert refusal(config, "1") is not None  # a blanket yes is not an opt-in
    assert refusal(config, server) is None


def test_an_unreadable_kubeconfig_is_refused_with_its_reason(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: [")
    why = refusal(bad, None)
    assert why is not None
    assert str(bad) in why


def test_the_suite_stops_before_touching_a_remote_cluster(tmp_path: Path) -> None:
    # One e2e test under a KUBECONFIG naming a remote server: refused before any request
    # (the address is never contacted; the run ends with a usage error and the reason).
    config = _kubeconfig(tmp_path, "https://prod.example.com:6443")
    env = {k: v for k, v in os.environ.items() if k != OPT_IN}
    env["KUBECONFIG"] = str(config)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/e2e/test_operator_boot.py::test_new_sprite_without_backend_is_reported_unknown",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout + proc.stderr
    assert "prod.example.com" in proc.stdout + proc.stderr
    assert "passed" not in proc.stdout
