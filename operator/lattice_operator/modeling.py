"""The base of every API model: camelCase on the wire, schema helpers, shared patterns.

Below every layer on purpose (no kind models here): the protocol engine and Lifeloop
build their status models on it, and the kind models in `api/` embed those.
"""

from __future__ import annotations

from typing import Any, cast

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

JsonDict = dict[str, Any]

# Kubernetes object names (DNS-1123 subdomain) and label-ish names (DNS-1123 label).
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
CHECKPOINT_ID_PATTERN = r"^[A-Za-z0-9][-A-Za-z0-9_.]*$"


def cel(*rules: dict[str, str]) -> JsonDict:
    """Schema extra carrying CEL validation rules (x-kubernetes-validations)."""
    return cast(JsonDict, {"x-kubernetes-validations": list(rules)})


def list_map(*keys: str) -> JsonDict:
    """Schema extra for a list merged by key (x-kubernetes-list-type: map)."""
    return cast(
        JsonDict, {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}
    )


def first_error(prefix: str, exc: ValidationError) -> str:
    """The first problem of a validation error as `prefix.field.path: reason` (wire names),
    the way the API server words a schema refusal."""
    first = exc.errors()[0]
    where = ".".join(
        [prefix, *(str(p) for p in first["loc"])] if prefix else map(str, first["loc"])
    )
    return f"{where}: {str(first['msg']).removeprefix('Value error, ')}"


PRESERVE_UNKNOWN: JsonDict = {"x-kubernetes-preserve-unknown-fields": True}
"""Schema extra for free-form JSON (kept as given, not pruned)."""

LIST_SET: JsonDict = {"x-kubernetes-list-type": "set"}
"""Schema extra for a list of unique scalars."""


class ApiModel(BaseModel):
    """Base of every CR model: camelCase on the wire, snake_case in Python.

    Unknown fields are ignored when reading from the API server (it has already
    pruned them against the schema); descriptions come from attribute docstrings
    so that `kubectl explain` shows them.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        extra="ignore",
        validate_default=False,
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON-compatible dict as the API server expects it (aliases, no unset Nones)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def to_patch(self) -> dict[str, Any]:
        """For a JSON merge patch: like `to_wire`, but None fields are sent as null.

        In a merge patch an omitted key is left as it was, so a field that became None
        (a phase that finished, a URL that is gone) must be sent as null to be removed.
        """
        return self.model_dump(mode="json", by_alias=True)
