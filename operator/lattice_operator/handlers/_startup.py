"""Operator start-up and clean-up: kopf settings and clients, for the serving operator
(every replica) and the reconciling one (the leader)."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
from collections.abc import AsyncIterator
from typing import Any, cast

import kopf

from lattice_adapters.instrumented import instrumented
from lattice_adapters.kube import (
    Forbidden,
    KubeApiError,
    KubeClient,
    KubeConfig,
    NotFound,
    resource_path,
)
from lattice_adapters.kube.writer import KubeClusterWriter
from lattice_adapters.kube_events import ReceiptEvents
from lattice_adapters.sprites import SpritesAdapter, load_credentials
from lattice_operator.handlers._context import OperatorContext, context_of
from lattice_operator.handlers._registry import SERVING
from lattice_operator.handlers._writes import create_or_patch
from lattice_operator.handlers.admission_config import webhook_configurations
from lattice_operator.handlers.admission_policy import admission_policies
from lattice_operator.handlers.webhook_cert import CertRotator, webhook_server
from lattice_operator.policy import compile_policy
from lattice_operator.ports.errors import CredentialsMissing

log = logging.getLogger(__name__)


# The serving operator watches Sprites for an index only. kopf removes its finalizer from any
# object for which it has no deletion handler: under the reconciling operator's name it would
# strip the leader's finalizer. Under this name, set on no object, it never writes anything.
SERVING_FINALIZER = "serving.lattice.dev/never-set"


DAEMON_EXIT_WAIT = 0.5
"""How long kopf waits for a daemon told to stop (its object ended or is deleted) to return,
before it polls for the exit instead. A Run's daemon returns right after its last status
write and receipts; kopf's default (ten event-loop cycles) was too short for that, and its
polling PATCHes a `touch-dummy` annotation onto the Run to wake itself: one write more for a
quarter of the Runs. Only that object's event processing waits, for at most this long."""


WITHOUT_DIFFBASE = frozenset({"Run", "Intent"})
"""Kinds with no create, update, resume or field handler: nothing of kopf's reads their
diff-base."""


class DiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf's annotation diff-base, kept only for the kinds whose handlers read it.

    kopf stores each object's last handled spec in an annotation, to tell an update from a
    creation, also for kinds none of whose handlers cares: a Run got that annotation in a
    PATCH of its own after its finalizer (one more write, watch event and admission pass per
    Run), and every watch event of a Run or an Intent was deep-copied to compare. For those
    kinds the essence is empty and never stored: kopf sees no change, ever, which is all
    their handlers (daemons, deletion) need.
    """

    @staticmethod
    def _skipped(body: kopf.Body) -> bool:
        return body.get("kind") in WITHOUT_DIFFBASE and str(body.get("apiVersion", "")).startswith(
            "lattice.dev/"
        )

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        if self._skipped(body):
            return cast(kopf.BodyEssence, {})
        return super().build(body=body, extra_fields=extra_fields)

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        if self._skipped(body):
            return cast(kopf.BodyEssence, {})
        return super().fetch(body=body)

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        if not self._skipped(body):
            super().store(body=body, patch=patch, essence=essence)


def _kopf_settings(
    settings: kopf.OperatorSettings, ctx: OperatorContext, *, serving: bool = False
) -> None:
    ours = ctx.settings
    settings.posting.reporting_component = ours.component
    settings.persistence.finalizer = SERVING_FINALIZER if serving else ours.finalizer
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="lattice.dev")
    settings.persistence.diffbase_storage = DiffBase(
        prefix="lattice.dev", key="last-handled-configuration"
    )
    settings.watching.inactivity_timeout = ours.watch.inactivity_timeout
    settings.networking.enforce_retry_after = True
    # Daemons stop within seconds of a deletion or shutdown, never holding a finalizer forever.
    settings.background.cancellation_polling = 1
    settings.background.instant_exit_timeout = DAEMON_EXIT_WAIT


async def _kube(ctx: OperatorContext) -> KubeClient:
    ctx.kube = KubeClient(KubeConfig.load())
    await ctx.kube.__aenter__()
    return ctx.kube


@kopf.on.startup(registry=SERVING)
async def configure_serving(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """Every replica: the admission webhook server and what its handlers need."""
    ctx = context_of(memo)
    _kopf_settings(settings, ctx, serving=True)
    ctx.identity = await _own_identity(await _kube(ctx))
    server: kopf.WebhookServerProtocol = await webhook_server(ctx)
    if ctx.settings.webhook.managed:
        server = _RegisteringServer(server, ctx, ctx.settings.webhook.managed)
    settings.admission.server = server
    # We register the configurations ourselves (see lattice_operator.handlers.admission_config).
    settings.admission.managed = None


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """The leader (or a standalone operator): clients for the reconcilers."""
    ctx = context_of(memo)
    ours = ctx.settings
    _kopf_settings(settings, ctx)
    if ours.default_policy is not None:
        ctx.default_policy = compile_policy("cluster-default", ours.default_policy)
    kube = await _kube(ctx)
    try:
        ctx.backend = instrumented(
            SpritesAdapter(await _credentials(ctx), timeout=ours.backend.request_timeout)
        )
    except CredentialsMissing as exc:
        # The operator still serves (admission, Intents); Sprites wait for a backend.
        log.error("no Sprites backend configured: %s", exc)
        ctx.backend_problem = f"no Sprites backend: {exc}"
    instance = os.environ.get("POD_NAME") or socket.gethostname()
    ctx.events = ReceiptEvents(
        # A writer of its own: the handlers' writer publishes receipts through this publisher.
        KubeClusterWriter(kube, clock=ctx.clock, instance=instance),
        ctx.clock,
        rate=ours.runs.events_per_second,
        burst=ours.runs.events_burst,
        per_event=ours.runs.receipts_per_event,
        instance=instance,
    )
    ctx.require_writer()  # over the client and the receipt publisher just made


@kopf.on.startup()
async def start_cert_rotation(memo: kopf.Memo, **_: Any) -> None:
    """The leader keeps the certificate Secret and the configurations' caBundle current."""
    ctx = context_of(memo)
    cert = ctx.settings.webhook.certificate
    if not (cert.secret and cert.manage):
        return
    rotator = CertRotator(ctx.require_kube(), ctx.settings.webhook, ctx.clock)
    ctx.background.append(asyncio.create_task(rotator.run_forever(), name="webhook-cert-rotation"))


@kopf.on.cleanup(registry=SERVING)
@kopf.on.cleanup()
async def close(memo: kopf.Memo, **_: Any) -> None:
    ctx = context_of(memo)
    if ctx.intent_workers is not None:
        await ctx.intent_workers.stop_all()  # before the clients they write through close
    for task in ctx.background:
        task.cancel()
    await asyncio.gather(*ctx.background, return_exceptions=True)
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
            await register_webhooks(
                self._ctx.require_kube(), self._name, dict(client_config), self._ctx.identity
            )
            yield client_config


async def register_webhooks(
    kube: KubeClient, name: str, client_config: dict[str, Any], operator: str | None
) -> None:
    """Create or update the admission policies, their bindings and both webhook
    configurations; failing here stops the operator (no unchecked approvals or grants).

    The policies first: a configuration of an older operator may still send the checks they
    took over to its webhooks, and they must be in force before those go."""
    for plural, objects in admission_policies(name, operator).items():
        collection = resource_path("admissionregistration.k8s.io", "v1", plural)
        for body in objects:
            await create_or_patch(kube, collection, body, {"spec": body["spec"]})
        log.info("registered %s %s", plural, ", ".join(o["metadata"]["name"] for o in objects))
    for plural, body in webhook_configurations(name, client_config).items():
        collection = resource_path("admissionregistration.k8s.io", "v1", plural)
        await create_or_patch(kube, collection, body, {"webhooks": body["webhooks"]})
        log.info("registered %s %s", plural, name)


async def _own_identity(kube: KubeClient) -> str | None:
    """Who the API server says we are: only this identity may create Intent-owned Runs (the
    `check-run-owner` policy names it)."""
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
        except (Forbidden, NotFound) as exc:
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
