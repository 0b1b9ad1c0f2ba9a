"""The cluster the tests talk to: a given KUBECONFIG, or the project's local control plane."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from lattice_devtools.localcluster import LocalControlPlane, find_bin_dir
from tests.support.cluster_guard import OPT_IN, given_kubeconfig, refusal

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = REPO_ROOT / "crds"


@dataclass
class Cluster:
    """Handles to one cluster for the whole test session."""

    kubeconfig: Path
    bin_dir: Path
    local: LocalControlPlane | None

    _client: k8s.ApiClient | None = field(default=None, init=False, repr=False, compare=False)

    def api_client(self, kubeconfig: Path | None = None) -> k8s.ApiClient:
        """A client for `kubeconfig`; the session's own one client for the cluster's kubeconfig.

        Built once: a client per call re-read the kubeconfig and opened a TLS connection for
        every read (8.6 ms of CPU against 0.7 ms, and the API server's handshake too), ten
        times a second in every wait. Another kubeconfig (another user's) gets a new client,
        as its file may be written again."""
        if kubeconfig is None or kubeconfig == self.kubeconfig:
            if self._client is None:
                self._client = self._new_client(self.kubeconfig)
            return self._client
        return self._new_client(kubeconfig)

    @staticmethod
    def _new_client(kubeconfig: Path) -> k8s.ApiClient:
        client: k8s.ApiClient = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig)
        )
        return client

    @property
    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self.api_client())

    @property
    def custom(self) -> k8s.CustomObjectsApi:
        return k8s.CustomObjectsApi(self.api_client())

    @property
    def rbac(self) -> k8s.RbacAuthorizationV1Api:
        return k8s.RbacAuthorizationV1Api(self.api_client())

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        kubeconfig: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(kubeconfig or self.kubeconfig)}
        proc = subprocess.run(
            [str(self.bin_dir / "kubectl"), *args],
            input=input,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{proc.stderr}")
        return proc

    def create_namespace(self, hint: str) -> str:
        base = re.sub(r"[^a-z0-9-]+", "-", hint.lower()).strip("-")[:40].strip("-") or "t"
        name = f"t-{base}-{secrets.token_hex(3)}"
        self.core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
        return name

    def ensure_namespace(self, name: str, timeout: float = 120.0) -> None:
        """A namespace of a fixed name, Active: one an earlier module deleted (`--wait=false`)
        may still be terminating, and creating it then does nothing until it is gone."""

        def active() -> bool:
            # Through the API client, not two kubectl processes a poll (~136 ms of CPU each).
            with contextlib.suppress(k8s.ApiException):
                self.core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
            try:
                status = self.core.read_namespace(name).status
            except k8s.ApiException:
                return False
            return status is not None and status.phase == "Active"

        wait_for(active, timeout=timeout, interval=1.0, what=f"namespace {name} to be Active")

    def delete_namespace(self, name: str) -> None:
        with contextlib.suppress(k8s.ApiException):
            self.core.delete_namespace(name)

    def user_kubeconfig(self, user: str, groups: tuple[str, ...] = ()) -> Path:
        """A kubeconfig for another identity (client certificate on the local control plane)."""
        if self.local is None:
            raise RuntimeError("extra identities need the local control plane's client CA")
        return self.local.user_kubeconfig(user, groups)

    def apply_crds(self) -> None:
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_DIR))
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRD_DIR))


def create_or_replace(
    create: Callable[[Any], object],
    read: Callable[[], Any],
    replace: Callable[[Any], object],
    doc: dict[str, Any],
) -> None:
    """Create `doc`; if it exists, replace it with `doc` at the stored resourceVersion.

    The set-up helpers' API stand-in for `kubectl apply` where the object is the helper's own
    (a second call writes the same document, so replacing it loses nothing)."""
    try:
        create(doc)
    except k8s.ApiException as err:
        if err.status != 409:
            raise
        stored = read()
        version = (
            stored["metadata"]["resourceVersion"]
            if isinstance(stored, dict)
            else stored.metadata.resource_version
        )
        body = {**doc, "metadata": {**doc["metadata"], "resourceVersion": version}}
        replace(body)


def wait_for(
    predicate: Any, *, timeout: float = 30.0, interval: float = 0.1, what: str = "condition"
) -> Any:
    """Poll until predicate() returns something truthy; fail with `what` after timeout."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


@contextlib.contextmanager
def cluster_session(state_dir: Path) -> Iterator[Cluster]:
    bin_dir = find_bin_dir(REPO_ROOT)
    given = given_kubeconfig()
    if given is not None:
        why = refusal(given, os.environ.get(OPT_IN))
        if why is not None:
            pytest.exit(why, returncode=pytest.ExitCode.USAGE_ERROR)
        cluster = Cluster(given, bin_dir, None)
        cluster.apply_crds()
        yield cluster
        return
    # LATTICE_APISERVER_PROFILING=1: its CPU profile for a benchmark
    # (`kubectl get --raw '/debug/pprof/profile?seconds=30'`).
    profiling = os.environ.get("LATTICE_APISERVER_PROFILING") == "1"
    # LATTICE_APISERVER_AUDIT=1: its audit log of our writes (who made which), for a benchmark.
    audit = os.environ.get("LATTICE_APISERVER_AUDIT") == "1"
    plane = LocalControlPlane(bin_dir, state_dir / "plane", profiling=profiling, audit_writes=audit)
    state = plane.start()
    try:
        cluster = Cluster(Path(state.kubeconfig), bin_dir, plane)
        cluster.apply_crds()
        yield cluster
    finally:
        plane.stop()
