"""Credentials for the Kubernetes API: a kubeconfig file or the in-cluster service account."""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

IN_CLUSTER_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeConfigError(RuntimeError):
    """No usable Kubernetes credentials were found."""


@dataclass(frozen=True)
class KubeConfig:
    """Where the API server is and how to authenticate to it."""

    server: str
    ca_pem: bytes | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    token: str | None = None
    token_file: Path | None = None
    insecure: bool = False

    def __repr__(self) -> str:  # never print key material or tokens
        return f"KubeConfig(server={self.server!r})"

    @classmethod
    def load(cls, path: str | Path | None = None, context: str | None = None) -> KubeConfig:
        """$KUBECONFIG (first file), then ~/.kube/config, then the in-cluster service account."""
        if path is None:
            env = os.environ.get("KUBECONFIG", "")
            candidates = [Path(p) for p in env.split(os.pathsep) if p]
            candidates.append(Path.home() / ".kube" / "config")
            path = next((p for p in candidates if p.exists()), None)
        if path is not None:
            return cls.from_file(Path(path), context)
        if (IN_CLUSTER_DIR / "token").exists() and os.environ.get("KUBERNETES_SERVICE_HOST"):
            return cls.in_cluster()
        raise KubeConfigError("no kubeconfig found and not running in a cluster")

    @classmethod
    def in_cluster(cls) -> KubeConfig:
        host = os.environ["KUBERNETES_SERVICE_HOST"]
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        return cls(
            server=f"https://{host}:{port}",
            ca_pem=(IN_CLUSTER_DIR / "ca.crt").read_bytes(),
            token_file=IN_CLUSTER_DIR / "token",
        )

    @classmethod
    def from_file(cls, path: Path, context: str | None = None) -> KubeConfig:
        try:
            doc: Any = yaml.safe_load(path.read_text())
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise KubeConfigError(f"cannot read kubeconfig {path}: {_one_line(exc)}") from exc
        if doc is None:
            raise KubeConfigError(f"kubeconfig {path} is empty")
        if not isinstance(doc, dict):
            raise KubeConfigError(f"kubeconfig {path} is not a mapping")
        base = path.parent
        ctx_name = context or doc.get("current-context")
        if not ctx_name:
            raise KubeConfigError(f"kubeconfig {path} has no current-context and none was given")
        ctx = _named(doc.get("contexts"), ctx_name, "context", path)
        cluster = _named(doc.get("clusters"), ctx.get("cluster"), "cluster", path)
        user = _named(doc.get("users"), ctx.get("user"), "user", path) if ctx.get("user") else {}
        token_file = user.get("tokenFile")
        config = cls(
            server=_server(cluster, ctx.get("cluster"), path),
            ca_pem=_data_or_file(cluster, "certificate-authority", base),
            cert_pem=_data_or_file(user, "client-certificate", base),
            key_pem=_data_or_file(user, "client-key", base),
            token=_optional_str(user, "token"),
            token_file=(base / str(token_file)) if token_file else None,
            insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
        )
        config.ssl_context()  # a CA or key pair that cannot be loaded is refused here, by name
        return config

    def bearer_token(self) -> str | None:
        """The current token (re-read from its file each time: projected tokens rotate)."""
        if self.token_file is not None:
            return self.token_file.read_text().strip()
        return self.token

    def ssl_context(self) -> ssl.SSLContext | bool:
        if not self.server.startswith("https"):
            return False
        if self.insecure:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif self.ca_pem:
            try:
                ctx = ssl.create_default_context(cadata=self.ca_pem.decode())
            except (ssl.SSLError, ValueError) as exc:
                raise KubeConfigError(
                    f"the certificate authority of {self.server} is not valid PEM: {exc}"
                ) from exc
        else:
            ctx = ssl.create_default_context()
        if self.cert_pem and self.key_pem:
            # ssl can only load a key pair from files; keep them private and short-lived.
            with tempfile.TemporaryDirectory() as tmp:
                cert, key = Path(tmp, "c.pem"), Path(tmp, "k.pem")
                cert.write_bytes(self.cert_pem)
                key.touch(mode=0o600)
                key.write_bytes(self.key_pem)
                try:
                    ctx.load_cert_chain(str(cert), str(key))
                except ssl.SSLError as exc:
                    raise KubeConfigError(
                        f"the client certificate or key for {self.server} cannot be loaded: {exc}"
                    ) from exc
        return ctx


def _named(items: Any, name: Any, what: str, path: Path) -> dict[str, Any]:
    if items is not None and not isinstance(items, list):
        raise KubeConfigError(f"kubeconfig {path}: {what}s is not a list")
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name:
            value = item.get(what) or {}
            if not isinstance(value, dict):
                raise KubeConfigError(f"kubeconfig {path}: {what} {name!r} is not a mapping")
            return value
    raise KubeConfigError(f"kubeconfig {path} has no {what} named {name!r}")


def _server(cluster: dict[str, Any], name: Any, path: Path) -> str:
    """The cluster's URL, path prefix kept (API proxies serve under one)."""
    raw = cluster.get("server")
    if not raw or not isinstance(raw, str):
        raise KubeConfigError(f"kubeconfig {path}: cluster {name!r} has no server")
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise KubeConfigError(
            f"kubeconfig {path}: server {raw!r} of cluster {name!r} is not an http(s) URL"
        )
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when asked
    except ValueError as exc:
        raise KubeConfigError(f"kubeconfig {path}: server {raw!r}: {exc}") from exc
    return raw.rstrip("/")


def _optional_str(section: dict[str, Any], key: str) -> str | None:
    value = section.get(key)
    return None if value is None else str(value)


def _data_or_file(section: dict[str, Any], key: str, base: Path) -> bytes | None:
    if section.get(f"{key}-data"):
        try:
            # Line breaks are allowed (as Go's decoder does); any other non-alphabet byte is not.
            text = "".join(str(section[f"{key}-data"]).split())
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            # Never fall back to other trust: a corrupt CA must not mean "the system CAs".
            raise KubeConfigError(f"{key}-data in the kubeconfig is not valid base64") from exc
    if section.get(key):
        try:
            return (base / str(section[key])).read_bytes()
        except OSError as exc:
            raise KubeConfigError(
                f"cannot read {key} {base / str(section[key])}: {exc.strerror}"
            ) from exc
    return None


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())
