"""Credentials for the Kubernetes API: a kubeconfig file or the in-cluster service account."""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
            doc: dict[str, Any] = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise KubeConfigError(f"cannot read kubeconfig {path}: {exc}") from exc
        base = path.parent
        ctx_name = context or doc.get("current-context")
        ctx = _named(doc.get("contexts"), ctx_name, "context")
        cluster = _named(doc.get("clusters"), ctx.get("cluster"), "cluster")
        user = _named(doc.get("users"), ctx.get("user"), "user") if ctx.get("user") else {}
        token_file = user.get("tokenFile")
        return cls(
            server=str(cluster["server"]).rstrip("/"),
            ca_pem=_data_or_file(cluster, "certificate-authority", base),
            cert_pem=_data_or_file(user, "client-certificate", base),
            key_pem=_data_or_file(user, "client-key", base),
            token=user.get("token"),
            token_file=(base / token_file) if token_file else None,
            insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
        )

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
            ctx = ssl.create_default_context(cadata=self.ca_pem.decode())
        else:
            ctx = ssl.create_default_context()
        if self.cert_pem and self.key_pem:
            # ssl can only load a key pair from files; keep them private and short-lived.
            with tempfile.TemporaryDirectory() as tmp:
                cert, key = Path(tmp, "c.pem"), Path(tmp, "k.pem")
                cert.write_bytes(self.cert_pem)
                key.touch(mode=0o600)
                key.write_bytes(self.key_pem)
                ctx.load_cert_chain(str(cert), str(key))
        return ctx


def _named(items: Any, name: Any, what: str) -> dict[str, Any]:
    for item in items or []:
        if item.get("name") == name:
            value = item.get(what) or {}
            assert isinstance(value, dict)
            return value
    raise KubeConfigError(f"kubeconfig has no {what} named {name!r}")


def _data_or_file(section: dict[str, Any], key: str, base: Path) -> bytes | None:
    if section.get(f"{key}-data"):
        return base64.b64decode(str(section[f"{key}-data"]))
    if section.get(key):
        return (base / str(section[key])).read_bytes()
    return None
