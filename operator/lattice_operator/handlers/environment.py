"""kopf wiring of the cluster-wide Environment: its steps in memory, for every Run's start."""

from __future__ import annotations

import logging
from typing import Any

import kopf
from pydantic import ValidationError

from lattice_operator.api.v1alpha1.environment import CLUSTER_ENVIRONMENT, Environment
from lattice_operator.api.v1alpha1.resources import ENVIRONMENTS
from lattice_operator.api.v1alpha1.sprite import EnvironmentStep
from lattice_operator.modeling import first_error

log = logging.getLogger(__name__)

ClusterSteps = tuple[EnvironmentStep, ...]


@kopf.index(*ENVIRONMENTS.gvp)
async def cluster_environment(body: kopf.Body, **_: Any) -> dict[str, ClusterSteps]:
    """The `default` Environment's steps (another name is refused by its CRD; one the
    model refuses is left out, with a warning, rather than half applied)."""
    if body.metadata.name != CLUSTER_ENVIRONMENT:
        return {}
    try:
        environment = Environment.model_validate(dict(body))
    except ValidationError as exc:
        log.warning("Environment %s is not applied: %s", CLUSTER_ENVIRONMENT, first_error("", exc))
        return {}
    return {CLUSTER_ENVIRONMENT: tuple(environment.spec.steps)}


def cluster_steps(index: kopf.Index[str, ClusterSteps] | None) -> ClusterSteps:
    """The cluster-wide steps as the index holds them now (none without an Environment)."""
    if index is None:
        return ()
    entries = index.get(CLUSTER_ENVIRONMENT)
    return next(iter(entries)) if entries else ()


__all__ = ["ClusterSteps", "cluster_environment", "cluster_steps"]
