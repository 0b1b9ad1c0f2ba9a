"""Kubeconfig variants for the local control plane, and the two readers held against each
other: the pinned kubectl and `lattice` (tests/e2e/test_kubeconfig_parity.py)."""

from __future__ import annotations

import base64
import json
import os
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s

from tests.support.cli_in_process import run_lattice
from tests.support.cluster import Cluster

EXEC_V1 = "client.authentication.k8s.io/v1"
EXEC_V1BETA1 = "client.authentication.k8s.io/v1beta1"


@dataclass(frozen=True)
class Identities:
    """Credentials the local API server accepts, and what it calls them."""

    server: str
    ca_pem: bytes
    alice: tuple[bytes, bytes]  # client certificate and key of user "alice"
    bob: tuple[bytes, bytes]
    admin: tuple[bytes, bytes]  # system:masters
    robot_token: str  # a service account's token
    robot: str  # its username

    @classmethod
    def make(cls, cluster: Cluster, namespace: str) -> Identities:
        plane = cluster.local
        assert plane is not None, "needs the local control plane"
        assert plane.state is not None

        def pair(user: str) -> tuple[bytes, bytes]:
            doc = yaml.safe_load(cluster.user_kubeconfig(user).read_text())
            body = doc["users"][0]["user"]
            return (
                base64.b64decode(body["client-certificate-data"]),
                base64.b64decode(body["client-key-data"]),
            )

        # Through the API client, not `kubectl create serviceaccount` / `create token`: the
        # identity only has to exist (~0.3 s of CPU of two kubectl processes per module).
        core = cluster.core
        core.create_namespaced_service_account(
            namespace, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="robot"))
        )
        spec = k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=7200)  # the API's own
        request = core.create_namespaced_service_account_token(
            "robot", namespace, k8s.AuthenticationV1TokenRequest(spec=spec)
        )
        token = request.status.token if request.status is not None else None
        assert token, request
        return cls(
            server=plane.state.server,
            ca_pem=(plane.pki / "serving-ca.crt").read_bytes(),
            alice=pair("alice"),
            bob=pair("bob"),
            admin=((plane.pki / "admin.crt").read_bytes(), (plane.pki / "admin.key").read_bytes()),
            robot_token=token,
            robot=f"system:serviceaccount:{namespace}:robot",
        )


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def document(
    clusters: dict[str, dict[str, Any]] | None = None,
    users: dict[str, dict[str, Any]] | None = None,
    contexts: dict[str, dict[str, Any]] | None = None,
    current: str | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Config"}
    if clusters is not None:
        doc["clusters"] = [{"name": k, "cluster": v} for k, v in clusters.items()]
    if users is not None:
        doc["users"] = [{"name": k, "user": v} for k, v in users.items()]
    if contexts is not None:
        doc["contexts"] = [{"name": k, "context": v} for k, v in contexts.items()]
    if current is not None:
        doc["current-context"] = current
    return doc


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def exec_credential(api_version: str, **status: Any) -> str:
    return json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "status": status})


def plugin(path: Path, body: str) -> Path:
    """An exec credential plugin: a shell script."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def printing(path: Path, answer: str, *, counter: Path | None = None) -> Path:
    """A plugin that prints `answer` (and counts its runs in `counter`)."""
    count = f"echo run >> '{counter}'\n" if counter else ""
    return plugin(path, f"{count}cat <<'JSON'\n{answer}\nJSON\n")


@dataclass(frozen=True)
class Reading:
    """What one reader made of a kubeconfig: who the API server says it is, or its error."""

    ok: bool
    username: str = ""
    namespace: str = ""
    error: str = ""


def clean_env(home: Path, kubeconfig: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["HOME"] = str(home)  # no ~/.kube/config of the machine
    if kubeconfig is not None:
        env["KUBECONFIG"] = kubeconfig
    return env


def kubectl_reads(kubectl: Path, env: dict[str, str], args: list[str], cwd: Path) -> Reading:
    who = subprocess.run(
        [str(kubectl), *args, "auth", "whoami", "-o", "json"],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    if who.returncode != 0:
        return Reading(ok=False, error=who.stderr.strip())
    view = subprocess.run(
        [str(kubectl), *args, "config", "view", "--minify", "-o", "jsonpath={..namespace}"],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL, check=True,
    )  # fmt: skip
    username = json.loads(who.stdout)["status"]["userInfo"]["username"]
    return Reading(ok=True, username=username, namespace=view.stdout.strip() or "default")


def lattice_reads(env: dict[str, str], args: list[str], cwd: Path) -> Reading:
    done = lattice_cli(env, ["whoami", "--json", *args], cwd)
    if done.returncode != 0:
        return Reading(ok=False, error=done.stderr.strip())
    shown = json.loads(done.stdout)
    return Reading(ok=True, username=shown["username"], namespace=shown["namespace"])


def lattice_reads_in_process(env: dict[str, str], args: list[str], cwd: Path) -> Reading:
    """What `lattice_reads` gets, without starting an interpreter (half a second of CPU each):
    `lattice whoami --json ARGS` through tests/support/cli_in_process.run_lattice. Exec plugins
    still run as processes, and the API server answers as it does to the subprocess."""
    done = run_lattice(["whoami", "--json", *args], env, cwd)
    if done.returncode != 0:
        return Reading(ok=False, error=done.stderr.strip())
    shown = json.loads(done.stdout)
    return Reading(ok=True, username=shown["username"], namespace=shown["namespace"])


def lattice_cli(
    env: dict[str, str], args: list[str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lattice_operator", *args],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip


@contextmanager
def connect_proxy() -> Iterator[tuple[str, list[str]]]:
    """An HTTP CONNECT proxy on 127.0.0.1 that tunnels to 127.0.0.1 only; yields its URL and
    the CONNECT targets it served."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    seen: list[str] = []
    opened: list[socket.socket] = []
    stop = threading.Event()

    def pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                with suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def serve(client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 8192:
            chunk = client.recv(1024)
            if not chunk:
                return
            head += chunk
        line = head.split(b"\r\n", 1)[0].decode()
        method, target, _ = line.split(" ", 2)
        host, _, port = target.rpartition(":")
        if method != "CONNECT" or host != "127.0.0.1":
            client.sendall(b"HTTP/1.1 403 Forbidden\r\n\r\n")
            return
        seen.append(target)
        upstream = socket.create_connection(("127.0.0.1", int(port)))
        opened.append(upstream)
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        back = threading.Thread(target=pump, args=(client, upstream), daemon=True)
        back.start()
        pump(upstream, client)
        back.join(timeout=10)

    def accept() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            opened.append(client)
            threading.Thread(target=serve, args=(client,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", seen
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
        for s in opened:
            s.close()
