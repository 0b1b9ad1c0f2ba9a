"""`lattice dev`: the whole stack on this machine, with a sample driven to completion.

Stages: the local control plane (built from hack/ once), the CRDs, the operator as
a child process, then the samples. Everything started here is recorded and
stopped by id when the stack stops.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lattice_devtools.localcluster import LocalControlPlane, find_bin_dir, stop_from_state
from lattice_devtools.localcluster.controlplane import free_port

Say = Callable[[str], None]
_VIEWER = """
apiVersion: v1
kind: ServiceAccount
metadata: {name: lattice-viewer, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: lattice-viewer}
rules:
- apiGroups: [lattice.dev]
  resources: [intents, runs, sprites]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: lattice-viewer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: lattice-viewer}
subjects:
- {kind: ServiceAccount, name: lattice-viewer, namespace: default}
"""


class DevStackError(RuntimeError):
    """A stage of the development stack failed."""


@dataclass
class DevStack:
    repo_root: Path
    state_dir: Path
    say: Say
    bin_dir: Path | None = None
    plane: LocalControlPlane | None = None
    sprites_url: str | None = None
    sprites_token: str = ""
    stream_port: int = field(default_factory=free_port)
    children: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def kubeconfig(self) -> Path:
        assert self.plane is not None
        return self.plane.kubeconfig

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        assert self.bin_dir is not None
        proc = subprocess.run(
            [str(self.bin_dir / "kubectl"), *args],
            input=input,
            capture_output=True,
            text=True,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig)},
            timeout=120,
            check=False,
        )
        if check and proc.returncode != 0:
            raise DevStackError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def start_cluster(self) -> None:
        cluster_dir = self.state_dir / "cluster"
        if stop_from_state(cluster_dir):
            self.say("stopped a control plane left over from an earlier run")
        self.say("building the pinned Kubernetes binaries (cached after the first time)…")
        self.bin_dir = find_bin_dir(self.repo_root)
        started = time.monotonic()
        self.plane = LocalControlPlane(self.bin_dir, cluster_dir)
        state = self.plane.start()
        self.say(f"control plane ready in {time.monotonic() - started:.1f}s at {state.server}")

    def apply_crds(self) -> None:
        self.kubectl("apply", "--server-side", "-f", str(self.repo_root / "crds"))
        self.kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "-f",
            str(self.repo_root / "crds"),
        )
        self.say("CRDs applied")

    def start_sprites(self) -> None:
        """The local Sprites-compatible server: real processes, a private /workspace each."""
        sprites_dir = self.state_dir / "sprites"
        # The control plane is new each time, so its sprites are too.
        shutil.rmtree(sprites_dir, ignore_errors=True)
        ready = sprites_dir / "ready.json"
        sprites_dir.mkdir(parents=True, exist_ok=True)
        ready.unlink(missing_ok=True)
        self.sprites_token = f"local/dev/{secrets.token_urlsafe(24)}"
        log_path = self.state_dir / "sprites-local.log"
        state = str(sprites_dir / "state")
        self._spawn(
            [
                "sprites-local",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--state-dir",
                state,
                "--ready-file",
                str(ready),
            ],
            log_path,
            {"SPRITES_LOCAL_TOKEN": self.sprites_token},
        )
        self.wait_for("the local Sprites server", ready.exists, timeout=30)
        self.sprites_url = str(json.loads(ready.read_text())["url"])
        self.say(f"local Sprites server at {self.sprites_url} (log {log_path})")

    def start_operator(self) -> None:
        log_path = self.state_dir / "operator.log"
        env = {"KUBECONFIG": str(self.kubeconfig)}
        if self.sprites_url:
            env |= {"SPRITES_API_URL": self.sprites_url, "SPRITES_TOKEN": self.sprites_token}
        proc = self._spawn(
            [
                "run",
                "--standalone",
                "--liveness-port",
                str(free_port()),
                "--metrics-port",
                str(free_port()),
                "--stream-port",
                str(self.stream_port),
            ],
            log_path,
            env,
        )
        self.say(f"operator started (pid {proc.pid}, log {log_path})")

    def viewer_token(self) -> str:
        """A token for the live page and `lattice watch`: a ServiceAccount that may read
        Intents, Runs and Sprites everywhere (nothing else), valid for a day."""
        self.kubectl("apply", "-f", "-", input=_VIEWER)
        return self.kubectl(
            "create", "token", "lattice-viewer", "-n", "default", "--duration=24h"
        ).strip()

    def _spawn(
        self, args: list[str], log_path: Path, env: dict[str, str]
    ) -> subprocess.Popen[bytes]:
        """`lattice ARGS` as a child in its own process group, recorded to be stopped."""
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "lattice_operator", *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **env},
                start_new_session=True,
            )
        self.children.append(proc)
        return proc

    def apply(self, doc: dict[str, object], namespace: str = "default") -> None:
        self.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))

    def wait_for(self, what: str, check: Callable[[], bool], timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            for child in self.children:
                if child.poll() is not None:
                    raise DevStackError(f"a child process exited while waiting for {what}")
            if time.monotonic() > deadline:
                raise DevStackError(f"timed out waiting for {what}")
            time.sleep(0.2)

    def stop(self) -> None:
        for child in reversed(self.children):
            if child.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGTERM)
                try:
                    child.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(child.pid, signal.SIGKILL)
                    child.wait()
        self.children.clear()
        if self.plane is not None:
            self.plane.stop()
            self.plane = None


@contextlib.contextmanager
def dev_stack(repo_root: Path, state_dir: Path, say: Say) -> Iterator[DevStack]:
    state_dir.mkdir(parents=True, exist_ok=True)
    stack = DevStack(repo_root=repo_root, state_dir=state_dir, say=say)
    try:
        yield stack
    finally:
        stack.stop()
