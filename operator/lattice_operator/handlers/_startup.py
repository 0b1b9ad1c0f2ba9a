"""Operator start-up: kopf settings from our OperatorSettings."""

from __future__ import annotations

from typing import Any

import kopf

from lattice_operator.handlers._context import context_of


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
