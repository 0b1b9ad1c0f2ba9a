"""`kubectl lattice`: the plugin kubectl finds on PATH, with kubectl's cluster flags, and its
completion through kubectl.

The shared virtualenv cannot be reinstalled here, so the test writes the two executables
the package installs ([project.scripts] kubectl-lattice and kubectl_complete-lattice) into a
directory of its own, each calling the same entry point, and puts it first on PATH."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.e2e_intents import intent_doc, setup_namespace
from tests.support.kubeconfigs import b64, document, write
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e
ENTRY_POINTS = {
    "kubectl-lattice": "kubectl_main",
    "kubectl_complete-lattice": "kubectl_complete_main",
}


def install_plugin(bin_dir: Path) -> None:
    bin_dir.mkdir()
    for name, function in ENTRY_POINTS.items():
        script = bin_dir / name
        script.write_text(
            f"#!{sys.executable}\nfrom lattice_operator.cli import {function}\n{function}()\n"
        )
        script.chmod(script.stat().st_mode | stat.S_IXUSR)


def kubectl(stack: Stack, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(stack.cluster.bin_dir / "kubectl"), *args],
        env=env, capture_output=True, text=True, timeout=300,
        stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip


def test_kubectl_lattice_approve_with_kubectls_flags(
    stack: Stack, namespace: str, tmp_path: Path
) -> None:
    plane = stack.cluster.local
    assert plane is not None
    assert plane.state is not None
    install_plugin(tmp_path / "bin")
    setup_namespace(stack, namespace)
    stack.apply(namespace, intent_doc("gated", ["sh", "-c", "echo gated"]))
    stack.wait_phase(namespace, "intents", "gated", {"AwaitingApproval"})
    admin = {
        "client-certificate-data": b64((plane.pki / "admin.crt").read_bytes()),
        "client-key-data": b64((plane.pki / "admin.key").read_bytes()),
    }
    cluster = {
        "server": plane.state.server,
        "certificate-authority-data": b64((plane.pki / "serving-ca.crt").read_bytes()),
    }
    # The current context would fail (its plugin is missing): only --context reaches the
    # cluster as the admin, and -n names the namespace.
    doc = document(
        clusters={"local": cluster},
        users={
            "admin": admin,
            "broken": {
                "exec": {
                    "command": "lattice-test-no-such-plugin",
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "interactiveMode": "Never",
                }
            },
        },
        contexts={
            "broken": {"cluster": "local", "user": "broken"},
            "as-admin": {"cluster": "local", "user": "admin"},
        },
        current="broken",
    )
    config = write(tmp_path / "config", doc)
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(
        HOME=str(tmp_path),
        KUBECONFIG=str(tmp_path / "missing.yaml"),
        PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
    )
    listed = kubectl(stack, env, "plugin", "list")
    assert str(tmp_path / "bin" / "kubectl-lattice") in listed.stdout, listed

    refused = kubectl(stack, env, "lattice", "--kubeconfig", str(config), "approve", "gated")
    assert refused.returncode != 0
    assert "lattice-test-no-such-plugin" in refused.stderr, refused.stderr

    # kubectl's flags before the command and after it.
    who = kubectl(
        stack, env, "lattice", "--kubeconfig", str(config), "--context", "as-admin",
        "whoami", "--json", "-n", namespace,
    )  # fmt: skip
    assert who.returncode == 0, who.stderr
    assert json.loads(who.stdout)["username"] == "lattice-admin"
    assert json.loads(who.stdout)["namespace"] == namespace
    approved = kubectl(
        stack, env, "lattice", "approve", "gated", "--kubeconfig", str(config),
        "--context", "as-admin", "--namespace", namespace, "--reason", "from kubectl",
    )  # fmt: skip
    assert approved.returncode == 0, approved.stderr
    assert "gated: approve recorded as lattice-admin" in approved.stdout, approved.stdout


def test_kubectl_completes_the_plugin(stack: Stack, tmp_path: Path) -> None:
    install_plugin(tmp_path / "bin")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    commands = kubectl(stack, env, "__complete", "lattice", "ap")
    assert commands.returncode == 0, commands.stderr
    assert commands.stdout.splitlines()[0].split("\t")[0] == "approve", commands.stdout
    flags = kubectl(stack, env, "__complete", "lattice", "approve", "x", "--cont")
    assert "--context" in flags.stdout, flags.stdout
