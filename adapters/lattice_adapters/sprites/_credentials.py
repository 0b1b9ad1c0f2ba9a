"""Where the Sprites token and API URL come from: a Kubernetes Secret's data, or the environment."""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, SecretStr, field_validator

from lattice_operator.ports.errors import CredentialsMissing, InvalidRequest

DEFAULT_API_URL = "https://api.sprites.dev"
TOKEN_KEYS = ("SPRITES_TOKEN", "SPRITE_TOKEN", "token")
"""Keys tried in order, in a Secret's data and in the environment (`token` only in Secrets)."""
API_URL_KEYS = ("SPRITES_API_URL", "apiUrl", "api_url")
"""Keys for the API base URL (only `SPRITES_API_URL` in the environment)."""


class SpritesCredentials(BaseModel):
    """A Sprites API token and base URL. The token never shows in repr, str or JSON dumps."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    token: SecretStr
    """The bearer token (`<org>/<id>/<secret>` at Fly.io); reveal with `get_secret_value()`."""
    api_url: str = DEFAULT_API_URL
    """The API base URL; `http://127.0.0.1:PORT` for the local server."""

    @field_validator("api_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError("api_url must start with http:// or https://")
        return value

    @field_validator("token")
    @classmethod
    def _non_empty(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().strip():
            raise ValueError("token is empty")
        return value


def credentials_from_env(environ: Mapping[str, str] | None = None) -> SpritesCredentials:
    """Read `SPRITES_TOKEN` (or `SPRITE_TOKEN`) and `SPRITES_API_URL` from the environment."""
    env = os.environ if environ is None else environ
    token = next((env[k] for k in TOKEN_KEYS[:2] if env.get(k, "").strip()), None)
    if token is None:
        raise CredentialsMissing("no Sprites token: set SPRITES_TOKEN (or SPRITE_TOKEN)")
    return _build(token, env.get("SPRITES_API_URL") or DEFAULT_API_URL)


def credentials_from_secret(
    data: Mapping[str, str | bytes], *, encoded: bool = True
) -> SpritesCredentials:
    """Read the token and API URL from a Kubernetes Secret.

    `data` is the Secret's `data` (base64 values, `encoded=True`) or `stringData`
    (`encoded=False`). Keys: `SPRITES_TOKEN`, `SPRITE_TOKEN` or `token`; optionally
    `SPRITES_API_URL`, `apiUrl` or `api_url`.
    """
    values = {key: _decode(key, raw, encoded) for key, raw in data.items()}
    token = next((values[k] for k in TOKEN_KEYS if values.get(k, "").strip()), None)
    if token is None:
        raise CredentialsMissing(
            f"the Secret has no Sprites token (expected one of the keys {', '.join(TOKEN_KEYS)})"
        )
    api_url = next((values[k] for k in API_URL_KEYS if values.get(k, "").strip()), DEFAULT_API_URL)
    return _build(token, api_url)


def load_credentials(
    secret_data: Mapping[str, str | bytes] | None = None,
    *,
    encoded: bool = True,
    environ: Mapping[str, str] | None = None,
) -> SpritesCredentials:
    """The Secret's credentials when it has a token, else the environment's."""
    if secret_data:
        try:
            return credentials_from_secret(secret_data, encoded=encoded)
        except CredentialsMissing:
            pass
    return credentials_from_env(environ)


def _decode(key: str, raw: str | bytes, encoded: bool) -> str:
    if not encoded:
        return raw.decode() if isinstance(raw, bytes) else raw
    try:
        return base64.b64decode(raw, validate=True).decode().strip()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        # The key is named, the value never is.
        raise InvalidRequest(f"Secret key {key!r} is not valid base64 text") from None


def _build(token: str, api_url: str) -> SpritesCredentials:
    try:
        return SpritesCredentials(token=SecretStr(token.strip()), api_url=api_url)
    except ValueError:
        raise InvalidRequest(f"invalid Sprites API URL: {api_url!r}") from None


__all__ = [
    "DEFAULT_API_URL",
    "SpritesCredentials",
    "credentials_from_env",
    "credentials_from_secret",
    "load_credentials",
]
