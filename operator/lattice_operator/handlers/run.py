"""Run handlers: one daemon per active Run, a finalizer that kills its session."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from collections import Counter
from typing import Any

import kopf

from lattice_adapters.kube import KubeApiError, resource_path
from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.api.v1alpha1 import API_VERSION, TERMINAL_RUN_PHASES, Sprite
from lattice_operator.api.v1alpha1.resources import INTENTS, RUNS
from lattice_operator.handlers._context import OperatorContext, context_of
from lattice_operator.handlers._parsed import indexed_run, parse_run, run_view
from lattice_operator.handlers._writes import deleted_under
from lattice_operator.handlers.environment import ClusterSteps
from lattice_operator.handlers.sprite import IndexedSprites
from lattice_operator.metrics import RUN_OLDEST_ACTIVITY, RUNS_BY_PHASE, reconcile_timer
from lattice_operator.ports import ForgeAccess, Grants
from lattice_operator.ports.errors import AdapterError, NotFound
from lattice_operator.reconcilers.grants import intent_controller
from lattice_operator.reconcilers.run import RunDriver
from lattice_operator.reconcilers.run_retention import Expired, expired_runs
from lattice_operator.reconcilers.sprite_claims import RunClaim

log = logging.getLogger(__name__)


def _active(body: kopf.Body, **_: Any) -> bool:
    return body.get("status", {}).get("phase") not in TERMINAL_RUN_PHASES


@kopf.index(*RUNS.gvp)
async def run_claims(body: kopf.Body, **_: Any) -> dict[tuple[str, str], RunClaim]:
    """Each Run's claim on its Sprite, to let one Run at a time use a Sprite."""
    run = indexed_run(body)
    claim = RunClaim(
        uid=run.metadata.uid or "",
        name=run.metadata.name,
        created=run.metadata.creation_timestamp,
        phase=run.status.phase or "Pending",
        finished=run.status.completion_time,
        ttl=run.spec.ttl_seconds_after_finished,
        from_intent=intent_controller(run) is not None,
    )
    return {(run.metadata.namespace or "", run.spec.sprite_ref.name): claim}


@kopf.on.startup()
async def register_run_metrics(**kwargs: Any) -> None:
    # Counted from the claims at each scrape: an index of its own cost kopf a handler call
    # on every watch event of every Run.
    claims: kopf.Index[tuple[str, str], RunClaim] = kwargs["run_claims"]

    def counts() -> dict[tuple[str, ...], int]:
        return dict(Counter((claim.phase,) for _, entries in claims.items() for claim in entries))

    RUNS_BY_PHASE.bind(counts)


@kopf.on.startup()
async def start_run_retention(memo: kopf.Memo, **kwargs: Any) -> None:
    """One loop deletes finished Runs past their TTL or the per-Sprite history limit."""
    ctx = context_of(memo)
    claims: kopf.Index[tuple[str, str], RunClaim] = kwargs["run_claims"]
    # Stopped by `close`, before the clients it writes through are closed.
    ctx.background.append(asyncio.create_task(_retention(ctx, claims), name="run-retention"))


async def _retention(ctx: OperatorContext, claims: kopf.Index[tuple[str, str], RunClaim]) -> None:
    settings = ctx.settings.runs
    while True:
        await asyncio.sleep(settings.retention_interval)
        expired = expired_runs(
            dict(claims.items()), now=ctx.clock.now(), history_limit=settings.history_limit
        )
        for run in expired:
            try:
                await _delete_expired(ctx, run)
            except Exception as exc:  # the next pass tries again; the loop must not die
                log.warning("run retention: %s/%s: %s", run.namespace, run.name, exc)


async def _delete_expired(ctx: OperatorContext, run: Expired) -> None:
    try:
        # By uid: never a newer Run of the same name.
        if await ctx.require_writer().delete(RUNS.gvp, run.namespace, run.name, uid=run.uid):
            log.info("deleted Run %s/%s: %s", run.namespace, run.name, run.why)
    except KubeApiError as exc:
        log.warning("could not delete Run %s/%s: %s", run.namespace, run.name, exc)


class KubeActions:
    """The ActionServices port: grants from memory, Secrets, Events and Intents through the API."""

    def __init__(
        self, ctx: OperatorContext, grants: kopf.Index[tuple[str, str], tuple[str, Grants]]
    ) -> None:
        self._ctx = ctx
        self._grants = grants

    def grants(self, namespace: str, intent: str) -> Grants | None:
        entries = self._grants.get((namespace, intent))
        return next(iter(entries))[1] if entries else None

    async def secret_value(self, namespace: str, name: str, key: str) -> bytes:
        try:
            secret = await self._ctx.require_kube().get(
                resource_path("", "v1", "secrets", namespace, name)
            )
        except KubeApiError as exc:
            raise LookupError(f"Secret {name}: {exc.reason}") from None
        data = secret.get("data") or {}
        if key not in data:
            raise LookupError(f"Secret {name} has no key {key}")
        return base64.b64decode(data[key])

    async def notify(self, namespace: str, intent: str | None, run: str, message: str) -> None:
        entries = self._grants.get((namespace, intent)) if intent else None
        if entries:
            regarding = ObjectRef(
                API_VERSION, "Intent", namespace, intent or "", next(iter(entries))[0]
            )
        else:
            regarding = ObjectRef(API_VERSION, "Run", namespace, run, "")
        note = f"sprite of Run {run}: {message}"
        await self._ctx.require_writer().post_event(regarding, reason="NotifyUser", note=note)

    async def propose(self, manifest: dict[str, Any]) -> None:
        namespace = manifest["metadata"]["namespace"]
        await self._ctx.require_writer().create(INTENTS.gvp, namespace, manifest)

    def forge(self) -> ForgeAccess | None:
        return self._ctx.forge


class KubeRunStatus:
    """The RunStatusWriter port: merge-patches the status subresource."""

    def __init__(self, ctx: OperatorContext) -> None:
        self._ctx = ctx

    async def write_run_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        await self._ctx.require_writer().patch_status(RUNS.gvp, namespace, name, status)


# When a Run ends, kopf stops its daemon: the stop flag first, then (after the backoff) a
# cancellation; the backoff lets the driver post the last receipts it just persisted.
@kopf.daemon(*RUNS.gvp, when=_active, cancellation_backoff=5.0, cancellation_timeout=30.0)
async def run_daemon(
    body: kopf.Body,
    memo: kopf.Memo,
    stopped: kopf.DaemonStopped,
    **kwargs: Any,
) -> None:
    """One pass: from the daemon's start to the Run's end (or the daemon being stopped).

    The pass is one `kind="Run"` reconcile in the metrics. Whatever ends it, the Run's
    Event rate-limit state is forgotten: the driver's final flush has written the dropped count
    into the status, which a later daemon for the same Run starts from.
    """
    ctx = context_of(memo)
    try:
        with reconcile_timer("Run", blocked=(kopf.PermanentError,)):
            await _drive_run(ctx, body, stopped, kwargs)
    except Exception as exc:
        namespace, name = body.metadata.namespace, body.metadata.name
        gone = await deleted_under(
            ctx.require_writer(), exc, RUNS.gvp, namespace or "", name or "", body.metadata.uid
        )
        if gone:
            log.info("Run %s/%s is gone; its daemon ends", namespace, name)
            return
        raise
    finally:
        RUN_OLDEST_ACTIVITY.forget(str(body.metadata.uid or ""))
        if ctx.events is not None:
            ctx.events.forget(str(body.metadata.uid or ""))


async def _drive_run(
    ctx: OperatorContext, body: kopf.Body, stopped: kopf.DaemonStopped, kwargs: dict[str, Any]
) -> None:
    sprite_directory: kopf.Index[tuple[str, str], Sprite] = kwargs["sprite_directory"]
    claims: kopf.Index[tuple[str, str], RunClaim] = kwargs["run_claims"]
    grants: kopf.Index[tuple[str, str], tuple[str, Grants]] = kwargs["intent_grants"]
    cluster: kopf.Index[str, ClusterSteps] | None = kwargs.get("cluster_environment")
    run = parse_run(body)
    stop = asyncio.Event()
    waiting_key = (run.metadata.namespace or "", run.spec.sprite_ref.name)
    uid = run.metadata.uid or ""
    sprite_changed = ctx.sprite_waiters.add(waiting_key, uid)

    async def watch_stop() -> None:
        await stopped.wait()
        stop.set()

    watcher = asyncio.create_task(watch_stop(), name=f"stop-{run.metadata.name}")
    try:
        driver = RunDriver(
            run,
            view=run_view(body),
            backend=ctx.require_backend(),
            sprites=IndexedSprites(sprite_directory, claims, cluster),
            writer=KubeRunStatus(ctx),
            publisher=ctx.require_events(),
            clock=ctx.clock,
            timings=ctx.settings.runs,
            stopped=stop,
            actions=KubeActions(ctx, grants),
            sprite_changed=sprite_changed,
        )
        await driver.drive()
    finally:
        ctx.sprite_waiters.remove(waiting_key, uid)
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


@kopf.on.delete(*RUNS.gvp)
async def run_delete(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """Kill the Run's session so that nothing keeps running for a deleted Run."""
    ctx = context_of(memo)
    with reconcile_timer("Run", blocked=(kopf.PermanentError,)):
        run = parse_run(body)
        if run.is_done() or not run.status.session_id or not run.status.sprite_name:
            return
        try:
            await ctx.require_backend().kill_session(
                run.status.sprite_name, run.status.session_id, grace=5.0
            )
        except NotFound:
            return
        except AdapterError as exc:
            raise kopf.TemporaryError(f"could not kill session: {exc}", delay=5) from exc
