"""The Sprites backend: the Fly.io Sprites API (or the local server), our own typed client.

`SpritesAdapter` implements `lattice_operator.ports.SpriteBackend`. Build it from
credentials read from a Kubernetes Secret or the environment:

    credentials = load_credentials(secret.data)      # or credentials_from_env()
    async with SpritesAdapter(credentials) as backend:
        session = await backend.exec("box", ["sh", "-c", "echo hi"])
        async for chunk in session: ...

Errors are those of `lattice_operator.ports.errors`; see `_adapter` for why this is not the
official sprites-py SDK (docs/sprites-backend.md).
"""

from lattice_adapters.sprites._adapter import SpritesAdapter
from lattice_adapters.sprites._credentials import (
    DEFAULT_API_URL,
    SpritesCredentials,
    credentials_from_env,
    credentials_from_secret,
    load_credentials,
)
from lattice_adapters.sprites._exec import WsExecSession
from lattice_adapters.sprites._retry import RetryPolicy, call_with_retry

__all__ = [
    "DEFAULT_API_URL",
    "RetryPolicy",
    "SpritesAdapter",
    "SpritesCredentials",
    "WsExecSession",
    "call_with_retry",
    "credentials_from_env",
    "credentials_from_secret",
    "load_credentials",
]
