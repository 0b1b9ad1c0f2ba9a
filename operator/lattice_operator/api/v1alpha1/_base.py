"""Shared building blocks of the v1alpha1 models: object metadata and references."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from lattice_operator.modeling import (
    CHECKPOINT_ID_PATTERN,
    DNS_LABEL,
    DNS_SUBDOMAIN,
    ENV_NAME,
    LIST_SET,
    PRESERVE_UNKNOWN,
    ApiModel,
    JsonDict,
    cel,
    list_map,
)

__all__ = [
    "CHECKPOINT_ID_PATTERN",
    "DNS_LABEL",
    "DNS_SUBDOMAIN",
    "ENV_NAME",
    "LIST_SET",
    "PRESERVE_UNKNOWN",
    "ApiModel",
    "JsonDict",
    "LocalObjectReference",
    "ObjectMeta",
    "OwnerReference",
    "SecretKeyReference",
    "cel",
    "list_map",
]


class OwnerReference(ApiModel):
    """A reference to an owning object."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(ApiModel):
    """The parts of Kubernetes object metadata the operator reads."""

    name: str = ""
    namespace: str | None = None
    uid: str | None = None
    generation: int = 0
    resource_version: str | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    finalizers: list[str] = Field(default_factory=list)
    owner_references: list[OwnerReference] = Field(default_factory=list)


class LocalObjectReference(ApiModel):
    """A reference to an object of a known kind in the same namespace."""

    name: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)
    """Name of the referenced object."""


class SecretKeyReference(ApiModel):
    """A key of a Secret in the same namespace."""

    name: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)
    """Name of the Secret."""
    key: str = Field(min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$")
    """Key inside the Secret's data."""
