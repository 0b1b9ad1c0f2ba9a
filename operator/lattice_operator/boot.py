"""Boot kopf with our settings and handlers."""

from __future__ import annotations

import gc
import logging

from lattice_operator.errors import ConfigurationError
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.settings import OperatorSettings


def preflight(settings: OperatorSettings) -> None:
    """Refuse a configuration that can never work, before kopf starts.

    kopf retries a failing start-up forever; a Pod that neither runs nor exits hides the
    reason, while an exit with it is a crash loop whose log line says what to fix."""
    from lattice_adapters.kube import KubeConfig, KubeConfigError
    from lattice_operator.policy.cel import PolicyInvalid
    from lattice_operator.policy.classify import compile_policy

    if settings.default_policy is not None:
        try:
            compile_policy("cluster-default", settings.default_policy)
        except PolicyInvalid as exc:
            raise ConfigurationError(f"default_policy does not compile: {exc}") from exc
    try:
        KubeConfig.load()
    except KubeConfigError as exc:
        raise ConfigurationError(f"no Kubernetes credentials: {exc}") from exc


def run_operator(settings: OperatorSettings, *, verbose: bool = False) -> None:
    """Run the operator until it is told to stop (SIGINT/SIGTERM)."""
    preflight(settings)
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
