"""The admission webhook's certificate: the server every replica runs, the Secret it reads
(and reloads), and, on the leader, the rotation (lattice_operator.certrotation decides; this
module reads and writes the Secret and the webhook configurations' caBundle). No handlers
here: handlers._startup starts the loops, after the clients they use."""

from __future__ import annotations

import asyncio
import base64
import datetime
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import kopf

from lattice_adapters import tls
from lattice_adapters.kube import KubeApiError, KubeClient, resource_path
from lattice_operator.certrotation import Action, CertState, RotationPlanner, RotationTimings, Step
from lattice_operator.clock import Clock
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.handlers._webhook_server import GuardedWebhookServer
from lattice_operator.metrics import WEBHOOK_CERT_EXPIRY, WEBHOOK_CERT_STEPS
from lattice_operator.settings import WebhookSettings

log = logging.getLogger(__name__)

CONFIGURATIONS = ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
_FAILURES = (KubeApiError, aiohttp.ClientError, OSError, tls.CertificateError, TimeoutError)


@dataclass(frozen=True)
class CertSecret:
    """The Secret's four PEM values (`ca.key` only when the operator manages it)."""

    ca_crt: bytes
    ca_key: bytes
    tls_crt: bytes
    tls_key: bytes
    resource_version: str | None = None

    @classmethod
    def from_secret(cls, secret: dict[str, Any]) -> CertSecret:
        data = secret.get("data") or {}

        def value(key: str) -> bytes:
            return base64.b64decode(data.get(key) or "")

        return cls(
            value("ca.crt"),
            value("ca.key"),
            value("tls.crt"),
            value("tls.key"),
            str(secret.get("metadata", {}).get("resourceVersion") or "") or None,
        )

    def data(self) -> dict[str, str]:
        raw = {"ca.crt": self.ca_crt, "ca.key": self.ca_key}
        raw |= {"tls.crt": self.tls_crt, "tls.key": self.tls_key}
        return {k: base64.b64encode(v).decode() for k, v in raw.items() if v}

    @property
    def serving(self) -> tls.KeyPair:
        return tls.KeyPair(self.tls_crt, self.tls_key)


def serving_names(webhook: WebhookSettings) -> frozenset[str]:
    return frozenset({webhook.url_host or webhook.host})


def describe(secret: CertSecret) -> CertState:
    """The Secret as the planner sees it; unreadable parts read as 'belongs to nothing'."""
    try:
        bundle = tls.load_certificates(secret.ca_crt)
        (serving, *_) = tls.load_certificates(secret.tls_crt)
    except (tls.CertificateError, ValueError):
        epoch = datetime.datetime.fromtimestamp(0, datetime.UTC)
        return CertState((), None, None, epoch, frozenset())
    try:
        key = tls.load_private_key(secret.ca_key)
        signing = next((tls.fingerprint(c) for c in bundle if tls.key_matches(key, c)), None)
    except tls.CertificateError:
        signing = None
    issuer = next((tls.fingerprint(c) for c in bundle if tls.issued_by(serving, c)), None)
    return CertState(
        bundle=tuple(tls.fingerprint(c) for c in bundle),
        signing_ca=signing,
        serving_issuer=issuer,
        serving_not_after=serving.not_valid_after_utc,
        serving_names=tls.subject_names(serving),
    )


def _split(ref: str) -> tuple[str, str]:
    namespace, _, name = ref.partition("/")
    return namespace, name


class SecretStore:
    """The certificate Secret through the API server."""

    def __init__(self, kube: KubeClient, ref: str) -> None:
        self._kube = kube
        self.namespace, self.name = _split(ref)
        self._collection = resource_path("", "v1", "secrets", self.namespace)

    async def read(self) -> CertSecret | None:
        try:
            return CertSecret.from_secret(await self._kube.get(f"{self._collection}/{self.name}"))
        except KubeApiError as exc:
            if exc.not_found:
                return None
            raise

    def _body(self, secret: CertSecret) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "labels": {"app.kubernetes.io/managed-by": "lattice-operator"},
        }
        if secret.resource_version:
            metadata["resourceVersion"] = secret.resource_version
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": metadata,
            "data": secret.data(),
        }

    async def create(self, secret: CertSecret) -> bool:
        """False if another replica created it first."""
        try:
            await self._kube.create(self._collection, self._body(secret))
        except KubeApiError as exc:
            if exc.conflict:
                return False
            raise
        return True

    async def replace(self, secret: CertSecret) -> bool:
        """False if it changed since it was read (409): the next pass reads it again."""
        try:
            await self._kube.replace(f"{self._collection}/{self.name}", self._body(secret))
        except KubeApiError as exc:
            if exc.conflict:
                return False
            raise
        return True

    def where(self) -> str:
        return f"{self.namespace}/{self.name}"


def new_ca(validity: float) -> tuple[bytes, bytes]:
    # A name of its own per CA: verifiers pick an issuer by name first, and during a
    # rotation the bundle holds two CAs.
    name = f"lattice-webhook-ca-{datetime.datetime.now(datetime.UTC):%Y%m%dT%H%M%S.%f}"
    pair, _, _ = tls.make_ca(name, datetime.timedelta(seconds=validity))
    return pair.cert_pem, pair.key_pem


def issue(ca_crt: bytes, ca_key: bytes, bundle: bytes, names: frozenset[str]) -> CertSecret:
    """A serving certificate from the CA `ca_crt`/`ca_key`, valid as long as that CA."""
    (ca,) = tls.load_certificates(ca_crt)
    key = tls.load_private_key(ca_key)
    pair = tls.serving_cert(key, ca, tuple(sorted(names)), ca.not_valid_after_utc)
    return CertSecret(bundle, ca_key, pair.cert_pem, pair.key_pem)


def fresh(validity: float, names: frozenset[str]) -> CertSecret:
    ca_crt, ca_key = new_ca(validity)
    return issue(ca_crt, ca_key, ca_crt, names)


# -- every replica: the server and its certificate -----------------------------------------


async def certificate_from_secret(store: SecretStore, webhook: WebhookSettings) -> CertSecret:
    """The Secret's certificate; made first if the operator manages it and there is none
    (whichever replica creates it first wins); waited for if another tool makes it."""
    settings = webhook.certificate
    while True:
        secret = await store.read()
        if secret is not None and secret.tls_crt and secret.tls_key:
            return secret
        if settings.manage and secret is None:
            if await store.create(fresh(settings.validity, serving_names(webhook))):
                log.info("created the webhook certificate Secret %s", store.where())
            continue
        log.warning("waiting for the webhook certificate Secret %s", store.where())
        await asyncio.sleep(settings.reload_interval)


def _expiry(pair: tls.KeyPair) -> None:
    (cert, *_) = tls.load_certificates(pair.cert_pem)
    WEBHOOK_CERT_EXPIRY.set(cert.not_valid_after_utc.timestamp())


async def reload_forever(store: SecretStore, server: tls.ServerTLS, interval: float) -> None:
    """Load the Secret's certificate into the running server whenever it changes."""
    while True:
        await asyncio.sleep(interval)
        try:
            secret = await store.read()
            if secret is None or not secret.tls_crt or secret.serving == server.loaded:
                continue
            server.load(secret.serving)
            _expiry(secret.serving)
            log.info("webhook server: loaded the new certificate from %s", store.where())
        except (*_FAILURES, ValueError) as exc:  # ValueError: ssl refused the pair
            log.warning("webhook server: reading %s: %s", store.where(), exc)


async def webhook_server(ctx: OperatorContext) -> kopf.WebhookServer:
    """kopf's webhook server, with its certificate from files, from the Secret (reloaded
    when it changes), or a throwaway self-signed CA (its directory goes into ctx.scratch,
    removed when the operator stops)."""
    webhook = ctx.settings.webhook
    url_host = webhook.url_host or webhook.host
    port = webhook.port or None
    if webhook.cert_file and webhook.key_file:
        return GuardedWebhookServer(
            webhook,
            addr=webhook.host,
            port=port,
            host=url_host,
            certfile=webhook.cert_file,
            pkeyfile=webhook.key_file,
            cafile=webhook.ca_file,
        )
    directory = Path(tempfile.mkdtemp(prefix="lattice-webhook-"))
    ctx.scratch.append(directory)
    if webhook.certificate.secret:
        store = SecretStore(ctx.require_kube(), webhook.certificate.secret)
        secret = await certificate_from_secret(store, webhook)
        server = tls.ServerTLS(directory)
        cert_path, key_path = server.load(secret.serving)
        _expiry(secret.serving)
        ctx.background.append(
            asyncio.create_task(
                reload_forever(store, server, webhook.certificate.reload_interval),
                name="webhook-cert-reload",
            )
        )
        # kopf loads these files into our context once; later certificates go straight
        # into the context (ServerTLS.load), never through kopf's restart-on-change.
        return GuardedWebhookServer(
            webhook,
            addr=webhook.host,
            port=port,
            host=url_host,
            context=server.context,
            certfile=str(cert_path),
            pkeyfile=str(key_path),
            cadata=secret.ca_crt,
        )
    ca, ca_key, ca_cert = tls.make_ca("lattice-webhook-ca")
    cert_path, key_path = tls.serving_cert(ca_key, ca_cert, (url_host,)).write(directory, "tls")
    return GuardedWebhookServer(
        webhook,
        addr=webhook.host,
        port=port,
        host=url_host,
        certfile=str(cert_path),
        pkeyfile=str(key_path),
        cadata=ca.cert_pem,
    )


# -- the leader: rotation ----------------------------------------------------------------


class CertRotator:
    """One pass at a time: read, plan a step, carry it out."""

    def __init__(self, kube: KubeClient, webhook: WebhookSettings, clock: Clock) -> None:
        assert webhook.certificate.secret, "rotation needs a Secret"
        self._kube = kube
        self._webhook = webhook
        self._settings = webhook.certificate
        self.store = SecretStore(kube, webhook.certificate.secret)
        self.planner = RotationPlanner(
            RotationTimings(
                rotate_before=self._settings.rotate_before,
                propagation=self._settings.propagation,
                reload_interval=self._settings.reload_interval,
                validity=self._settings.validity,
            ),
            clock,
        )
        self._configuration = webhook.configuration or webhook.managed

    async def run_forever(self) -> None:
        while True:
            try:
                step = await self.pass_once()
                delay = step.wait if step.action is Action.WAIT else 0.0
            except _FAILURES as exc:
                log.warning("webhook certificate: %s", exc)
                delay = self._settings.reload_interval
            await asyncio.sleep(min(max(delay, 0.05), self._settings.reload_interval))

    async def pass_once(self) -> Step:
        secret = await self.store.read()
        state = describe(secret) if secret is not None else None
        published = await self._published(secret) if secret is not None else None
        names = serving_names(self._webhook)
        step = self.planner.plan(state, names, published)
        if step.action is Action.WAIT:
            return step
        done = await self._carry_out(step, secret, names)
        if done:
            WEBHOOK_CERT_STEPS.labels(step=step.action.value).inc()
            log.info("webhook certificate: %s (%s)", step.action.value, step.reason)
        return step

    async def _carry_out(
        self, step: Step, secret: CertSecret | None, names: frozenset[str]
    ) -> bool:
        validity = self._settings.validity
        if step.action is Action.CREATE or secret is None:
            return await self.store.create(fresh(validity, names))
        if step.action is Action.REISSUE:
            new = fresh(validity, names)
        elif step.action is Action.PUBLISH:
            await self._publish(secret.ca_crt)
            return True
        elif step.action is Action.BEGIN:
            ca_crt, ca_key = new_ca(validity)
            new = CertSecret(secret.ca_crt + ca_crt, ca_key, secret.tls_crt, secret.tls_key)
        elif step.action is Action.SWITCH:
            signing = self._signing_ca(secret)
            new = issue(tls.cert_pem(signing), secret.ca_key, secret.ca_crt, names)
        elif step.action is Action.DROP:
            only = tls.cert_pem(self._signing_ca(secret))
            new = CertSecret(only, secret.ca_key, secret.tls_crt, secret.tls_key)
        else:
            raise AssertionError(step.action)
        return await self.store.replace(
            CertSecret(new.ca_crt, new.ca_key, new.tls_crt, new.tls_key, secret.resource_version)
        )

    @staticmethod
    def _signing_ca(secret: CertSecret) -> Any:
        key = tls.load_private_key(secret.ca_key)
        for ca in tls.load_certificates(secret.ca_crt):
            if tls.key_matches(key, ca):
                return ca
        raise tls.CertificateError("the CA key belongs to no CA of the bundle")

    async def _configurations(self) -> list[tuple[str, dict[str, Any]]]:
        if not self._configuration:
            return []
        found = []
        for plural in CONFIGURATIONS:
            path = resource_path("admissionregistration.k8s.io", "v1", plural)
            try:
                found.append((plural, await self._kube.get(f"{path}/{self._configuration}")))
            except KubeApiError as exc:
                if not exc.not_found:
                    raise
        return found

    async def _published(self, secret: CertSecret) -> bool | None:
        configurations = await self._configurations()
        if not configurations:
            return None
        want = base64.b64encode(secret.ca_crt).decode()
        return all(
            (hook.get("clientConfig") or {}).get("caBundle") == want
            for _, body in configurations
            for hook in body.get("webhooks") or []
        )

    async def _publish(self, bundle: bytes) -> None:
        value = base64.b64encode(bundle).decode()
        for plural, body in await self._configurations():
            ops: list[dict[str, Any]] = [
                {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": value}
                for i, _ in enumerate(body.get("webhooks") or [])
            ]
            if ops:
                path = resource_path("admissionregistration.k8s.io", "v1", plural)
                await self._kube.json_patch(f"{path}/{self._configuration}", ops)


__all__ = [
    "CertRotator",
    "CertSecret",
    "SecretStore",
    "certificate_from_secret",
    "describe",
    "reload_forever",
    "serving_names",
    "webhook_server",
]
