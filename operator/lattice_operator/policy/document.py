"""What policy rules see as `intent`: the one shape both classification and the samples use."""

from __future__ import annotations

from typing import Any


def intent_document(metadata: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """What rules see as `intent`: identifying metadata and the spec, never status."""
    return {
        "metadata": {
            "name": metadata.get("name", ""),
            "namespace": metadata.get("namespace", ""),
            "labels": dict(metadata.get("labels") or {}),
            "annotations": dict(metadata.get("annotations") or {}),
        },
        "spec": spec,
    }


__all__ = ["intent_document"]
