"""Run `lattice run` as a real subprocess against the test cluster."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kubernetes.client import AdmissionregistrationV1Api
from kubernetes.client.exceptions import ApiException

from lattice_devtools.localcluster.controlplane import free_port
from tests.support.cluster import Cluster

# Every operator the tests start gets its TMPDIR here, removed when the test run ends: an
# operator killed on purpose (the crash tests) cannot remove its throwaway webhook key.
SCRATCH = Path(tempfile.mkdtemp(prefix="lattice-test-operators-"))
atexit.register(shutil.rmtree, SCRATCH, True)


@dataclass
class OperatorProcess:
    proc: subprocess.Popen[bytes]
    log_path: Path
    liveness_url: str
    tmpdir: Path | None = None
    """The TMPDIR the operator runs with."""
    log_start: int = 0
    """Where `log()` begins: a module sharing this operator reads only what it wrote since."""

    def log(self) -> str:
        with self.log_path.open("rb") as log:
            log.seek(self.log_start)
            return log.read().decode(errors="replace")

    def mark_log(self) -> None:
        """From now on `log()` is what the operator writes after this call."""
        self.log_start = self.log_path.stat().st_size

    def alive(self) -> bool:
        return self.proc.poll() is None

    def healthy(self) -> bool:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(self.liveness_url, timeout=1) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def stop(self, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return int(self.proc.returncode)

    def kill(self) -> None:
        """Crash it: no graceful shutdown (what a node failure or OOM kill looks like)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def spawn_operator(
    kubeconfig: Path,
    log_dir: Path,
    *args: str,
    env: dict[str, str] | None = None,
    standalone: bool = True,
    ready_timeout: float = 60.0,
    extra_path: Sequence[Path] = (),
) -> OperatorProcess:
    """Start the operator and wait until its liveness endpoint answers (`extra_path`: more
    directories on its PYTHONPATH, for a benchmark's instrumentation)."""
    port = free_port()
    log_path = log_dir / f"operator-{port}.log"
    cmd = [
        sys.executable,
        "-m",
        "lattice_operator",
        "run",
        "--liveness-port",
        str(port),
        *(["--standalone"] if standalone else []),
        *args,
    ]
    # A port the kernel hands out again later must not collide with an earlier operator's.
    tmpdir = Path(tempfile.mkdtemp(prefix=f"operator-{port}-", dir=SCRATCH))
    full_env = {**os.environ, "KUBECONFIG": str(kubeconfig), "TMPDIR": str(tmpdir), **(env or {})}
    repo = Path(__file__).resolve().parents[2]
    full_env["PYTHONPATH"] = os.pathsep.join(
        [str(repo / "operator"), str(repo / "adapters"), *map(str, extra_path)]
    )
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=full_env, start_new_session=True
        )
    op = OperatorProcess(proc, log_path, f"http://127.0.0.1:{port}/healthz", tmpdir)
    deadline = time.monotonic() + ready_timeout
    while not op.healthy():
        if not op.alive():
            raise AssertionError(f"operator exited early:\n{op.log()[-5000:]}")
        if time.monotonic() > deadline:
            op.stop()
            raise AssertionError(f"operator not live in {ready_timeout}s:\n{op.log()[-5000:]}")
        time.sleep(0.1)
    record_start(op)
    return op


# Set by whoever counts the operators a test run starts: one JSON line per start is appended.
STARTS_LOG = "LATTICE_TEST_OPERATOR_STARTS"


def record_start(op: OperatorProcess) -> None:
    """One line per operator started (which worker, during which test) when $STARTS_LOG is set:
    starting one costs seconds of CPU, and the shared operator is there to start few."""
    path = os.environ.get(STARTS_LOG)
    if not path:
        return
    line = {
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "test": os.environ.get("PYTEST_CURRENT_TEST", ""),
        "pid": op.proc.pid,
        "time": round(time.time(), 3),
    }
    with open(path, "a") as sink:
        sink.write(json.dumps(line) + "\n")


@contextlib.contextmanager
def operator_process(
    cluster: Cluster,
    log_dir: Path,
    *args: str,
    env: dict[str, str] | None = None,
    standalone: bool = True,
    ready_timeout: float = 60.0,
) -> Iterator[OperatorProcess]:
    """The operator for the duration of the block; its webhook configurations removed after."""
    op = spawn_operator(
        cluster.kubeconfig,
        log_dir,
        *args,
        env=env,
        standalone=standalone,
        ready_timeout=ready_timeout,
    )
    try:
        yield op
    finally:
        op.stop()
        remove_webhook_configurations(cluster)


def remove_webhook_configurations(cluster: Cluster) -> None:
    """Both of the operator's webhook configurations gone (absent already is fine); through
    the API client, not a kubectl process each. They are cluster-wide and point at the
    operator that registered them: left behind a stopped one, they refuse (failurePolicy Fail)
    any Run, Intent or IntentPolicy a later module writes without an operator of its own."""
    hooks = AdmissionregistrationV1Api(cluster.api_client())
    for delete in (
        hooks.delete_mutating_webhook_configuration,
        hooks.delete_validating_webhook_configuration,
    ):
        try:
            delete("lattice.dev")
        except ApiException as err:
            if err.status != 404:
                raise
