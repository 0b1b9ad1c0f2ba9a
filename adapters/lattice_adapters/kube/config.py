"""Credentials for the Kubernetes API, found as kubectl finds them.

--kubeconfig, else $KUBECONFIG (a merged list), else ~/.kube/config, else the in-cluster
service account. The files are merged by kubectl's rules (kubeconfig_files), the context's
cluster and user resolved here (the `kubernetes` package's KubeConfigLoader only for a user
with a legacy auth provider), and exec credential plugins run by exec_plugin."""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lattice_adapters.kube.errors import KubeConfigError
from lattice_adapters.kube.exec_plugin import Credentials, ExecPlugin, ExecSpec
from lattice_adapters.kube.kubeconfig_files import kubeconfig_paths, read_merged

IN_CLUSTER_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_LOADING = threading.Lock()
PROXY_SCHEMES = ("http", "https")

__all__ = ["Credentials", "KubeConfig", "KubeConfigError", "use_by_default"]

_chosen: tuple[str | Path | None, str | None] = (None, None)


def use_by_default(path: str | Path | None, context: str | None) -> None:
    """--kubeconfig and --context for every later `KubeConfig.load()` given neither: an
    operator process works against one cluster, read from several places (its start-up
    check, its client, both kopf registries' logins)."""
    global _chosen
    _chosen = (path, context)


@dataclass(frozen=True)
class KubeConfig:
    """Where the API server is, how to authenticate to it, and the context's namespace."""

    server: str
    ca_pem: bytes | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    token: str | None = None
    token_file: Path | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    proxy_url: str | None = None
    namespace: str = "default"
    exec_plugin: ExecPlugin | None = field(default=None, compare=False)

    def __repr__(self) -> str:  # never print key material or tokens
        return f"KubeConfig(server={self.server!r}, namespace={self.namespace!r})"

    @classmethod
    def load(cls, path: str | Path | None = None, context: str | None = None) -> KubeConfig:
        """As kubectl: `path` is --kubeconfig, `context` is --context (neither given: those
        chosen with `use_by_default`, if any)."""
        if path is None and context is None:
            path, context = _chosen
        paths = kubeconfig_paths(path)
        merged = read_merged(paths)
        empty = not (merged["clusters"] or merged["contexts"] or merged["users"])
        if empty and path is None and _in_cluster_available():
            return cls.in_cluster()
        if not paths:
            raise KubeConfigError("no kubeconfig found and not running in a cluster")
        if empty and not merged.get("current-context"):
            raise KubeConfigError(f"{_describe(paths)} is empty")
        return cls.from_document(merged, context, where=_describe(paths))

    @classmethod
    def from_file(cls, path: Path, context: str | None = None) -> KubeConfig:
        return cls.load(path, context)

    @classmethod
    def in_cluster(cls) -> KubeConfig:
        """The Pod's service account, as client-go's rest.InClusterConfig finds it."""
        host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "")
        if not host or not port:
            raise KubeConfigError(
                "in-cluster configuration: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT"
                " are not both set"
            )
        for part in ("token", "ca.crt"):
            if not _read_text(IN_CLUSTER_DIR / part):
                raise KubeConfigError(
                    f"in-cluster configuration: {IN_CLUSTER_DIR / part} is missing or empty"
                )
        namespace = os.environ.get("POD_NAMESPACE") or _read_text(IN_CLUSTER_DIR / "namespace")
        return cls(
            server=f"https://{f'[{host}]' if ':' in host else host}:{port}",
            ca_pem=(IN_CLUSTER_DIR / "ca.crt").read_bytes(),
            token_file=IN_CLUSTER_DIR / "token",  # re-read each time: projected tokens rotate
            namespace=namespace or "default",
        )

    @classmethod
    def from_document(
        cls, doc: dict[str, Any], context: str | None = None, *, where: str = "kubeconfig"
    ) -> KubeConfig:
        """The context's cluster and user of a merged kubeconfig (paths already absolute)."""
        name = context or doc.get("current-context")
        if not name:
            raise KubeConfigError(f"{where} has no current-context and no --context was given")
        ctx = _named(doc, "contexts", "context", name, where)
        cluster = _named(doc, "clusters", "cluster", ctx.get("cluster"), where)
        user_name = ctx.get("user")
        user = _named(doc, "users", "user", user_name, where) if user_name else {}
        server = _server(cluster, ctx.get("cluster"), where)
        for section, key in (
            (cluster, "certificate-authority"),
            (user, "client-certificate"),
            (user, "client-key"),
            (user, "tokenFile"),
        ):
            if section.get(key) and not section.get(f"{key}-data"):
                _read_file(str(section[key]), key)  # named here, not "File does not exist"
        insecure = bool(cluster.get("insecure-skip-tls-verify", False))
        if insecure and (
            cluster.get("certificate-authority") or cluster.get("certificate-authority-data")
        ):
            raise KubeConfigError(
                f"{where}: cluster {ctx.get('cluster')!r}: specifying a root certificates file "
                "with the insecure flag is not allowed"
            )
        if user.get("username") or user.get("password"):
            raise KubeConfigError(
                f"{where}: user {user_name!r}: username/password authentication is not "
                "supported (Kubernetes removed it in 1.19)"
            )
        if user.get("auth-provider") is not None:
            ca_pem, cert_pem, key_pem, token = _through_loader(name, ctx, cluster, user, where)
        else:
            # Certificates, keys and tokens are read here: the `kubernetes` package (its
            # whole client, ~15 MB of an operator's memory and a tenth of its start) is
            # imported only for the legacy auth providers it implements.
            ca_pem = _pem(cluster, "certificate-authority", where, name)
            cert_pem = _pem(user, "client-certificate", where, name)
            key_pem = _pem(user, "client-key", where, name)
            token = str(user.get("token") or "").strip() or None
        if bool(cert_pem) != bool(key_pem):
            raise KubeConfigError(
                f"{where}: user {user_name!r}: client-certificate and client-key go together"
                " (one of them is missing)"
            )
        token_file = user.get("tokenFile") or None  # kubectl: the file wins over token
        plugin = None
        if user.get("exec") is not None:
            spec = ExecSpec.parse(str(user_name), user["exec"], cluster, ca_pem)
            plugin = ExecPlugin(spec)
        proxy = cluster.get("proxy-url") or None
        if proxy is not None and urlsplit(str(proxy)).scheme not in PROXY_SCHEMES:
            raise KubeConfigError(
                f"{where}: cluster {ctx.get('cluster')!r}: proxy-url {proxy!r}: only "
                f"{' and '.join(PROXY_SCHEMES)} proxies are supported"
            )
        config = cls(
            server=server,
            ca_pem=ca_pem,
            cert_pem=cert_pem,
            key_pem=key_pem,
            token=token if token_file is None else None,
            token_file=Path(token_file) if token_file else None,
            insecure=insecure,
            tls_server_name=cluster.get("tls-server-name") or None,
            proxy_url=str(proxy) if proxy else None,
            namespace=str(ctx.get("namespace") or "default"),
            exec_plugin=plugin,
        )
        config.ssl_context()  # a CA or key pair that cannot be loaded is refused here, by name
        return config

    def credentials(self) -> Credentials:
        """What the next request authenticates with. With an exec plugin this may run it
        (blocking): call it from a thread in async code."""
        if self.exec_plugin is not None:
            return self.exec_plugin.credentials()
        return Credentials(token=self.bearer_token(), cert_pem=self.cert_pem, key_pem=self.key_pem)

    def refresh(self, stale: Credentials) -> Credentials | None:
        """New credentials after a 401, or None when nothing could change them."""
        if self.exec_plugin is None:
            return None
        return self.exec_plugin.refresh(stale)

    def bearer_token(self) -> str | None:
        """The current token (a token file is re-read each time: projected tokens rotate)."""
        if self.exec_plugin is not None:
            return self.exec_plugin.credentials().token
        if self.token_file is not None:
            try:
                return self.token_file.read_text().strip()
            except OSError as exc:
                raise KubeConfigError(
                    f"cannot read tokenFile {self.token_file}: {exc.strerror}"
                ) from None
        return self.token

    def ssl_context(self, credentials: Credentials | None = None) -> ssl.SSLContext | bool:
        """TLS for the API server, with `credentials`' key pair (default: the kubeconfig's)."""
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
        pair = (
            credentials.key_pair
            if credentials is not None
            else (self.cert_pem, self.key_pem)
            if self.cert_pem and self.key_pem
            else None
        )
        if pair is not None:
            # ssl can only load a key pair from files; keep them private and short-lived.
            with tempfile.TemporaryDirectory() as tmp:
                cert, key = Path(tmp, "c.pem"), Path(tmp, "k.pem")
                cert.write_bytes(pair[0])
                key.touch(mode=0o600)
                key.write_bytes(pair[1])
                try:
                    ctx.load_cert_chain(str(cert), str(key))
                except ssl.SSLError as exc:
                    raise KubeConfigError(
                        f"the client certificate or key for {self.server} cannot be loaded: {exc}"
                    ) from exc
        return ctx


def _pem(section: dict[str, Any], key: str, where: str, context: str) -> bytes | None:
    """`key`-data (base64, and it wins) or the file `key` names (made absolute already)."""
    data = section.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(str(data), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise KubeConfigError(
                f"{where}: context {context!r}: {key}-data is not base64: {exc}"
            ) from exc
    return _read_file(str(section[key]), key) if section.get(key) else None


def _through_loader(
    name: str, ctx: dict[str, Any], cluster: dict[str, Any], user: dict[str, Any], where: str
) -> tuple[bytes | None, bytes | None, bytes | None, str | None]:
    """The CA, key pair and token of a user with an auth provider, from the `kubernetes`
    package's KubeConfigLoader (which implements them)."""
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.kube_config import KubeConfigLoader

    # The exec plugin runs in from_document, not in the loader (it would log a failure and
    # go on).
    static = {k: v for k, v in user.items() if k != "exec"}
    document = {
        "current-context": name,
        "contexts": [{"name": name, "context": ctx}],
        "clusters": [{"name": ctx.get("cluster"), "cluster": cluster}],
        "users": [{"name": ctx.get("user"), "user": static}],
    }
    loaded = _client_configuration()
    # The loader writes inline keys to files for ssl; here they live in a private
    # directory only until they are read back. One load at a time: the loader caches
    # those files process-wide by content (kube_config._temp_files) and lists a file
    # before writing it, so a load in another thread (the operator loads in three) read
    # an empty certificate, and sent its requests as system:anonymous, or a file whose
    # directory the first load had just removed.
    with _LOADING, tempfile.TemporaryDirectory(prefix="lattice-kubeconfig-") as tmp:
        try:
            loader = KubeConfigLoader(  # type: ignore[no-untyped-call]
                config_dict=document, config_base_path="", temp_file_path=tmp
            )
            loader.load_and_set(loaded)  # type: ignore[no-untyped-call]
        except (ConfigException, ValueError, OSError) as exc:
            raise KubeConfigError(f"{where}: context {name!r}: {_one_line(exc)}") from exc
        ca_pem = _read_file(loaded.ssl_ca_cert, "certificate-authority")
        cert_pem = _read_file(loaded.cert_file, "client-certificate")
        key_pem = _read_file(loaded.key_file, "client-key")
    authorization = (loaded.api_key or {}).get("BearerToken") or ""
    if authorization and not authorization.startswith("Bearer "):
        raise KubeConfigError(f"{where}: context {name!r}: the auth provider gave no bearer token")
    return ca_pem, cert_pem, key_pem, authorization[len("Bearer ") :].strip() or None


def _client_configuration() -> Any:
    from kubernetes.client import Configuration

    # type.__call__: a fresh Configuration, not a copy of the process-wide default.
    return type.__call__(Configuration)


def _in_cluster_available() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (IN_CLUSTER_DIR / "token").exists()


def _describe(paths: list[Path]) -> str:
    if not paths:
        return "kubeconfig (no file found)"
    return "kubeconfig " + os.pathsep.join(str(p) for p in paths)


def _named(doc: dict[str, Any], section: str, key: str, name: Any, where: str) -> dict[str, Any]:
    for item in doc.get(section) or []:
        if item.get("name") == name:
            body: dict[str, Any] = item.get(key) or {}
            return body
    if key == "context":
        raise KubeConfigError(f'{where}: context "{name}" does not exist')
    raise KubeConfigError(f"{where} has no {key} named {name!r}")


def _server(cluster: dict[str, Any], name: Any, where: str) -> str:
    """The cluster's URL, path prefix kept (API proxies serve under one)."""
    raw = cluster.get("server")
    if not raw or not isinstance(raw, str):
        raise KubeConfigError(f"{where}: cluster {name!r} has no server")
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise KubeConfigError(f"{where}: server {raw!r} of cluster {name!r} is not an http(s) URL")
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when asked
    except ValueError as exc:
        raise KubeConfigError(f"{where}: server {raw!r}: {exc}") from exc
    return raw.rstrip("/")


def _read_file(path: str | None, what: str) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise KubeConfigError(f"cannot read {what} {path}: {exc.strerror}") from exc


def _read_text(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())
