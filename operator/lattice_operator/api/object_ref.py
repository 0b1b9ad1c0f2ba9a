"""A pointer to one Kubernetes object: what an Event is about, whose status is written."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ObjectRef:
    """Enough of an object to point an Event at it."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    def to_wire(self) -> dict[str, str]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
        }


__all__ = ["ObjectRef"]
