"""Render and lint the chart with the pinned helm binary (built by hack/build-tools.sh)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from lattice_devtools.localcluster import find_bin_dir

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "lattice-operator"
RELEASE, NAMESPACE = "lattice", "lattice-system"

# The values matrix every static check runs over.
MATRIX: dict[str, list[str]] = {
    "default": [],
    "namespaced": ["--set", "watchNamespaces={team-a,team-b}"],
    "cert-manager": ["--set", "webhook.certManager.enabled=true"],
    "one-replica": ["--set", "replicaCount=1"],
    "metrics-off": ["--set", "metrics.enabled=false"],
    "webhook-callers": [
        "--set", "webhook.clientCAConfigMap=apiserver-webhook-client-ca",
        "--set", "webhook.clientNames={apiserver-webhook-client}",
        "--set", "networkPolicy.webhookFromCIDRs={10.0.0.10/32}",
    ],
    "github-token": ["--set", "github.enabled=true", "--set", "github.tokenSecret=github-token"],
    "github-app-stream-off": [
        "--set", "github.enabled=true",
        "--set", "github.appId=123",
        "--set", "github.installationId=45",
        "--set", "github.appKeySecret=github-app",
        "--set", "stream.enabled=false",
    ],
}  # fmt: skip


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(find_bin_dir(ROOT) / "helm"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def template_text(*extra: str) -> str:
    out = helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *extra)
    assert out.returncode == 0, out.stderr
    return out.stdout


def render(*extra: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(template_text(*extra)) if doc]


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(matches) == 1, f"{len(matches)} {kind} {name or ''} rendered"
    return matches[0]
