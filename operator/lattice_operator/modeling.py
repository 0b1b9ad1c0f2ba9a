"""The base of every API model: camelCase on the wire, schema helpers, shared patterns.

Below every layer on purpose (no kind models here): the protocol engine and Lifeloop
build their status models on it, and the kind models in `api/` embed those.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, cast, get_args

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
    so that `kubectl explain` shows them, read by `described` when a schema is made: pydantic's
    `use_attribute_docstrings` reads them when the class is defined, a third of the CPU of
    importing the models, paid by every operator start and `lattice` command for nothing.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
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


def described(model: type[BaseModel]) -> None:
    """Give the fields of `model`, and of every model it embeds, the descriptions their
    attribute docstrings make (as `use_attribute_docstrings` would), and rebuild them so
    that their JSON schemas carry them. For schema makers (the CRDs); validation is the same
    with or without."""
    for cls in _embedded(model, []):
        for name, info in cls.model_fields.items():
            if info.description is None:
                info.description = _docstrings(_declaring(cls, name)).get(name)
        cls.model_rebuild(force=True)


def _embedded(tp: object, order: list[type[BaseModel]]) -> list[type[BaseModel]]:
    """The models reachable from `tp`'s fields, each after those it embeds."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        if tp in order or tp is BaseModel:
            return order
        order.append(tp)  # marks it as seen; moved behind what it embeds below
        for info in tp.model_fields.values():
            _embedded(info.annotation, order)
        order.remove(tp)
        order.append(tp)
        return order
    for arg in get_args(tp):
        _embedded(arg, order)
    return order


def _declaring(cls: type[BaseModel], name: str) -> type[BaseModel]:
    """The class whose body declares field `name` (its docstring is there)."""
    for base in cls.__mro__:
        if name in inspect.get_annotations(base):
            return cast(type[BaseModel], base)
    return cls


@functools.cache
def _docstrings(cls: type[BaseModel]) -> dict[str, str]:
    # pydantic's own reader, so the descriptions are those `use_attribute_docstrings` makes.
    from pydantic._internal._docs_extraction import extract_docstrings_from_cls

    return extract_docstrings_from_cls(cls, use_inspect=True)
