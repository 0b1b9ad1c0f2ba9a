"""Operator start-up and clean-up: kopf settings, clients, the peering object, /metrics."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import kopf
from prometheus_client import start_http_server

from lattice_adapters import tls
from lattice_adapters.instrumented import instrumented
from lattice_adapters.kube import KubeApiError, KubeClient, KubeConfig, resource_path
from lattice_adapters.kube_events import ReceiptEvents
from lattice_adapters.sprites import SpritesAdapter, load_credentials
from lattice_operator.handlers._context import OperatorContext, context_of
from lattice_operator.handlers._writes import create_or_exists, create_or_patch
from lattice_operator.handlers.admission_config import webhook_configurations
from lattice_operator.metrics import REGISTRY
from lattice_operator.policy import compile_policy
from lattice_operator.ports.errors import CredentialsMissing
from lattice_operator.settings import WebhookSettings

log = logging.getLogger(__name__)


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    ctx = context_of(memo)
    ours = ctx.settings
    settings.posting.reporting_component = ours.component
    settings.persistence.finalizer = ours.finalizer
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="lattice.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="lattice.dev", key="last-handled-configuration"
    )
    settings.watching.inactivity_timeout = ours.watch.inactivity_timeout
    settings.networking.enforce_retry_after = True
    # Daemons stop within seconds of a deletion or shutdown, never holding a finalizer forever.
    settings.background.cancellation_polling = 1

    if ours.default_policy is not None:
        ctx.default_policy = compile_policy("cluster-default", ours.default_policy)
    server: kopf.WebhookServerProtocol = _webhook_server(ours.webhook, ctx.scratch)
    if ours.webhook.managed:
        server = _RegisteringServer(server, ctx, ours.webhook.managed)
    settings.admission.server = server
    # We register the configurations ourselves (see lattice_operator.handlers.admission_config).
    settings.admission.managed = None

    ctx.kube = KubeClient(KubeConfig.load())
    await ctx.kube.__aenter__()
    ctx.identity = await _own_identity(ctx.kube)
    try:
        ctx.backend = instrumented(SpritesAdapter(await _credentials(ctx)))
    except CredentialsMissing as exc:
        # The operator still serves (admission, Intents); Sprites wait for a backend.
        log.error("no Sprites backend configured: %s", exc)
        ctx.backend_problem = f"no Sprites backend: {exc}"
    instance = os.environ.get("POD_NAME") or socket.gethostname()
    ctx.events = ReceiptEvents(
        ctx.kube,
        ctx.clock,
        rate=ours.runs.events_per_second,
        burst=ours.runs.events_burst,
        instance=instance,
    )
    if ours.metrics_port:
        start_http_server(ours.metrics_port, addr=ours.metrics_host, registry=REGISTRY)
        log.info("metrics on http://%s:%d/metrics", ours.metrics_host, ours.metrics_port)
    if not ours.peering.standalone:
        await _ensure_peering(ctx.kube, ours.peering.name, ours.namespaces)


@kopf.on.cleanup()
async def close(memo: kopf.Memo, **_: Any) -> None:
    ctx = context_of(memo)
    if ctx.backend is not None:
        await ctx.backend.aclose()
    if ctx.kube is not None:
        await ctx.kube.close()
    # A private key never outlives the process that made it (a crash leaves it to TMPDIR).
    for directory in ctx.scratch:
        shutil.rmtree(directory, ignore_errors=True)


class _RegisteringServer:
    """kopf's webhook server that registers our webhook configurations once its address is
    known (and again if it changes). They are left in place on shutdown: fail closed."""

    def __init__(self, inner: kopf.WebhookServerProtocol, ctx: OperatorContext, name: str) -> None:
        self._inner, self._ctx, self._name = inner, ctx, name

    async def __call__(self, fn: kopf.WebhookFn) -> AsyncIterator[kopf.WebhookClientConfig]:
        async for client_config in self._inner(fn):
            await register_webhooks(self._ctx.require_kube(), self._name, dict(client_config))
            yield client_config


async def register_webhooks(kube: KubeClient, name: str, client_config: dict[str, Any]) -> None:
    """Create or update both configurations; failing here stops the operator (no unchecked
    approvals)."""
    for plural, body in webhook_configurations(name, client_config).items():
        collection = resource_path("admissionregistration.k8s.io", "v1", plural)
        await create_or_patch(kube, collection, body, {"webhooks": body["webhooks"]})
        log.info("registered %s %s", plural, name)


async def _own_identity(kube: KubeClient) -> str | None:
    """Who the API server says we are: only this identity may create Intent-owned Runs."""
    try:
        review = await kube.create(
            resource_path("authentication.k8s.io", "v1", "selfsubjectreviews"),
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
    except KubeApiError as exc:
        log.error("cannot learn the operator's own identity (SelfSubjectReview): %s", exc)
        return None
    name = ((review.get("status") or {}).get("userInfo") or {}).get("username")
    log.info("the API server knows this operator as %s", name)
    return str(name) if name else None


def _webhook_server(webhook: WebhookSettings, scratch: list[Path]) -> kopf.WebhookServer:
    """kopf's webhook server, with the given certificate or a throwaway self-signed one (its
    directory goes into `scratch`, removed when the operator stops)."""
    url_host = webhook.url_host or webhook.host
    port = webhook.port or None
    if webhook.cert_file and webhook.key_file:
        return kopf.WebhookServer(
            addr=webhook.host,
            port=port,
            host=url_host,
            certfile=webhook.cert_file,
            pkeyfile=webhook.key_file,
            cafile=webhook.ca_file,
        )
    directory = Path(tempfile.mkdtemp(prefix="lattice-webhook-"))
    scratch.append(directory)
    ca, ca_key, ca_cert = tls.make_ca("lattice-webhook-ca")
    cert_path, key_path = tls.serving_cert(ca_key, ca_cert, (url_host,)).write(directory, "tls")
    return kopf.WebhookServer(
        addr=webhook.host,
        port=port,
        host=url_host,
        certfile=str(cert_path),
        pkeyfile=str(key_path),
        cadata=ca.cert_pem,
    )


async def _credentials(ctx: OperatorContext) -> Any:
    """The default backend's credentials: the configured Secret, else the environment."""
    backend = ctx.settings.backend
    secret_data = None
    if backend.token_secret:
        namespace, _, name = backend.token_secret.partition("/")
        try:
            secret = await ctx.require_kube().get(
                resource_path("", "v1", "secrets", namespace, name)
            )
        except KubeApiError as exc:
            if exc.status not in (403, 404):
                raise
            # Start without a backend (Sprites say so) rather than crash-loop on start-up.
            raise CredentialsMissing(
                f"the token Secret {backend.token_secret} cannot be read ({exc.reason}): "
                "create it (key `token`) and restart the operator"
            ) from None
        secret_data = secret.get("data") or {}
    environ = dict(os.environ)
    if backend.api_url:
        environ["SPRITES_API_URL"] = backend.api_url
    credentials = load_credentials(secret_data, environ=environ)
    if backend.api_url and secret_data is not None:
        credentials = credentials.model_copy(update={"api_url": backend.api_url.rstrip("/")})
    return credentials


async def _ensure_peering(kube: KubeClient, name: str, namespaces: tuple[str, ...]) -> None:
    """kopf needs the peering object to exist before replicas can agree who is active."""
    kind, plural = ("ClusterKopfPeering", "clusterkopfpeerings")
    if namespaces:
        kind, plural = ("KopfPeering", "kopfpeerings")
    targets: list[str | None] = list(namespaces) if namespaces else [None]
    for ns in targets:
        if ns is not None and any(ch in ns for ch in "*?["):
            log.warning("peering for namespace glob %r must be created by hand", ns)
            continue
        body = {
            "apiVersion": "kopf.dev/v1",
            "kind": kind,
            "metadata": {"name": name, **({"namespace": ns} if ns else {})},
        }
        if await create_or_exists(kube, resource_path("kopf.dev", "v1", plural, ns), body):
            log.info("created %s %s", kind, name)
