"""Start and stop etcd, kube-apiserver and kube-controller-manager on 127.0.0.1."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from lattice_adapters import tls as _certs

ADMIN_USER = "lattice-admin"
WEBHOOK_CLIENT = "lattice-local-apiserver"
"""Subject of the client certificate the API server presents to admission webhooks (its CA
is pki/webhook-client-ca.crt): a webhook server may require it."""
STATE_FILE = "state.json"
KCM_CONTROLLERS = (
    "namespace-controller",
    "garbage-collector-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "clusterrole-aggregation-controller",
    "root-ca-certificate-publisher-controller",
)


class ControlPlaneError(RuntimeError):
    """The local control plane could not be built, started or stopped."""


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_bin_dir(repo_root: Path | None = None) -> Path:
    """The directory of the pinned binaries: $LATTICE_K8S_BIN, or build them with hack/."""
    explicit = os.environ.get("LATTICE_K8S_BIN")
    if explicit:
        return Path(explicit)
    root = repo_root or Path.cwd()
    script = root / "hack" / "build-tools.sh"
    if not script.exists():
        raise ControlPlaneError(
            f"{script} not found: run from the repository root or set LATTICE_K8S_BIN"
        )
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ControlPlaneError(f"hack/build-tools.sh failed:\n{proc.stderr[-4000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def proc_start_time(pid: int) -> str | None:
    """The kernel's start time of a live process, to tell it from a later one with the same id.

    None when there is no such process or it has exited (a zombie waiting to be reaped).
    """
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our exited child
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name in field 2 may contain spaces, so split after the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return fields[19]  # field 22: starttime


@dataclass
class ProcessRecord:
    name: str
    pid: int
    start_time: str
    log: str


@dataclass
class ControlPlaneState:
    state_dir: str
    server: str
    kubeconfig: str
    etcd_url: str
    processes: list[ProcessRecord] = field(default_factory=list)

    def save(self) -> None:
        Path(self.state_dir, STATE_FILE).write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, state_dir: Path) -> ControlPlaneState:
        """Read and check a state file; anything malformed is a ControlPlaneError, so that no
        signal is ever sent on the word of a corrupt file (pid 0 or -1 would signal ourselves)."""
        path = state_dir / STATE_FILE
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ControlPlaneError(f"cannot read {path}: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("processes"), list):
            raise ControlPlaneError(f"{path} is not a control plane state file")
        records = [process_record(p, path) for p in data["processes"]]
        try:
            return cls(
                state_dir=str(data["state_dir"]),
                server=str(data["server"]),
                kubeconfig=str(data["kubeconfig"]),
                etcd_url=str(data["etcd_url"]),
                processes=records,
            )
        except KeyError as exc:
            raise ControlPlaneError(f"{path} lacks the field {exc.args[0]!r}") from exc


def process_record(raw: object, path: Path) -> ProcessRecord:
    """One process entry of a state file, refused unless it could name a process we started."""
    if not isinstance(raw, dict):
        raise ControlPlaneError(f"{path}: a process entry is not an object: {raw!r}")
    pid, start, name = raw.get("pid"), raw.get("start_time"), raw.get("name")
    # bool is an int in Python: refuse it explicitly; 1 is init, 0 and negatives are groups.
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        raise ControlPlaneError(f"{path}: process {name!r} has an invalid pid {pid!r}")
    if not isinstance(start, str) or not start.isdigit():
        raise ControlPlaneError(f"{path}: process {name!r} has an invalid start_time {start!r}")
    return ProcessRecord(str(name), pid, start, str(raw.get("log") or ""))


def spawn_logged(
    name: str, args: list[str], log_path: Path, *, cwd: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], ProcessRecord | None]:
    """Start `args` in a session of its own, its output appended to `log_path`; the process
    and its record (None if it exited at once)."""
    log: IO[bytes] = open(log_path, "ab")  # noqa: SIM115 - handed to the child
    try:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=cwd,
        )
    finally:
        log.close()
    return proc, started_record(proc, name, log_path)


def started_record(proc: subprocess.Popen[bytes], name: str, log: Path) -> ProcessRecord | None:
    """The record of a process just started (None if it exited at once)."""
    for _ in range(200):
        start_time = proc_start_time(proc.pid)
        if start_time:
            return ProcessRecord(name, proc.pid, start_time, str(log))
        time.sleep(0.01)
    return None


def kill_record(record: ProcessRecord, timeout: float = 15.0) -> None:
    """Stop one process we started, by id, only if it is still that same process.

    It was started as the leader of its own session, so its process group is its pid; a
    process that is not a group leader, or leads our own group, is never signalled."""
    if record.pid <= 1 or proc_start_time(record.pid) != record.start_time:
        return
    try:
        group = os.getpgid(record.pid)
    except ProcessLookupError:
        return
    if group != record.pid or group == os.getpgrp():
        raise ControlPlaneError(
            f"process {record.name} ({record.pid}) does not lead a process group of its own: "
            "not signalled"
        )
    with contextlib.suppress(ProcessLookupError):
        os.killpg(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc_start_time(record.pid) != record.start_time:
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(record.pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(record.pid, 0)


def stop_from_state(state_dir: Path, *, remove: bool = True) -> bool:
    """Stop exactly the processes recorded in state_dir (newest first). False if none recorded."""
    if not (state_dir / STATE_FILE).exists():
        return False
    state = ControlPlaneState.load(state_dir)  # raises before any signal when corrupt
    for record in reversed(state.processes):
        kill_record(record)
    if remove:
        shutil.rmtree(state_dir, ignore_errors=True)
    return True


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig_document(
    server: str, ca_pem: bytes, user: str, cert_pem: bytes, key_pem: bytes, context: str
) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "lattice-local",
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(cert_pem),
                    "client-key-data": _b64(key_pem),
                },
            }
        ],
        "contexts": [{"name": context, "context": {"cluster": "lattice-local", "user": user}}],
        "current-context": context,
    }
    return yaml.safe_dump(doc, sort_keys=False)


class LocalControlPlane:
    """One etcd + kube-apiserver (+ kube-controller-manager) on 127.0.0.1.

    Everything lives in `state_dir`: certificates, etcd data, logs, the admin
    kubeconfig, and a state file listing the processes so that `stop()` (or
    `stop_from_state` from another process) ends exactly those.
    """

    def __init__(
        self,
        bin_dir: Path,
        state_dir: Path,
        *,
        controller_manager: bool = True,
        profiling: bool = False,
        audit_writes: bool = False,
    ) -> None:
        """`profiling`: the API server serves /debug/pprof (to its admins); `audit_writes`: it
        logs every write of a lattice.dev object or an Event, with its user agent and request
        body, to `audit_log` (who made which write). Both for benchmarks."""
        self.bin_dir = bin_dir
        self.state_dir = state_dir
        self.controller_manager = controller_manager
        self.profiling = profiling
        self.audit_writes = audit_writes
        self.state: ControlPlaneState | None = None
        # Kept so the children are reaped by us (and Python does not warn about them).
        self._children: list[subprocess.Popen[bytes]] = []

    # -- paths -----------------------------------------------------------------
    @property
    def pki(self) -> Path:
        return self.state_dir / "pki"

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "admin.kubeconfig"

    def _bin(self, name: str) -> str:
        path = self.bin_dir / name
        if not path.exists():
            raise ControlPlaneError(f"{path} is missing: run hack/build-tools.sh")
        return str(path)

    # -- lifecycle -------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> ControlPlaneState:
        if (self.state_dir / STATE_FILE).exists():
            raise ControlPlaneError(
                f"{self.state_dir} already has a running control plane; stop it first"
            )
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.pki.mkdir(exist_ok=True)
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        server = f"https://127.0.0.1:{api_port}"
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._write_pki(server)
        self.state = ControlPlaneState(
            state_dir=str(self.state_dir),
            server=server,
            kubeconfig=str(self.kubeconfig),
            etcd_url=etcd_url,
        )
        deadline = time.monotonic() + timeout
        try:
            self._spawn(
                "etcd",
                [
                    self._bin("etcd"),
                    "--name=default",
                    f"--data-dir={self.state_dir / 'etcd'}",
                    f"--listen-client-urls={etcd_url}",
                    f"--advertise-client-urls={etcd_url}",
                    f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                    f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
                    "--unsafe-no-fsync",
                    "--log-level=warn",
                ],
            )
            self._wait_http(f"{etcd_url}/health", deadline, tls=False)
            self._spawn("kube-apiserver", self._apiserver_args(api_port, etcd_url, server))
            self._wait_http(f"{server}/readyz", deadline, tls=True)
            if self.controller_manager:
                self._spawn("kube-controller-manager", self._kcm_args())
        except BaseException:
            # Keep the state directory: its logs say why start-up failed.
            self._stop_processes()
            (self.state_dir / STATE_FILE).unlink(missing_ok=True)
            raise
        return self.state

    def stop(self) -> None:
        self._stop_processes()
        shutil.rmtree(self.state_dir, ignore_errors=True)

    def _stop_processes(self) -> None:
        if self.state is not None:
            for record in reversed(self.state.processes):
                kill_record(record)
            self.state = None
        for child in self._children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=5)
        self._children.clear()

    # -- users -----------------------------------------------------------------
    def user_kubeconfig(
        self, user: str, groups: tuple[str, ...] = (), path: Path | None = None
    ) -> Path:
        """Write a kubeconfig for a client-certificate user (CN=user, O=groups)."""
        assert self.state is not None, "control plane not started"
        ca_key = serialization.load_pem_private_key((self.pki / "client-ca.key").read_bytes(), None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        ca_cert = x509.load_pem_x509_certificate((self.pki / "client-ca.crt").read_bytes())
        pair = _certs.client_cert(ca_key, ca_cert, user, groups)
        target = path or self.state_dir / f"{user}.kubeconfig"
        target.write_text(
            kubeconfig_document(
                self.state.server,
                (self.pki / "serving-ca.crt").read_bytes(),
                user,
                pair.cert_pem,
                pair.key_pem,
                f"{user}@lattice-local",
            )
        )
        target.chmod(0o600)
        return target

    # -- internals ---------------------------------------------------------------
    def _write_pki(self, server: str) -> None:
        serving_ca, serving_key, serving_cert = _certs.make_ca("lattice-local-serving-ca")
        serving_ca.write(self.pki, "serving-ca")
        _certs.serving_cert(serving_key, serving_cert).write(self.pki, "apiserver")
        client_ca, client_key, client_cert = _certs.make_ca("lattice-local-client-ca")
        client_ca.write(self.pki, "client-ca")
        admin = _certs.client_cert(client_key, client_cert, ADMIN_USER, ("system:masters",))
        admin.write(self.pki, "admin")
        self._write_webhook_client()
        sa_private, sa_public = _certs.service_account_keys()
        (self.pki / "sa.key").write_bytes(sa_private)
        (self.pki / "sa.pub").write_bytes(sa_public)
        self.kubeconfig.write_text(
            kubeconfig_document(
                server,
                serving_ca.cert_pem,
                ADMIN_USER,
                admin.cert_pem,
                admin.key_pem,
                "lattice-local",
            )
        )
        self.kubeconfig.chmod(0o600)

    @property
    def audit_log(self) -> Path:
        """JSON lines, one per write audited (with `audit_writes`)."""
        return self.state_dir / "audit.log"

    def _audit_args(self) -> list[str]:
        if not self.audit_writes:
            return []
        policy = self.pki / "audit-policy.yaml"
        writes = ["create", "update", "patch", "delete", "deletecollection"]
        rules = [
            {
                "level": "Request",
                "verbs": writes,
                "resources": [
                    {"group": "lattice.dev"},
                    {"group": "", "resources": ["events"]},
                    {"group": "events.k8s.io", "resources": ["events"]},
                ],
            },
            {"level": "None"},
        ]
        policy.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "audit.k8s.io/v1",
                    "kind": "Policy",
                    "omitStages": ["RequestReceived", "ResponseStarted"],
                    "rules": rules,
                }
            )
        )
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
        ]

    @property
    def webhook_client_ca(self) -> Path:
        """CA of the certificate the API server presents when it calls a webhook."""
        return self.pki / "webhook-client-ca.crt"

    def _write_webhook_client(self) -> None:
        # The API server presents this certificate to every webhook (AdmissionConfiguration
        # kubeConfigFile, user "*"), as a cluster must be configured for a webhook server
        # that requires one; a server that asks for none never sees it.
        ca, ca_key, ca_cert = _certs.make_ca("lattice-local-webhook-client-ca")
        ca.write(self.pki, "webhook-client-ca")
        pair = _certs.client_cert(ca_key, ca_cert, WEBHOOK_CLIENT)
        users = {
            "apiVersion": "v1",
            "kind": "Config",
            "users": [
                {
                    "name": "*",
                    "user": {
                        "client-certificate-data": _b64(pair.cert_pem),
                        "client-key-data": _b64(pair.key_pem),
                    },
                }
            ],
        }
        kubeconfig = self.pki / "webhook-client.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(users, sort_keys=False))
        kubeconfig.chmod(0o600)
        webhooks = {
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "WebhookAdmissionConfiguration",
            "kubeConfigFile": str(kubeconfig),
        }
        admission = {
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "AdmissionConfiguration",
            "plugins": [
                {"name": name, "configuration": webhooks}
                for name in ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")
            ],
        }
        (self.pki / "admission.yaml").write_text(yaml.safe_dump(admission, sort_keys=False))

    def _apiserver_args(self, port: int, etcd_url: str, server: str) -> list[str]:
        return [
            self._bin("kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={port}",
            f"--tls-cert-file={self.pki / 'apiserver.crt'}",
            f"--tls-private-key-file={self.pki / 'apiserver.key'}",
            f"--client-ca-file={self.pki / 'client-ca.crt'}",
            f"--service-account-issuer={server}",
            f"--service-account-key-file={self.pki / 'sa.pub'}",
            f"--service-account-signing-key-file={self.pki / 'sa.key'}",
            "--authorization-mode=RBAC",
            "--disable-admission-plugins=ServiceAccount",
            f"--admission-control-config-file={self.pki / 'admission.yaml'}",
            # Loopback is refused as an endpoint address; nothing in-cluster dials it anyway.
            "--endpoint-reconciler-type=none",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            f"--profiling={'true' if self.profiling else 'false'}",
            *self._audit_args(),
            "--v=0",
        ]

    def _kcm_args(self) -> list[str]:
        return [
            self._bin("kube-controller-manager"),
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            # No front-proxy CA exists here; do not look one up in kube-system.
            "--authentication-skip-lookup=true",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            "--leader-elect=false",
            "--use-service-account-credentials=false",
            f"--controllers={','.join(KCM_CONTROLLERS)}",
            f"--service-account-private-key-file={self.pki / 'sa.key'}",
            f"--root-ca-file={self.pki / 'serving-ca.crt'}",
            "--profiling=false",
            "--v=0",
        ]

    def _spawn(self, name: str, args: list[str]) -> None:
        assert self.state is not None
        log_path = self.state_dir / f"{name}.log"
        proc, record = spawn_logged(name, args, log_path, cwd=self.state_dir)
        self._children.append(proc)
        if record is None:
            raise ControlPlaneError(f"{name} exited at once; see {log_path}")
        self.state.processes.append(record)
        self.state.save()

    def _wait_http(self, url: str, deadline: float, *, tls: bool) -> None:
        assert self.state is not None
        context: ssl.SSLContext | None = None
        if tls:
            context = ssl.create_default_context(cafile=str(self.pki / "serving-ca.crt"))
            context.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        # No proxies: every request of the local control plane stays on 127.0.0.1.
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )
        last_error = ""
        while time.monotonic() < deadline:
            for record in self.state.processes:
                if proc_start_time(record.pid) != record.start_time:
                    tail = Path(record.log).read_text(errors="replace")[-3000:]
                    raise ControlPlaneError(f"{record.name} exited during start-up:\n{tail}")
            try:
                with opener.open(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError) as exc:
                last_error = str(exc)
            time.sleep(0.1)
        tails = "\n".join(
            f"--- {r.name} ({r.log}):\n" + Path(r.log).read_text(errors="replace")[-2000:]
            for r in self.state.processes
        )
        raise ControlPlaneError(f"{url} not ready in time (last error: {last_error})\n{tails}")
