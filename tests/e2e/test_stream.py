"""The real-time stream end to end: the operator serves it, the API server decides who sees
what (TokenReview, SubjectAccessReview), a Run's progress arrives as it happens."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lattice_devtools.localcluster.controlplane import free_port
from tests.support.cluster import Cluster, wait_for
from tests.support.e2e_runs import apply_run, ready_sprite
from tests.support.processes import SIGINT_IGNORED
from tests.support.sprites_server import LocalSprites
from tests.support.stack import Stack, operator_stack

VIEWER_ROLE = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: lattice-viewer, namespace: {ns}}}
rules:
- apiGroups: [lattice.dev]
  resources: [intents, runs, sprites]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: lattice-viewer, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: lattice-viewer}}
subjects:
- {{kind: ServiceAccount, name: viewer, namespace: {ns}}}
"""


@pytest.fixture(scope="module")
def streaming(
    cluster: Cluster, local_sprites: LocalSprites, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, str]]:
    port = free_port()
    log_dir: Path = tmp_path_factory.mktemp("operator-stream")
    with operator_stack(
        cluster, local_sprites, log_dir, stream={"port": port, "keepalive": 1.0}
    ) as stack:
        yield stack, f"http://127.0.0.1:{port}"


def token(cluster: Cluster, namespace: str, account: str) -> str:
    cluster.kubectl("create", "serviceaccount", account, "-n", namespace)
    return cluster.kubectl("create", "token", account, "-n", namespace).stdout.strip()


class Subscriber:
    """Reads an SSE stream in a thread (bounded by `limit` seconds) and keeps the events."""

    def __init__(self, url: str, bearer: str, namespace: str, limit: float = 120) -> None:
        self.events: list[dict[str, Any]] = []
        self.status = 0
        self._url = f"{url}/events?namespace={namespace}"
        self._headers = {"Authorization": f"Bearer {bearer}"}
        self._limit = limit
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        deadline = time.monotonic() + self._limit
        with httpx.stream("GET", self._url, headers=self._headers, timeout=5) as r:
            self.status = r.status_code
            current: dict[str, Any] = {}
            for line in r.iter_lines():
                if self._stop.is_set() or time.monotonic() > deadline:
                    return
                if line.startswith("id: "):
                    current["id"] = int(line[4:])
                elif line.startswith("event: "):
                    current["event"] = line[7:]
                elif line.startswith("data: "):
                    current["data"] = json.loads(line[6:])
                elif not line and "data" in current:
                    self.events.append(current)
                    current = {}

    def wait(self, predicate: Any, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for ev in list(self.events):
                if predicate(ev):
                    return ev
            time.sleep(0.1)
        raise AssertionError(f"no such event in {json.dumps(self.events)[-3000:]}")

    def close(self) -> None:
        self._stop.set()


def test_who_may_subscribe(streaming: tuple[Stack, str], namespace: str) -> None:
    stack, url = streaming
    assert httpx.get(f"{url}/events", timeout=5).status_code == 401
    bad = httpx.get(f"{url}/events", headers={"Authorization": "Bearer x.y.z"}, timeout=5)
    assert bad.status_code == 401
    outsider = token(stack.cluster, namespace, "outsider")
    denied = httpx.get(
        f"{url}/events?namespace={namespace}",
        headers={"Authorization": f"Bearer {outsider}"},
        timeout=5,
    )
    assert denied.status_code == 403
    assert f"system:serviceaccount:{namespace}:outsider may not get" in denied.text


def test_a_runs_progress_reaches_a_viewer_and_nothing_of_other_namespaces(
    streaming: tuple[Stack, str], namespace: str, cluster: Cluster
) -> None:
    stack, url = streaming
    other = cluster.create_namespace("stream-other")
    try:
        cluster.kubectl("apply", "-f", "-", input=VIEWER_ROLE.format(ns=namespace))
        viewer = token(cluster, namespace, "viewer")
        ready_sprite(stack, namespace)
        ready_sprite(stack, other)
        watching = Subscriber(url, viewer, namespace)
        # The viewer may get things in its namespace only, even when it asks for another.
        elsewhere = Subscriber(url, viewer, other, limit=5)
        script = "for i in 1 2 3; do echo line-$i; sleep 0.3; done"
        apply_run(stack, namespace, "streamed", ["sh", "-c", script])
        apply_run(stack, other, "secret", ["sh", "-c", "echo hidden"])
        done = watching.wait(
            lambda e: (
                e["event"] == "run.output"
                and e["data"]["run_id"] == "streamed"
                and e["data"]["payload"]["phase"] == "Succeeded"
            )
        )
        lines = [
            line
            for e in watching.events
            if e["event"] == "run.output" and e["data"]["run_id"] == "streamed"
            for line in e["data"]["payload"]["lines"]
        ]
        assert [x for x in lines if x.startswith("line-")] == ["line-1", "line-2", "line-3"]
        assert done["data"]["sprite"] == {"name": "box"}
        assert done["data"]["trace_id"]
        stack.wait_phase(other, "runs", "secret", {"Succeeded"})
        time.sleep(1)
        assert all(e["data"]["payload"]["namespace"] == namespace for e in watching.events)
        assert elsewhere.status == 403
        watching.close()
    finally:
        cluster.delete_namespace(other)


def test_resume_with_last_event_id(streaming: tuple[Stack, str], namespace: str) -> None:
    stack, url = streaming
    stack.cluster.kubectl("apply", "-f", "-", input=VIEWER_ROLE.format(ns=namespace))
    viewer = token(stack.cluster, namespace, "viewer")
    ready_sprite(stack, namespace)
    live = Subscriber(url, viewer, namespace)
    apply_run(stack, namespace, "resumed", ["sh", "-c", "echo one; sleep 0.5; echo two"])
    live.wait(
        lambda e: e["data"]["run_id"] == "resumed" and e["data"]["payload"]["phase"] == "Succeeded"
    )
    live.close()
    ids = [e["id"] for e in live.events]
    assert ids == sorted(ids)
    # From the Run's first event on, the live subscriber saw everything of the namespace.
    start = next(e["id"] for e in live.events if e["data"]["run_id"] == "resumed")
    expected = [i for i in ids if i > start]
    response = httpx.Client(timeout=5)
    collected: list[int] = []
    with response.stream(
        "GET",
        f"{url}/events?namespace={namespace}",
        headers={"Authorization": f"Bearer {viewer}", "Last-Event-ID": str(start)},
    ) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("id: "):
                collected.append(int(line[4:]))
            if collected and collected[-1] >= expected[-1]:
                break
    assert collected[: len(expected)] == expected


def _read_lines(proc: subprocess.Popen[str], into: list[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        into.append(line)


def subscribers(url: str) -> int:
    with httpx.Client(trust_env=False) as client:
        return int(client.get(f"{url}/healthz", timeout=5).json()["subscribers"])


def test_lattice_logs_follows_and_lattice_watch_shows_through_the_stream(
    streaming: tuple[Stack, str], namespace: str
) -> None:
    stack, url = streaming
    stack.cluster.kubectl("apply", "-f", "-", input=VIEWER_ROLE.format(ns=namespace))
    viewer = token(stack.cluster, namespace, "viewer")
    sprite = ready_sprite(stack, namespace)
    env = {**os.environ, "KUBECONFIG": str(stack.cluster.kubeconfig), "COLUMNS": "200"}
    lattice = str(Path(sys.executable).parent / "lattice")
    # Earlier tests' connections are gone within a keep-alive or two: count from none.
    wait_for(lambda: subscribers(url) == 0, timeout=30, what="earlier subscribers gone")
    # The Run prints only once both followers have subscribed (they see what happens from
    # then on): it waits for a file the test puts into its workspace.
    wait_then_print = (
        "until [ -e /workspace/go ]; do sleep 0.2; done; echo alpha; sleep 1; echo omega"
    )
    apply_run(stack, namespace, "followed", ["sh", "-c", wait_then_print])
    watch = subprocess.Popen(
        [lattice, "watch", "--stream", url, "--token", viewer, "-n", namespace],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    # Its lines as they come, so that Ctrl-C follows the Run's last one (not a fixed second).
    shown: list[str] = []
    reader = threading.Thread(target=_read_lines, args=(watch, shown), daemon=True)
    reader.start()
    try:
        follow = subprocess.Popen(
            [lattice, "logs", "followed", "-f", "-n", namespace, "--stream", url,
             "--token", viewer],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )  # fmt: skip
        wait_for(lambda: subscribers(url) == 2, what="both followers subscribed")
        # `lattice logs -f` through the stream and by polling, each started with SIGINT ignored
        # as a script's background job is: Ctrl-C still ends it while it waits for the Run's
        # next line, as a shell expects (130).
        streamed = ["--stream", url, "--token", viewer]
        for how, extra in (("streaming", streamed), ("polling", [])):
            interrupted = subprocess.Popen(
                [*SIGINT_IGNORED, lattice, "logs", "followed", "-f", "-n", namespace, *extra],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={k: v for k, v in env.items() if k != "LATTICE_STREAM_URL"},
            )
            if extra:
                wait_for(lambda: subscribers(url) == 3, what="the third follower subscribed")
            else:
                assert interrupted.stdout is not None
                ready, _, _ = select.select([interrupted.stdout], [], [], 60)
                assert ready, "lattice logs -f printed no progress line"
            interrupted.send_signal(signal.SIGINT)
            try:
                _, err = interrupted.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                interrupted.kill()
                raise AssertionError(f"lattice logs -f ({how}) ignored Ctrl-C") from None
            assert interrupted.returncode == 130, (how, err)
            assert "Traceback" not in err, (how, err)
            wait_for(lambda: subscribers(url) == 2, what="the third follower gone")
        (stack.sprites.host_root(sprite) / "go").touch()
        try:
            stdout, stderr = follow.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            follow.kill()
            raise
        logs = subprocess.CompletedProcess(follow.args, follow.returncode, stdout, stderr)
        assert logs.returncode == 0, logs.stderr
        assert "  | alpha" in logs.stdout
        assert "  | omega" in logs.stdout
        assert "Succeeded" in logs.stdout
        wait_for(
            lambda: any(
                f"{namespace}/followed" in x and "run.output" in x and "Succeeded" in x
                for x in shown
            ),
            timeout=30,
            what="lattice watch to show the Run's end",
        )
    finally:
        watch.send_signal(signal.SIGINT)
        try:
            watch.wait(timeout=30)
        except subprocess.TimeoutExpired:
            watch.kill()
            watch.wait()
            raise AssertionError(
                f"lattice watch ignored Ctrl-C:\n{''.join(shown)[-2000:]}"
            ) from None
        finally:
            reader.join(timeout=30)
            assert watch.stdout is not None
            assert watch.stderr is not None
            watch.stdout.close()
            err = watch.stderr.read()
            watch.stderr.close()
    out = "".join(shown)
    assert watch.returncode == 130, err  # Ctrl-C ends it, as a shell expects
    assert "Traceback" not in err, err
    # Not a terminal here: one line per event.
    followed = [line for line in out.splitlines() if f"{namespace}/followed" in line]
    assert any("run.output" in line and "Succeeded" in line for line in followed), out
    assert any("alpha" in line for line in followed), out


def test_lattice_watch_says_why_it_cannot(streaming: tuple[Stack, str]) -> None:
    stack, url = streaming
    env = {**os.environ, "KUBECONFIG": str(stack.cluster.kubeconfig)}
    env.pop("LATTICE_STREAM_URL", None)
    lattice = str(Path(sys.executable).parent / "lattice")
    for args, message in (
        (["watch"], "no stream URL"),
        (["watch", "--stream", url], "this kubeconfig has none"),
        (["watch", "--stream", url, "--token", "x.y.z"], "the stream refused: 401"),
    ):
        done = subprocess.run(
            [lattice, *args], capture_output=True, text=True, env=env, timeout=60, check=False
        )
        assert done.returncode == 1, (args, done.stderr)
        assert message in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
