"""The GitHub webhook receiver: POST /github/<namespace>/<name>, one URL per
GitHubRepository, so the secret is known before the body is looked at.

In order: the size (a Content-Length over the limit: 413 at once; otherwise the whole body is
read, at most limit + 1 bytes, within `body_timeout`: 413, 408), the repository (404), its
secret (503 while unreadable), X-Hub-Signature-256 in constant time (400 when not ASCII, 401
when it does not match: nothing done), the event (not one we map: 202, counted), the payload
(`forge.events`: a part of the wrong type is a 400 naming it), then what the delivery means
(`forge.webhooks`) carried out: an Intent created (a redelivery finds the one it made: its
name is derived from what it is about), a decision relayed to the admission webhook under the
mapped Kubernetes identity (recorded once per place, `Outcome.ref`, taken from the signed
payload), or a waiting triage resumed with the answer (once per comment). A refused command
is answered on the issue, once. Nothing is keyed on X-GitHub-Delivery: the signature does not
cover it. The server (`serve`) bounds connections, the time to send a request's head and the
time a connection may sit idle.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import StreamReader, web

from lattice_adapters.kube import (
    BadRequest,
    Conflict,
    Forbidden,
    Invalid,
    KubeApiError,
    KubeClient,
    NotFound,
    resource_path,
)
from lattice_adapters.kube.writer import KubeClusterWriter
from lattice_operator.api.v1alpha1.githubrepository import GitHubIdentity, GitHubRepository
from lattice_operator.api.v1alpha1.resources import INTENTS
from lattice_operator.clock import Clock
from lattice_operator.doors import BoundedSite, runner_options
from lattice_operator.forge.events import BadDelivery, parse_delivery
from lattice_operator.forge.webhooks import (
    HANDLED_EVENTS,
    SIGNATURE_HEADER,
    Outcome,
    route,
    verify_signature,
)
from lattice_operator.metrics import WEBHOOK_DELIVERIES, WEBHOOK_SECONDS
from lattice_operator.ports.cluster import ClusterWriter
from lattice_operator.ports.errors import AdapterError
from lattice_operator.ports.forge import Forge
from lattice_operator.reconcilers.approvals import REQUEST, parse_records
from lattice_operator.settings import ConnectionLimits, ForgeSettings

log = logging.getLogger(__name__)

RECENT_DELIVERIES = 10_000
"""Deliveries remembered in memory (by the digest of their signed body): the fast path. The
durable record is in the cluster (the Intents' names, the approval records, the resume
inputs), which survives restarts."""
SECRET_TTL = 60.0
LINGER = 2.0
"""Seconds the rest of a refused body is read and dropped (so the client sees the answer)
before the connection is closed."""
_DELIVERY_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


@dataclass(frozen=True)
class Answer:
    status: int
    outcome: str
    detail: str = ""


class SecretCache:
    """Webhook secrets read from Secrets, kept `SECRET_TTL` seconds."""

    def __init__(self, kube: KubeClient, clock: Clock) -> None:
        self._kube = kube
        self._clock = clock
        self._values: dict[tuple[str, str, str], tuple[float, bytes]] = {}

    async def get(self, namespace: str, name: str, key: str) -> bytes | None:
        now = self._clock.monotonic()
        hit = self._values.get((namespace, name, key))
        if hit is not None and hit[0] > now:
            return hit[1]
        try:
            secret = await self._kube.get(resource_path("", "v1", "secrets", namespace, name))
        except KubeApiError as exc:
            log.warning("webhook secret %s/%s: %s", namespace, name, exc.reason)
            return None
        raw = (secret.get("data") or {}).get(key)
        if raw is None:
            return None
        value = base64.b64decode(raw)
        self._values[(namespace, name, key)] = (now + SECRET_TTL, value)
        return value


class WebhookReceiver:
    def __init__(
        self,
        *,
        kube: KubeClient,
        clock: Clock,
        repositories: Callable[[str, str], GitHubRepository | None],
        forge: Callable[[], Forge | None],
        max_bytes: int,
        body_timeout: float = 15.0,
        writer: ClusterWriter | None = None,
    ) -> None:
        # The Intents it creates and annotates through the cluster writer port; the client
        # itself only reads the webhook Secrets.
        self._writer: ClusterWriter = writer or KubeClusterWriter(kube)
        self._clock = clock
        self._repositories = repositories
        self._forge = forge
        self._max = max_bytes
        self._body_timeout = body_timeout
        self._secrets = SecretCache(kube, clock)
        self._recent: OrderedDict[str, str] = OrderedDict()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self._max)
        app.router.add_post("/github/{namespace}/{name}", self.handle)
        app.router.add_get("/healthz", self._healthz)
        return app

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"remembered": len(self._recent)})

    async def handle(self, request: web.Request) -> web.Response:
        started = time.monotonic()
        event = request.headers.get("X-GitHub-Event", "")
        label = event if event in HANDLED_EVENTS else "other"
        answer = await self._handle(request, event)
        WEBHOOK_DELIVERIES.labels(event=label, outcome=answer.outcome).inc()
        WEBHOOK_SECONDS.observe(time.monotonic() - started)
        return web.json_response(
            {"outcome": answer.outcome, "detail": answer.detail}, status=answer.status
        )

    async def _handle(self, request: web.Request, event: str) -> Answer:
        too_large = Answer(413, "too_large", f"over {self._max} bytes")
        if request.content_length is not None and request.content_length > self._max:
            return too_large
        try:
            async with asyncio.timeout(self._body_timeout):
                body = await _read_body(request.content, self._max)
        except TimeoutError:
            return Answer(408, "slow_body", f"the body took over {self._body_timeout:g} s")
        except web.RequestPayloadError as exc:
            return Answer(400, "bad_body", f"the body: {exc}"[:300])
        if body is None:
            return too_large
        signature = request.headers.get(SIGNATURE_HEADER)
        if signature is not None and not signature.isascii():
            return Answer(400, "bad_header", f"{SIGNATURE_HEADER}: not ASCII")
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        repository = self._repositories(namespace, name)
        if repository is None:
            return Answer(404, "no_repository", f"no GitHubRepository {namespace}/{name}")
        ref = repository.spec.webhook_secret_ref
        secret = await self._secrets.get(namespace, ref.name, ref.key)
        if secret is None:
            return Answer(503, "no_secret", f"Secret {ref.name} key {ref.key} is not readable")
        if not verify_signature(secret, body, signature):
            return Answer(401, "bad_signature", "X-Hub-Signature-256 does not match")
        if event not in HANDLED_EVENTS:
            return Answer(202, "unknown_event", f"{event[:64] or 'no event'} is not mapped")
        # The signed bytes, not X-GitHub-Delivery (anyone may set it): a replay under a new
        # id is still a repeat, and a forged id cannot pass a new delivery off as one.
        key = hashlib.sha256(f"{namespace}/{name}\n".encode() + body).hexdigest()
        if key in self._recent:
            return Answer(200, "duplicate", self._recent[key])
        delivery = request.headers.get("X-GitHub-Delivery", "")
        delivery = delivery if _DELIVERY_ID.fullmatch(delivery) else ""
        try:
            outcome = route(event, delivery, parse_delivery(body), repository)
        except BadDelivery as exc:
            return Answer(400, "bad_payload", str(exc))
        try:
            answer = await self._carry_out(repository, outcome)
        except KubeApiError as exc:
            log.warning("webhook %s/%s: the API server: %s", namespace, name, exc)
            return Answer(503, "kube_error", f"the API server: {exc.reason}"[:300])
        if answer.status < 500:
            self._recent[key] = answer.outcome
            while len(self._recent) > RECENT_DELIVERIES:
                self._recent.popitem(last=False)
        return answer

    async def _carry_out(self, repository: GitHubRepository, outcome: Outcome) -> Answer:
        namespace = repository.metadata.namespace or ""
        if outcome.kind == "ignore":
            return Answer(200, "ignored", outcome.reason)
        if outcome.kind == "create":
            try:
                created = await self._writer.create(INTENTS.gvp, namespace, outcome.manifest)
            except KubeApiError as exc:
                return Answer(503 if exc.status >= 500 else 422, "refused", exc.message[:300])
            name = outcome.manifest["metadata"]["name"]
            return Answer(201 if created else 200, "created" if created else "exists", name)
        if outcome.kind == "decide":
            return await self._decide(repository, outcome)
        return await self._answer(repository, outcome)

    async def _intent(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self._writer.read(INTENTS.gvp, namespace, name)
        except NotFound:
            return None

    async def _decide(self, repository: GitHubRepository, outcome: Outcome) -> Answer:
        namespace = repository.metadata.namespace or ""
        identity = _mapped(repository, outcome.login)
        if identity is None:
            await self._reply(
                repository,
                outcome,
                f"@{outcome.login}: your `{outcome.decision}` was not recorded: your GitHub "
                "account is not mapped to a Kubernetes identity allowed to approve "
                f"(GitHubRepository {namespace}/{repository.metadata.name}, "
                "spec.approval.approvers).",
            )
            return Answer(200, "refused", f"{outcome.login} is not mapped")
        intent = await self._intent(namespace, outcome.intent)
        if intent is None:
            await self._reply(
                repository, outcome, f"@{outcome.login}: there is no plan awaiting approval here."
            )
            return Answer(200, "ignored", f"no Intent {outcome.intent}")
        records = parse_records((intent.get("metadata") or {}).get("annotations"))
        if any(r.forge_ref == outcome.ref for r in records):
            return Answer(200, "duplicate", outcome.intent)  # a replay: recorded already
        request = {
            "decision": outcome.decision,
            "reason": f"on GitHub by @{outcome.login}"
            + (f": {outcome.text}" if outcome.text else ""),
            "forgeUser": outcome.login,
            "user": identity.user,
            "groups": identity.groups,
            "forgeRef": outcome.ref,
        }
        patch = {"metadata": {"annotations": {REQUEST: json.dumps(request)[:4096]}}}
        try:
            await self._writer.patch(INTENTS.gvp, namespace, outcome.intent, patch)
        except (BadRequest, Forbidden, Conflict, Invalid) as exc:
            await self._reply(
                repository, outcome, f"@{outcome.login}: not recorded: {exc.message[:500]}"
            )
            return Answer(200, "refused", exc.message[:300])
        return Answer(
            200, "approved" if outcome.decision == "approve" else "rejected", outcome.intent
        )

    async def _answer(self, repository: GitHubRepository, outcome: Outcome) -> Answer:
        """A comment on an issue whose triage waits: the Run is resumed with it."""
        namespace = repository.metadata.namespace or ""
        intent = await self._intent(namespace, outcome.intent)
        status = (intent or {}).get("status") or {}
        waiting = status.get("waiting")
        if intent is None or status.get("phase") != "Waiting" or not waiting:
            return Answer(200, "ignored", "no triage waits for an answer here")
        current = ((intent.get("spec") or {}).get("resume") or {}).get("inputs") or {}
        if current.get("commentId") == outcome.ref:
            return Answer(200, "duplicate", outcome.intent)
        expected = waiting.get("expectedInputs") or {}
        offered = {"answer": outcome.text, "author": outcome.login, "commentId": outcome.ref}
        inputs = {k: v for k, v in offered.items() if k in expected}
        resume = {"checkpointId": waiting["checkpointId"], "inputs": inputs}
        resumed = {"spec": {"resume": resume}}
        await self._writer.patch(INTENTS.gvp, namespace, outcome.intent, resumed)
        return Answer(200, "resumed", outcome.intent)

    async def _reply(self, repository: GitHubRepository, outcome: Outcome, text: str) -> None:
        forge = self._forge()
        if forge is None or not outcome.issue:
            return
        try:
            await forge.create_comment(
                repository.spec.repo, outcome.issue, text, key=f"reply:{outcome.ref}"[:200]
            )
        except AdapterError as exc:
            log.warning("could not answer on %s#%s: %s", repository.spec.repo, outcome.issue, exc)


async def _read_body(content: StreamReader, limit: int) -> bytes | None:
    """The whole body, however it is split across writes; None once it is over `limit`
    (never more than limit + 1 bytes read)."""
    parts: list[bytes] = []
    size = 0
    while chunk := await content.read(limit + 1 - size):
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            return None
    return b"".join(parts)


async def serve(receiver: WebhookReceiver, settings: ForgeSettings) -> web.AppRunner:
    """The receiver on `settings.webhook_host:webhook_port`, with its limits: a request head
    must arrive within `webhook_idle_timeout` of the connection opening or of the previous
    answer, and one connection over `webhook_max_connections` is answered 503."""
    idle = settings.webhook_idle_timeout
    limits = ConnectionLimits(
        header_timeout=idle, idle_timeout=idle, max_connections=settings.webhook_max_connections
    )
    runner = web.AppRunner(
        receiver.app(),
        access_log=None,
        shutdown_timeout=1.0,
        lingering_time=LINGER,
        **runner_options(limits),
    )
    await runner.setup()
    busy = WEBHOOK_DELIVERIES.labels(event="other", outcome="busy").inc
    await BoundedSite(
        runner, settings.webhook_host, settings.webhook_port, limits, on_busy=busy
    ).start()
    return runner


def _mapped(repository: GitHubRepository, login: str) -> GitHubIdentity | None:
    for identity in repository.spec.approval.approvers:
        if identity.github.lower() == login.lower():
            return identity
    return None


__all__ = ["SecretCache", "WebhookReceiver", "serve"]
