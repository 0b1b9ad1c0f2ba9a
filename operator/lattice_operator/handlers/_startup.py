"""Operator start-up: kopf settings from our OperatorSettings, and the peering object."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from lattice_adapters.kube import KubeApiError, KubeClient, KubeConfig, resource_path
from lattice_operator.handlers._context import context_of

log = logging.getLogger(__name__)


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    ours = context_of(memo).settings
    settings.posting.reporting_component = ours.component
    settings.persistence.finalizer = ours.finalizer
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="lattice.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="lattice.dev", key="last-handled-configuration"
    )
    settings.watching.inactivity_timeout = ours.watch.inactivity_timeout
    settings.networking.enforce_retry_after = True
    if not ours.peering.standalone:
        await _ensure_peering(ours.peering.name, ours.namespaces)


async def _ensure_peering(name: str, namespaces: tuple[str, ...]) -> None:
    """kopf needs the peering object to exist before replicas can agree who is active."""
    kind, plural = ("ClusterKopfPeering", "clusterkopfpeerings")
    if namespaces:
        # Namespaced operators peer per namespace; kopf creates nothing itself.
        kind, plural = ("KopfPeering", "kopfpeerings")
    async with KubeClient(KubeConfig.load()) as kube:
        targets = list(namespaces) if namespaces else [None]
        for ns in targets:
            if ns is not None and any(ch in ns for ch in "*?["):
                log.warning("peering for namespace glob %r must be created by hand", ns)
                continue
            body = {
                "apiVersion": "kopf.dev/v1",
                "kind": kind,
                "metadata": {"name": name, **({"namespace": ns} if ns else {})},
            }
            try:
                await kube.create(resource_path("kopf.dev", "v1", plural, ns), body)
                log.info("created %s %s", kind, name)
            except KubeApiError as exc:
                if not exc.conflict:
                    raise
