"""kopf wiring of the real-time stream: every watch event of an Intent, a Run or a Sprite
goes through the change feed into the hub; the stream server starts and stops with kopf."""

from __future__ import annotations

import logging
from typing import Any

import kopf
from aiohttp import web

from lattice_adapters.kube import KubeApiError, KubeClient, resource_path
from lattice_operator.api.v1alpha1.resources import GROUP, INTENTS, RUNS, SPRITES
from lattice_operator.doors import BoundedSite, runner_options
from lattice_operator.handlers._context import context_of
from lattice_operator.handlers._wakeups import wake_for_run
from lattice_operator.stream.access import AccessCache, Identity, ReviewLimits
from lattice_operator.stream.changes import ChangeFeed
from lattice_operator.stream.envelope import Subject
from lattice_operator.stream.hub import EventHub
from lattice_operator.stream.server import build_app

log = logging.getLogger(__name__)


class ApiReviews:
    """TokenReview and SubjectAccessReview through the operator's client."""

    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube

    async def authenticate(self, token: str) -> Identity | None:
        try:
            review = await self._kube.create(
                resource_path("authentication.k8s.io", "v1", "tokenreviews"),
                {
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenReview",
                    "spec": {"token": token},
                },
            )
        except KubeApiError as exc:
            log.warning("TokenReview failed: %s", exc)
            return None
        status = review.get("status") or {}
        user = status.get("user") or {}
        if not status.get("authenticated") or not user.get("username"):
            return None
        extra = tuple(sorted((k, tuple(v)) for k, v in (user.get("extra") or {}).items()))
        return Identity(
            user=str(user["username"]),
            uid=str(user.get("uid") or ""),
            groups=tuple(user.get("groups") or ()),
            extra=extra,
        )

    async def may_get(self, who: Identity, subject: Subject) -> bool:
        attributes: dict[str, Any] = {"verb": "get", "group": GROUP, "resource": subject.resource}
        if subject.namespace:
            attributes["namespace"] = subject.namespace
        if subject.name:
            attributes["name"] = subject.name
        spec: dict[str, Any] = {
            "user": who.user,
            "groups": list(who.groups),
            "resourceAttributes": attributes,
        }
        if who.uid:
            spec["uid"] = who.uid
        if who.extra:
            spec["extra"] = {k: list(v) for k, v in who.extra}
        try:
            review = await self._kube.create(
                resource_path("authorization.k8s.io", "v1", "subjectaccessreviews"),
                {
                    "apiVersion": "authorization.k8s.io/v1",
                    "kind": "SubjectAccessReview",
                    "spec": spec,
                },
            )
        except KubeApiError as exc:
            log.warning("SubjectAccessReview failed: %s", exc)
            return False  # fail closed
        return bool((review.get("status") or {}).get("allowed"))


class StreamWiring:
    """The hub, the feed and the server of one operator process."""

    def __init__(self, hub: EventHub) -> None:
        self.hub = hub
        self.feed = ChangeFeed()
        self.runner: web.AppRunner | None = None


def _wiring(memo: kopf.Memo) -> StreamWiring | None:
    wiring = getattr(memo, "lattice_stream", None)
    return wiring if isinstance(wiring, StreamWiring) else None


@kopf.on.startup()
async def start_stream(memo: kopf.Memo, **_: Any) -> None:
    ctx = context_of(memo)
    ours = ctx.settings.stream
    if not ours.port:
        return
    hub = EventHub(buffer=ours.buffer, queue=ours.subscriber_queue)
    wiring = StreamWiring(hub)
    limits = ReviewLimits(
        per_minute=ours.token_reviews_per_minute,
        burst=ours.token_reviews_burst,
        refused_ttl=ours.refused_token_ttl,
    )
    access = AccessCache(
        ApiReviews(ctx.require_kube()), ctx.clock, ttl=ours.access_ttl, limits=limits
    )
    app = build_app(
        hub, access, ctx.clock, keepalive=ours.keepalive, write_timeout=ours.write_timeout
    )
    wiring.runner = web.AppRunner(
        app, access_log=None, shutdown_timeout=1.0, **runner_options(ours.connections)
    )
    await wiring.runner.setup()
    await BoundedSite(wiring.runner, ours.host, ours.port, ours.connections).start()
    memo.lattice_stream = wiring
    log.info("stream on http://%s:%d/events (live page at /)", ours.host, ours.port)


@kopf.on.cleanup()
async def stop_stream(memo: kopf.Memo, **_: Any) -> None:
    wiring = _wiring(memo)
    if wiring is not None and wiring.runner is not None:
        await wiring.runner.cleanup()


def _publish(memo: kopf.Memo, resource: str, event: dict[str, Any]) -> None:
    wiring = _wiring(memo)
    if wiring is None:
        return
    body = event.get("object") or {}
    now = context_of(memo).clock.now()
    for item in wiring.feed.observe(resource, str(event.get("type") or ""), dict(body), now):
        wiring.hub.publish(item)


# async: kopf runs a plain function in its thread pool, which would cost every watch event
# a thread hop before the object's daemon is spawned, and touch the hub's asyncio queues
# from another thread.
@kopf.on.event(*INTENTS.gvp)
async def intent_changed(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    _publish(memo, INTENTS.plural, dict(event))


@kopf.on.event(*RUNS.gvp)
async def run_changed(
    event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **kwargs: Any
) -> None:
    # Also the Runs' wake-ups: here kopf's indexes have taken the event, deletions included.
    wake_for_run(context_of(memo), str(event.get("type") or ""), body, kwargs.get("run_claims"))
    _publish(memo, RUNS.plural, dict(event))


@kopf.on.event(*SPRITES.gvp)
async def sprite_changed(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    _publish(memo, SPRITES.plural, dict(event))
