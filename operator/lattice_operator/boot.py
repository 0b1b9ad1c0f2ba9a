"""Boot kopf with our settings and handlers: two kopf operators, one of them leader-elected.

Every replica serves the admission webhooks and the health endpoint (the *serving* operator,
registry `handlers._registry.SERVING`), so a standby is Ready and the webhook Service may
send requests to any replica. Only the replica that holds the leader Lease runs the
*reconciling* operator (kopf's default registry: every resource handler, daemon, timer and
background loop). Each operator runs in a thread of its own with its own event loop, so
neither's start-up, shutdown or clean-up of left-over tasks can touch the other's.
docs/controllers.md ("One active replica") says why it is done this way.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import threading
from collections.abc import Awaitable
from typing import Any

from lattice_operator.errors import ConfigurationError
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.settings import OperatorSettings

log = logging.getLogger(__name__)

LOST_LEASE_EXIT = 3
"""Exit status after losing the Lease: the process stops at once, and Kubernetes restarts it
as a standby (controller-runtime exits likewise)."""
STOP_TIMEOUT = 60.0
"""Seconds an operator thread may take to stop before the process exits regardless."""


def preflight(settings: OperatorSettings) -> None:
    """Refuse a configuration that can never work, before kopf starts.

    kopf retries a failing start-up forever; a Pod that neither runs nor exits hides the
    reason, while an exit with it is a crash loop whose log line says what to fix."""
    from lattice_adapters.kube import KubeConfig, KubeConfigError
    from lattice_operator.policy.classify import compile_policy
    from lattice_operator.policy.rules import PolicyInvalid

    if settings.default_policy is not None:
        try:
            compile_policy("cluster-default", settings.default_policy)
        except PolicyInvalid as exc:
            raise ConfigurationError(f"default_policy does not compile: {exc}") from exc
    try:
        KubeConfig.load()
    except KubeConfigError as exc:
        raise ConfigurationError(f"no Kubernetes credentials: {exc}") from exc


class KopfThread:
    """One kopf operator in a thread of its own; stopped from the main thread."""

    def __init__(
        self, name: str, settings: OperatorSettings, registry: Any, liveness: str | None
    ) -> None:
        self.name = name
        self._settings, self._registry, self._liveness = settings, registry, liveness
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self.ready = threading.Event()
        """Set once kopf has run the start-up handlers (kopf's ready flag)."""
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name=f"kopf-{name}", daemon=True)
        self._done: asyncio.Future[None] | None = None

    def start(self) -> None:
        self._owner = asyncio.get_running_loop()
        self._done = self._owner.create_future()
        self._thread.start()

    def _mark_done(self) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    def _main(self) -> None:
        try:
            asyncio.run(self._operate())
        except BaseException as exc:  # reported to the supervisor, which exits non-zero
            self.error = exc
            log.exception("the %s operator failed", self.name)
        finally:
            self._owner.call_soon_threadsafe(self._mark_done)

    async def _operate(self) -> None:
        import kopf

        from lattice_operator.handlers._memories import ResourceMemories, keep_lean

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._started.set()
        memo = kopf.Memo()
        memo.lattice = OperatorContext(settings=self._settings)
        settings = self._settings
        # kopf's per-object memories, ours to keep small: finished objects' bodies released.
        memories = ResourceMemories()
        lean = asyncio.create_task(keep_lean(memories), name="release-idle-bodies")
        try:
            await kopf.operator(
                registry=self._registry,
                clusterwide=not settings.namespaces,
                namespaces=settings.namespaces,
                standalone=True,  # one reconciling replica is the Lease's job, not kopf peering's
                liveness_endpoint=self._liveness,
                memo=memo,
                memories=memories,
                stop_flag=self._stop,
                ready_flag=self.ready,
            )
        finally:
            lean.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await lean

    def stop(self) -> None:
        if self._done is None:
            return  # never started
        if not self._started.wait(timeout=10) or self._loop is None or self._stop is None:
            return
        stop = self._stop
        with contextlib.suppress(RuntimeError):  # its loop has already closed
            self._loop.call_soon_threadsafe(stop.set)

    async def wait_ready(self) -> None:
        while not self.ready.is_set():  # noqa: ASYNC110 - a flag set from another thread
            await asyncio.sleep(0.05)

    async def finished(self) -> None:
        assert self._done is not None, "not started"
        await asyncio.shield(self._done)

    async def join(self) -> bool:
        if self._done is None:
            return True
        try:
            await asyncio.wait_for(self.finished(), STOP_TIMEOUT)
        except TimeoutError:
            log.error("the %s operator did not stop within %.0f s", self.name, STOP_TIMEOUT)
            return False
        return True


async def _first(**waits: Awaitable[Any]) -> str:
    """Wait for the first of several things; cancel the rest; return its name."""
    tasks = {asyncio.ensure_future(w): name for name, w in waits.items()}
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    first = next(iter(done))
    first.result()  # re-raise what failed
    return tasks[first]


def _hard_exit(code: int) -> None:
    """Leave now, without clean-up: another replica may already be reconciling."""
    logging.shutdown()
    os._exit(code)


async def supervise(settings: OperatorSettings, serving_registry: Any) -> int:
    """Run until a signal (exit 0), a failed operator (exit 1) or a lost Lease (exit 3)."""
    import kopf

    from lattice_adapters.kube import KubeClient, KubeConfig
    from lattice_operator.clock import SystemClock
    from lattice_operator.handlers.leader_election import Elector, PodLabeler
    from lattice_operator.metrics import LEADER

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    liveness = (
        f"http://{settings.probe.host}:{settings.probe.port}/healthz"
        if settings.probe.port
        else None
    )
    serving = KopfThread("serving", settings, serving_registry, liveness)
    reconciling = KopfThread("reconciling", settings, kopf.get_default_registry(), None)

    async def stop_all(elector: Elector | None, why: str, labeler: PodLabeler | None = None) -> int:
        reconciling.stop()
        stopped = await reconciling.join()
        if labeler is not None:
            await labeler.step_down()  # before the Lease: no Service sends to a standby
        if elector is not None and stopped:
            await elector.release()  # the standby takes over at once
        LEADER.set(0)
        serving.stop()
        await serving.join()
        if why != "signal":
            log.error("the %s operator stopped on its own: exiting", why)
        return 0 if why == "signal" and stopped else 1

    if not settings.leader_election.enabled:
        LEADER.set(1)
        # Alone, the process is live (its health endpoint answers) once everything started.
        reconciling.start()
        what = await _first(
            signal=stopping.wait(),
            reconciling=reconciling.finished(),
            ready=reconciling.wait_ready(),
        )
        if what == "ready":
            serving.start()
            what = await _first(
                signal=stopping.wait(),
                serving=serving.finished(),
                reconciling=reconciling.finished(),
            )
        return await stop_all(None, what)

    serving.start()

    async with KubeClient(KubeConfig.load()) as kube:
        elector = Elector.for_settings(kube, settings.leader_election, SystemClock())
        labeler = PodLabeler.for_settings(kube, settings.leader_election)
        if labeler is not None:
            await labeler.step_down()  # a restarted container's Pod may still carry it
        what = await _first(
            signal=stopping.wait(), serving=serving.finished(), lease=elector.acquire()
        )
        if what != "lease":
            return await stop_all(None, what)
        reconciling.start()
        waits: dict[str, Awaitable[Any]] = {
            "signal": stopping.wait(),
            "serving": serving.finished(),
            "reconciling": reconciling.finished(),
            "lost": elector.keep(),
        }
        if labeler is not None:
            # The stream and the GitHub webhooks run in the reconciling operator only; their
            # Services select the labelled Pod, once it serves them.
            async def label_when_ready(labeler: PodLabeler) -> None:
                await reconciling.wait_ready()
                await labeler.keep(settings.leader_election.retry_period)

            waits["labels"] = label_when_ready(labeler)
        what = await _first(**waits)
        if what == "lost":
            log.error("stopping at once: this replica is no longer the leader")
            _hard_exit(LOST_LEASE_EXIT)
        return await stop_all(elector, what, labeler)


TLS_READ_BUFFER = 64 * 1024
"""Bytes each TLS connection reads at once: asyncio allocates this per connection, up front,
for as long as it is open (256 KiB by default). The operator keeps ~200 API connections open
after a burst (kopf's two pools and its watches, our client's pool, the Sprites server's
sessions): 50 MB of buffers. TLS records are at most 16 KiB, so a 64 KiB read still takes
several whole records per call."""


def lean_tls_reads(size: int = TLS_READ_BUFFER) -> None:
    """Every TLS connection opened from now on reads `size` bytes at a time."""
    from asyncio import sslproto

    # A class attribute of the stdlib's SSL protocol (Python 3.11+: SSLProtocol.max_size,
    # the size of its read buffer); where it is absent there is nothing to lower.
    if hasattr(sslproto.SSLProtocol, "max_size"):
        sslproto.SSLProtocol.max_size = size


def run_operator(settings: OperatorSettings, *, verbose: bool = False) -> int:
    """Run the operator until it is told to stop (SIGINT/SIGTERM); the exit status."""
    preflight(settings)
    import lattice_operator.handlers  # noqa: F401 - registers the handlers
    from lattice_operator.handlers._registry import SERVING
    from lattice_operator.metrics import LEADER, REGISTRY

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s",
    )
    # One line per backend request is noise at INFO; failures are logged by the adapter.
    logging.getLogger("httpx").setLevel(logging.DEBUG if verbose else logging.WARNING)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    # kopf logs a line per handler call about each object ("Handler 'run_changed'
    # succeeded.", three per watch event for the stream feed alone): ~5 % of the operator's
    # CPU in a profile of sequential Intents. Its warnings and failures are still logged;
    # --verbose shows the rest.
    logging.getLogger("kopf.objects").setLevel(logging.DEBUG if verbose else logging.WARNING)
    # Each kopf operator warns that it ignores signals in its thread: supervise() handles them.
    logging.getLogger("kopf._core.reactor.running").addFilter(
        lambda record: "OS signals are ignored" not in record.getMessage()
    )
    # Event ingestion allocates many short-lived objects: collecting the young generation
    # every 700 allocations cost a third of the engine's time (bench_protocol). Freeze what
    # start-up loaded and collect less often.
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    lean_tls_reads()
    LEADER.set(0)
    return asyncio.run(_serve(settings, SERVING, REGISTRY))


async def _serve(settings: OperatorSettings, serving_registry: Any, metrics: Any) -> int:
    """supervise(), with /metrics served from this loop while it runs (a few sockets and
    no thread per connection: doors)."""
    from lattice_operator.doors import serve_metrics

    runner = None
    if settings.metrics_port:
        host, port = settings.metrics_host, settings.metrics_port
        runner = await serve_metrics(metrics, host, port, settings.metrics_connections)
        log.info("metrics on http://%s:%d/metrics", host, port)
    try:
        return await supervise(settings, serving_registry)
    finally:
        if runner is not None:
            await runner.cleanup()
