"""Boot kopf with our settings and handlers."""

from __future__ import annotations

import gc
import logging

from lattice_operator.handlers._context import OperatorContext
from lattice_operator.settings import OperatorSettings


def run_operator(settings: OperatorSettings, *, verbose: bool = False) -> None:
    """Run the operator until it is told to stop (SIGINT/SIGTERM)."""
    import kopf

    import lattice_operator.handlers  # noqa: F401 - registers the handlers

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # One line per backend request is noise at INFO; failures are logged by the adapter.
    logging.getLogger("httpx").setLevel(logging.DEBUG if verbose else logging.WARNING)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    # Event ingestion allocates many short-lived objects: collecting the young generation
    # every 700 allocations cost a third of the engine's time (bench_protocol). Freeze what
    # start-up loaded and collect less often.
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    memo = kopf.Memo()
    memo.lattice = OperatorContext(settings=settings)
    liveness = (
        f"http://{settings.probe.host}:{settings.probe.port}/healthz"
        if settings.probe.port
        else None
    )
    kopf.run(
        clusterwide=not settings.namespaces,
        namespaces=settings.namespaces,
        standalone=settings.peering.standalone,
        peering_name=None if settings.peering.standalone else settings.peering.name,
        priority=settings.peering.priority,
        liveness_endpoint=liveness,
        memo=memo,
    )
