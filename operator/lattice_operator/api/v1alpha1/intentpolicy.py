"""The IntentPolicy resource: ordered CEL rules that classify and gate Intents."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from lattice_operator.api.v1alpha1._base import DNS_LABEL, ApiModel, ObjectMeta, list_map
from lattice_operator.api.v1alpha1.conditions import CONDITIONS_LIST_SCHEMA, Condition

RiskClass = Literal["safe", "controlled", "dangerous"]
GateOutcome = Literal["allow", "require_approval", "deny"]


class PolicyRule(ApiModel):
    """One rule: when `match` is true for an Intent, it decides the risk and the gate."""

    name: str = Field(min_length=1, max_length=63, pattern=DNS_LABEL)
    """Rule name, unique in the policy; recorded on the Intents it decides."""
    match: str = Field(min_length=1, max_length=4096)
    """A CEL expression over `intent` (its metadata and spec) that yields a bool, e.g.
    `intent.spec.kind == 'sprite_task_exec' && intent.metadata.namespace == 'team-a'`."""
    risk: RiskClass
    """The risk class of matching Intents."""
    outcome: GateOutcome
    """allow (run without approval), require_approval, or deny."""
    approvers: int = Field(default=1, ge=1, le=10)
    """Distinct approvals needed when the outcome is require_approval."""
    message: str | None = Field(default=None, max_length=1024)
    """Shown on the Intent when this rule decides it."""


class IntentPolicySpec(ApiModel):
    """Ordered rules; the first whose match is true wins."""

    rules: list[PolicyRule] = Field(min_length=1, max_length=64, json_schema_extra=list_map("name"))
    """Rules, tried in order."""

    @model_validator(mode="after")
    def _unique_names(self) -> IntentPolicySpec:
        names = [r.name for r in self.rules]
        if len(names) != len(set(names)):
            raise ValueError("rule names must be unique")
        return self


class IntentPolicyStatus(ApiModel):
    """Observed state of the policy."""

    observed_generation: int | None = None
    """The .metadata.generation last checked."""
    conditions: list[Condition] = Field(
        default_factory=list, max_length=8, json_schema_extra=CONDITIONS_LIST_SCHEMA
    )
    """Valid: every rule compiles and type-checks."""


class IntentPolicy(ApiModel):
    """Rules that classify Intents in a namespace and decide what needs approval."""

    api_version: Literal["lattice.dev/v1alpha1"] = "lattice.dev/v1alpha1"
    kind: Literal["IntentPolicy"] = "IntentPolicy"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: IntentPolicySpec
    status: IntentPolicyStatus = Field(default_factory=IntentPolicyStatus)
