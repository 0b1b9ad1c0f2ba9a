"""The operator's own credentials (GitHub, Fly), read from Secrets named in the settings."""

from __future__ import annotations

import base64

from lattice_adapters.kube import KubeApiError, resource_path
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.ports.errors import CredentialsMissing


async def read_secret(ctx: OperatorContext, where: str, key: str) -> str:
    """The value under `key` of the Secret `where` (namespace/name); CredentialsMissing when
    it cannot be read or has no such key."""
    namespace, _, name = where.partition("/")
    try:
        secret = await ctx.require_kube().get(resource_path("", "v1", "secrets", namespace, name))
    except KubeApiError as exc:
        raise CredentialsMissing(f"Secret {where} cannot be read ({exc.reason})") from None
    raw = (secret.get("data") or {}).get(key)
    if raw is None:
        raise CredentialsMissing(f"Secret {where} has no key {key}")
    return base64.b64decode(raw).decode().strip()


__all__ = ["read_secret"]
