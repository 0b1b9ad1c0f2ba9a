"""The node tests' shared parts: constants, waiting, the release as published, `install`,
reading objects, and an HTTP client run inside the node's network namespace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lattice_devtools.localcluster.node import NodeCluster
from lattice_operator.receipt_reader import receipt_event_params, receipts_from_events
from tests.support.registry import Registry

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "lattice-operator"
SAMPLES = ROOT / "manifests" / "samples"
LATTICE = str(ROOT / ".venv" / "bin" / "lattice")
RELEASE, NAMESPACE = "lattice", "lattice-system"
NS_RELEASE, NS_NAMESPACE, TEAM = "lattice-ns", "lattice-ns-system", "team-a"
IMAGE_PATH = "lattice/lattice-operator"  # in the registry
CHART_PATH = "charts"  # oci://<registry>/charts/lattice-operator
VERSION = "0.2.0"
PULL_SECRET = "lattice-registry"
SPRITES_PORT = 8480
SPRITES_TOKEN = "node-test-token"
TIMINGS: dict[str, float] = {}


def wait_until(predicate: Any, what: str, timeout: float = 300) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def lattice_cli(*args: str) -> subprocess.CompletedProcess[str]:
    # `cluster` and `sprites-local` are the dev tools' commands.
    path = os.pathsep.join([str(ROOT / "operator"), str(ROOT / "adapters"), str(ROOT / "devtools")])
    return subprocess.run(
        [sys.executable, "-m", "lattice_operator", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={**os.environ, "PYTHONPATH": path},
    )


def operator_pods(node: NodeCluster, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    pods = node.kube_json(
        "-n", namespace, "get", "pods", "-l", "app.kubernetes.io/name=lattice-operator"
    )
    return [p for p in pods["items"] if p["metadata"].get("deletionTimestamp") is None]


def ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@dataclass(frozen=True)
class Released:
    """What a release publishes: the image by digest, the chart pinned to it."""

    registry: Registry
    image: str  # repository@digest
    digest: str
    chart: str  # oci://host/charts/lattice-operator
    version: str = VERSION

    def chart_args(self) -> list[str]:
        return [self.chart, "--version", self.version, "--ca-file", str(self.registry.ca_file)]


def user_values(sprites: str) -> list[str]:
    """What a platform team sets on every install and upgrade: the pull Secret and the Sprites
    backend (its URL, its token's Secret, its port for the NetworkPolicy)."""
    return [
        "--set", f"imagePullSecrets[0].name={PULL_SECRET}",
        "--set", f"sprites.apiUrl={sprites}",
        "--set", "sprites.tokenSecret=sprites",
        "--set", f"networkPolicy.spritesPorts={{{SPRITES_PORT}}}",
    ]  # fmt: skip


def install(
    node: NodeCluster,
    sprites: str,
    released: Released,
    release: str,
    namespace: str,
    *values: str,
    github: bool = False,
) -> float:
    """helm install from the registry (the packaged chart's own image values, an
    imagePullSecret), the local Sprites server as backend; seconds until both operator
    Pods are Ready. `github`: with GitHub on, its token in a Secret (no GitHub is reachable
    here: the API URL is a closed port; the webhook receiver needs none)."""
    node.kubectl("create", "namespace", namespace)
    registry = released.registry
    node.kubectl(
        "-n", namespace, "create", "secret", "docker-registry", PULL_SECRET,
        f"--docker-server={registry.host}", f"--docker-username={registry.username}",
        f"--docker-password={registry.password}",
    )  # fmt: skip
    node.kubectl(
        "-n", namespace, "create", "secret", "generic", "sprites",
        f"--from-literal=token={SPRITES_TOKEN}",
    )  # fmt: skip
    if github:
        node.kubectl(
            "-n", namespace, "create", "secret", "generic", "github-token",
            "--from-literal=token=node-e2e-token",
        )  # fmt: skip
        values = (
            *values,
            "--set", "github.enabled=true",
            "--set", "github.tokenSecret=github-token",
            "--set", "github.apiUrl=http://127.0.0.1:9/",
        )  # fmt: skip
    started = time.monotonic()
    node.helm(
        "install", release, *released.chart_args(), "--namespace", namespace,
        *user_values(sprites), *values,
    )  # fmt: skip
    wait_until(
        lambda: len([p for p in operator_pods(node, namespace) if ready(p)]) == 2,
        f"both operator Pods of {release} Ready",
    )
    return time.monotonic() - started


def get(node: NodeCluster, kind: str, name: str, namespace: str = "default") -> Any:
    out = node.kubectl("-n", namespace, "get", kind, name, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else {}


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in obj.get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return dict(c)
    return None


def lease(node: NodeCluster, namespace: str = NAMESPACE, release: str = RELEASE) -> Any:
    name = f"{release}-lattice-operator"
    out = node.kubectl("-n", namespace, "get", "lease", name, "-o", "json", check=False)
    return json.loads(out.stdout).get("spec") or {} if out.returncode == 0 else {}


def holder(node: NodeCluster, namespace: str = NAMESPACE, release: str = RELEASE) -> str:
    return str(lease(node, namespace, release).get("holderIdentity") or "")


def phase_of(node: NodeCluster, kind: str, name: str, namespace: str = "default") -> str:
    return str(get(node, kind, name, namespace).get("status", {}).get("phase") or "")


def wait_phase(
    node: NodeCluster, kind: str, name: str, phases: set[str], namespace: str = "default"
) -> str:
    return str(
        wait_until(
            lambda: (
                phase_of(node, kind, name, namespace) in phases
                and phase_of(node, kind, name, namespace)
            ),
            f"{kind} {namespace}/{name} in {sorted(phases)}",
        )
    )


# An HTTP client run inside the node's network namespace, where Service addresses route (kube-
# proxy's iptables rules): GET or POST one URL; print the status, the content type and the
# body, each on a line of its own, or, for a stream, its lines until one contains `until`
# (then exit 0; 2 on timeout).
HTTP_CLIENT = """
import sys, time, urllib.error, urllib.request
url, method, headers, body, until, timeout = sys.argv[1:7]
request = urllib.request.Request(url, method=method, data=body.encode() if body else None)
for header in filter(None, headers.split("\\n")):
    key, _, value = header.partition(": ")
    request.add_header(key, value)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    response = opener.open(request, timeout=float(timeout))
except urllib.error.HTTPError as exc:
    print(exc.code, exc.headers.get("Content-Type"), exc.read().decode(errors="replace"), sep="\\n")
    sys.exit(0)
print(response.status, response.headers.get("Content-Type"), sep="\\n", flush=True)
if not until:
    print(response.read().decode(errors="replace"))
    sys.exit(0)
deadline = time.monotonic() + float(timeout)
while time.monotonic() < deadline:
    line = response.readline().decode(errors="replace")
    if not line:
        break
    print(line.rstrip(), flush=True)
    if until in line:
        sys.exit(0)
sys.exit(2)
"""


def service_url(node: NodeCluster, service: str, namespace: str = NAMESPACE) -> str:
    spec = node.kube_json("-n", namespace, "get", "service", service)["spec"]
    return f"http://{spec['clusterIP']}:{spec['ports'][0]['port']}"


def http(
    node: NodeCluster,
    url: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: str = "",
    until: str = "",
) -> tuple[int, str, str]:
    """(status, content type, body) of one request from inside the namespace (0: no answer);
    `until`: a stream, read up to the line that contains it."""
    lines = "\n".join(f"{k}: {v}" for k, v in (headers or {}).items())
    out = node.run(
        sys.executable, "-c", HTTP_CLIENT, url, method, lines, body, until, "10", check=False
    )
    if out.returncode != 0:
        return 0, "", out.stderr[-500:]
    status, content_type, text = (out.stdout + "\n\n").split("\n", 2)
    return int(status), content_type, text


def sprite_file(
    node: NodeCluster,
    sprites: str,
    path: str,
    *,
    sprite: str,
    namespace: str = "default",
    method: str = "GET",
    body: str = "",
) -> tuple[int, str]:
    """Read (GET) or write (PUT) a file in a Sprite's sandbox through the Sprites API, from
    inside the node's network namespace where the server listens: (status, body)."""
    name = get(node, "sprite", sprite, namespace)["status"]["spriteName"]
    verb = "write" if method == "PUT" else "read"
    status, _, text = http(
        node,
        f"{sprites}/v1/sprites/{name}/fs/{verb}?path={path}&workingDir=/workspace"
        + ("&mkdirParents=true" if method == "PUT" else ""),
        method=method,
        headers={
            "Authorization": f"Bearer {SPRITES_TOKEN}",
            "Content-Type": "application/octet-stream",
        },
        body=body,
    )
    return status, text


def stop_run(
    node: NodeCluster, sprites: str, run: str, *, sprite: str, namespace: str = "default"
) -> None:
    """Drop /workspace/stop-<run> into the Sprite: a test's command ends when it sees it."""
    status, text = sprite_file(
        node,
        sprites,
        f"/workspace/stop-{run}",
        sprite=sprite,
        namespace=namespace,
        method="PUT",
        body="stop",
    )
    assert status == 200, (status, text)


def followed_by(node: NodeCluster, run: str, pod: str, namespace: str = "default") -> bool:
    """Whether `pod` re-attached to the Run's session after taking it over: a receipt of
    stdout_stream back to native that `pod` published."""
    params = receipt_event_params(get(node, "run", run, namespace))
    listing = node.kube_json(
        "-n", namespace, "get", "events.events.k8s.io", "-l", params["labelSelector"]
    )
    found, _ = receipts_from_events(listing, instance=pod)
    return any(
        change.get("capability") == "stdout_stream" and change.get("current_support") == "native"
        for receipt in found
        for change in receipt.get("capability_degradations") or []
    )


SECRET = f"{RELEASE}-lattice-operator-webhook-tls"


def upgrade(node: NodeCluster, released: Released, *values: str) -> None:
    """helm upgrade --reuse-values from the registry; returns once every operator Pod is new
    and Ready."""
    before = {p["metadata"]["uid"] for p in operator_pods(node)}
    node.helm(
        "upgrade", RELEASE, *released.chart_args(), "--namespace", NAMESPACE, "--reuse-values",
        *values,
    )  # fmt: skip

    def rolled() -> bool:
        pods = operator_pods(node)
        return len(pods) == 2 and all(ready(p) and p["metadata"]["uid"] not in before for p in pods)

    wait_until(rolled, "both operator Pods replaced and Ready", 240)
