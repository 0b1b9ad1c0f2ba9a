"""A Run's watch event parsed once for all the indexes that read it.

kopf calls every index function with the same body, one after the other, for each watch
event; two of them need the whole Run model (the claims on Sprites, the Runs by name that
the Intent pipeline reads). Validating and copying a Run is most of an index's cost, and
Runs change often (a status write every `patch_interval` while they run), so the last parse
is kept and reused while the body's resourceVersion is the same. One entry only: nothing
accumulates, and a model handed out is never changed by its readers. A Run's driver keeps
its own last parse the same way (`run_view`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import kopf
from pydantic import BaseModel, ValidationError

from lattice_operator.api.object_ref import ObjectRef
from lattice_operator.api.v1alpha1 import API_VERSION, Run

M = TypeVar("M", bound=BaseModel)

_last: tuple[str, str, Run] | None = None


def model_of(model: type[M], body: Mapping[str, Any]) -> M:
    """`model` read from a kopf body, sharing none of kopf's dictionaries.

    Through JSON (encoded in C, validated in Rust) rather than a deep copy in Python, which
    took most of a parse; without `metadata.managedFields`, which no model reads and which
    is often the largest part of an object. Raises pydantic's ValidationError, as
    `model_validate` does.
    """
    raw = dict(body)
    meta = raw.get("metadata")
    if isinstance(meta, Mapping) and "managedFields" in meta:
        raw["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return model.model_validate_json(json.dumps(raw))


def parse_run(body: Mapping[str, Any]) -> Run:
    """The Run of a body (a copy: the model never shares kopf's dictionaries)."""
    try:
        return model_of(Run, body)
    except ValidationError as exc:
        raise kopf.PermanentError(f"invalid Run: {exc}") from exc


def indexed_run(body: kopf.Body) -> Run:
    """`parse_run`, reused for the next index that reads the same version of the Run."""
    global _last
    uid = str(body.metadata.uid or "")
    version = str(body.get("metadata", {}).get("resourceVersion") or "")
    if version and _last is not None and _last[0] == uid and _last[1] == version:
        return _last[2]
    run = parse_run(body)
    _last = (uid, version, run)
    return run


def per_version(parse: Callable[[Mapping[str, Any]], M]) -> Callable[[Mapping[str, Any]], M]:
    """`parse`, called again only when the body's resourceVersion moved since the last call
    (a model handed out is never changed by its readers)."""
    last: tuple[str, M] | None = None

    def parsed(body: Mapping[str, Any]) -> M:
        nonlocal last
        version = str(body.get("metadata", {}).get("resourceVersion") or "")
        if version and last is not None and last[0] == version:
            return last[1]
        model = parse(body)
        last = (version, model)
        return model

    return parsed


def run_view(body: kopf.Body) -> Callable[[], Run]:
    """The Run as kopf's live body has it now, parsed again only when its resourceVersion
    moved: a Run's driver looks at it after every chunk of output (cancel? timed out?)."""
    parse = per_version(parse_run)
    return lambda: parse(body)


def object_ref(obj: Mapping[str, Any]) -> ObjectRef:
    """What an Event regarding this object (a kopf body, a stored object) points at."""
    meta = obj.get("metadata") or {}
    return ObjectRef(
        api_version=str(obj.get("apiVersion") or API_VERSION),
        kind=str(obj.get("kind") or ""),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
    )


__all__ = ["indexed_run", "model_of", "object_ref", "parse_run", "per_version", "run_view"]
