"""The Environment resource: the cluster-wide environment every Sprite's Runs get.

Cluster-scoped, and only the one named `default` exists (a CEL rule): a platform team's one
place for what every sandbox needs, granted apart from the Sprites (RBAC on
`environments.lattice.dev`, name `default`). Its steps run before each Sprite's own
`spec.environment`, in order, once per environment (the digest of both, a marker in the
sprite). `lattice env promote INTENT` appends a global candidate to it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from lattice_operator.api.v1alpha1._base import ApiModel, ObjectMeta, list_map
from lattice_operator.api.v1alpha1.sprite import EnvironmentStep

CLUSTER_ENVIRONMENT = "default"
"""The name of the one Environment the operator reads."""
STEPS_LIMIT = 64


def name_rule() -> dict[str, str]:
    """The CEL rule (on the whole object): one Environment, named `default`."""
    return {
        "rule": f"self.metadata.name == '{CLUSTER_ENVIRONMENT}'",
        "message": f"metadata.name: the cluster-wide Environment is named {CLUSTER_ENVIRONMENT}",
    }


class EnvironmentSpec(ApiModel):
    """What every Sprite's Runs run before the Sprite's own environment."""

    steps: list[EnvironmentStep] = Field(
        default_factory=list, max_length=STEPS_LIMIT, json_schema_extra=list_map("name")
    )
    """In order; each `sh -c COMMAND` must exit 0 or the Run fails (EnvironmentFailed).
    `lattice env promote INTENT` appends global candidates; people may edit it. A Sprite's
    step of the same name is not run twice (the cluster-wide one runs)."""

    @model_validator(mode="after")
    def _unique(self) -> EnvironmentSpec:
        names = [s.name for s in self.steps]
        if len(names) != len(set(names)):
            raise ValueError("steps: names must be unique")
        return self


class Environment(ApiModel):
    """The cluster-wide environment (only `default` is read)."""

    api_version: Literal["lattice.dev/v1alpha1"] = "lattice.dev/v1alpha1"
    kind: Literal["Environment"] = "Environment"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: EnvironmentSpec = Field(default_factory=EnvironmentSpec)


__all__ = [
    "CLUSTER_ENVIRONMENT",
    "Environment",
    "EnvironmentSpec",
    "name_rule",
]
