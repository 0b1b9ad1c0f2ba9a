"""Exec credential plugins (client.authentication.k8s.io/v1 and v1beta1), as kubectl runs them.

The `kubernetes` package's ExecProvider is not used: it decides interactivity from stdout
(kubectl: stdin), has no interactiveMode, and its loader logs a failed plugin and goes on
without credentials, so requests went out as system:anonymous. Here a plugin that fails is
an error naming it, and its credentials are cached until their expirationTimestamp."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from lattice_adapters.kube.errors import KubeConfigError

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
EXEC_EXTENSION = "client.authentication.k8s.io/exec"
REFRESH_BEFORE = timedelta(seconds=30)
"""The plugin runs again this long before its credentials expire (a request in flight at the
expiry would otherwise be refused)."""
NON_INTERACTIVE_TIMEOUT = 120.0
"""A plugin with no terminal to ask on that runs longer than this is an error, not a hang."""


@dataclass(frozen=True)
class Credentials:
    """What a request authenticates with: a bearer token, a client key pair, or neither."""

    token: str | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = None

    def __repr__(self) -> str:  # never print key material or tokens
        kinds = [k for k in ("token", "cert_pem") if getattr(self, k)]
        return f"Credentials({', '.join(kinds) or 'none'})"

    @property
    def key_pair(self) -> tuple[bytes, bytes] | None:
        return (self.cert_pem, self.key_pem) if self.cert_pem and self.key_pem else None


@dataclass(frozen=True)
class ExecSpec:
    """One user's `exec` section, checked."""

    user: str
    command: str
    api_version: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    interactive_mode: str = "IfAvailable"
    install_hint: str = ""
    cluster_info: dict[str, Any] | None = field(default=None, compare=False)

    @classmethod
    def parse(cls, user: str, raw: Any, cluster: dict[str, Any], ca_pem: bytes | None) -> ExecSpec:
        where = f"user {user!r}: exec"
        if not isinstance(raw, dict):
            raise KubeConfigError(f"{where} is not a mapping")
        command, api_version = raw.get("command"), raw.get("apiVersion")
        if not isinstance(command, str) or not command:
            raise KubeConfigError(f"{where}.command is missing")
        if api_version not in API_VERSIONS:
            raise KubeConfigError(
                f"{where}.apiVersion {api_version!r} is not one of {', '.join(API_VERSIONS)}"
            )
        mode = raw.get("interactiveMode") or ""
        if not mode:
            # kubectl's defaulting: v1beta1 IfAvailable; v1 must say.
            if api_version.endswith("/v1"):
                raise KubeConfigError(
                    f"{where}.interactiveMode must be specified for {api_version}"
                )
            mode = "IfAvailable"
        if mode not in INTERACTIVE_MODES:
            raise KubeConfigError(
                f"{where}.interactiveMode {mode!r} is not one of {', '.join(INTERACTIVE_MODES)}"
            )
        args = raw.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise KubeConfigError(f"{where}.args is not a list of strings")
        env: list[tuple[str, str]] = []
        for item in raw.get("env") or []:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise KubeConfigError(f"{where}.env entries need a name and a value")
            env.append((item["name"], str(item.get("value", ""))))
        info = _cluster_info(cluster, ca_pem) if raw.get("provideClusterInfo") else None
        return cls(
            user=user,
            command=command,
            api_version=str(api_version),
            args=tuple(args),
            env=tuple(env),
            interactive_mode=str(mode),
            install_hint=str(raw.get("installHint") or ""),
            cluster_info=info,
        )


def _cluster_info(cluster: dict[str, Any], ca_pem: bytes | None) -> dict[str, Any]:
    """The Cluster of KUBERNETES_EXEC_INFO (client.authentication.k8s.io), as kubectl sends it."""
    info: dict[str, Any] = {"server": cluster.get("server")}
    for key in ("tls-server-name", "insecure-skip-tls-verify", "proxy-url", "disable-compression"):
        if cluster.get(key):
            info[key] = cluster[key]
    if ca_pem:
        info["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    for extension in cluster.get("extensions") or []:
        if isinstance(extension, dict) and extension.get("name") == EXEC_EXTENSION:
            info["config"] = extension.get("extension")
    return info


def _now() -> datetime:
    return datetime.now(UTC)


class ExecPlugin:
    """Runs one exec plugin when its credentials are missing or about to expire; thread-safe."""

    def __init__(
        self,
        spec: ExecSpec,
        *,
        clock: Callable[[], datetime] = _now,
        stdin_is_terminal: Callable[[], bool] | None = None,
    ) -> None:
        self.spec = spec
        self._clock = clock
        self._is_terminal = stdin_is_terminal or _stdin_is_terminal
        self._lock = threading.Lock()
        self._cached: Credentials | None = None
        self._expires: datetime | None = None

    def credentials(self) -> Credentials:
        with self._lock:
            if self._cached is not None and not self._expiring():
                return self._cached
            return self._run()

    def fresh(self) -> Credentials | None:
        """The cached credentials if still good, without waiting or running the plugin (None:
        call credentials(), from a thread in async code)."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            return self._cached if self._cached is not None and not self._expiring() else None
        finally:
            self._lock.release()

    def refresh(self, stale: Credentials) -> Credentials:
        """New credentials after the API server refused `stale` (unless another caller already
        replaced them)."""
        with self._lock:
            if self._cached is not None and self._cached != stale and not self._expiring():
                return self._cached
            return self._run()

    @property
    def expires(self) -> datetime | None:
        """When the credentials last handed out expire (None: they do not say)."""
        return self._expires

    def _expiring(self) -> bool:
        return self._expires is not None and self._clock() >= self._expires - REFRESH_BEFORE

    def _run(self) -> Credentials:
        spec = self.spec
        name = f"exec plugin {spec.command!r} of user {spec.user!r}"
        terminal = self._is_terminal()
        if spec.interactive_mode == "Always" and not terminal:
            raise KubeConfigError(
                f"{name} needs a terminal (interactiveMode Always) and standard input is not one"
            )
        interactive = terminal and spec.interactive_mode != "Never"
        exec_info: dict[str, Any] = {
            "apiVersion": spec.api_version,
            "kind": "ExecCredential",
            "spec": {"interactive": interactive},
        }
        if spec.cluster_info is not None:
            exec_info["spec"]["cluster"] = spec.cluster_info
        env = {
            **os.environ,
            **dict(spec.env),
            "KUBERNETES_EXEC_INFO": json.dumps(exec_info, separators=(",", ":")),
        }
        executable = shutil.which(spec.command, path=env.get("PATH"))
        if executable is None:
            hint = f": {_one_line(spec.install_hint)}" if spec.install_hint else ""
            raise KubeConfigError(f"{name}: executable not found{hint}")
        try:
            proc = subprocess.run(
                [executable, *spec.args],
                env=env,
                stdin=None if interactive else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                # Interactive: prompts reach the person, as with kubectl.
                stderr=None if interactive else subprocess.PIPE,
                timeout=None if interactive else NON_INTERACTIVE_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise KubeConfigError(f"{name} did not finish within {exc.timeout:.0f}s") from None
        except OSError as exc:
            raise KubeConfigError(f"{name} cannot run: {exc.strerror}") from None
        stderr = _one_line((proc.stderr or b"").decode(errors="replace"))[:1000]
        if proc.returncode != 0:
            said = f": {stderr}" if stderr else ""
            raise KubeConfigError(f"{name} failed with exit code {proc.returncode}{said}")
        credentials, expires = self._parse(name, proc.stdout)
        self._cached, self._expires = credentials, expires
        return credentials

    def _parse(self, name: str, stdout: bytes) -> tuple[Credentials, datetime | None]:
        try:
            doc: Any = json.loads(stdout)
        except (ValueError, RecursionError):
            raise KubeConfigError(f"{name} did not print an ExecCredential (JSON)") from None
        if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential":
            raise KubeConfigError(f"{name} printed JSON that is not an ExecCredential")
        if doc.get("apiVersion") != self.spec.api_version:
            raise KubeConfigError(
                f"{name} answered apiVersion {doc.get('apiVersion')!r}, "
                f"not {self.spec.api_version!r}"
            )
        status = doc.get("status")
        if not isinstance(status, dict):
            raise KubeConfigError(f"{name}: its ExecCredential has no status")
        token = status.get("token") or None
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        if bool(cert) != bool(key):
            raise KubeConfigError(
                f"{name}: status has one of clientCertificateData and clientKeyData, it needs both"
            )
        if not token and not cert:
            raise KubeConfigError(
                f"{name}: status has neither a token nor clientCertificateData/clientKeyData"
            )
        expires: datetime | None = None
        if status.get("expirationTimestamp"):
            try:
                text = str(status["expirationTimestamp"]).replace("Z", "+00:00")
                expires = datetime.fromisoformat(text)
            except ValueError:
                raise KubeConfigError(
                    f"{name}: status.expirationTimestamp {status['expirationTimestamp']!r} "
                    "is not an RFC 3339 time"
                ) from None
            if expires.tzinfo is None:
                raise KubeConfigError(f"{name}: status.expirationTimestamp has no time zone")
        return Credentials(
            token=str(token) if token else None,
            cert_pem=str(cert).encode() if cert else None,
            key_pem=str(key).encode() if key else None,
        ), expires


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except ValueError:  # closed
        return False


def _one_line(text: str) -> str:
    return " ".join(text.split())
