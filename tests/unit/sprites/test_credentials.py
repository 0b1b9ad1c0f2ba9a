"""Credentials from the environment or a Kubernetes Secret; the token never shows."""

from __future__ import annotations

import base64

import pytest

from lattice_adapters.sprites import (
    DEFAULT_API_URL,
    SpritesAdapter,
    credentials_from_env,
    credentials_from_secret,
    load_credentials,
)
from lattice_operator.ports import errors

TOKEN = "my-org/1234/s3cr3t-value"


def b64(text: str) -> bytes:
    return base64.b64encode(text.encode())


def test_environment_prefers_sprites_token() -> None:
    creds = credentials_from_env(
        {"SPRITES_TOKEN": TOKEN, "SPRITE_TOKEN": "other", "SPRITES_API_URL": "http://127.0.0.1:9/"}
    )
    assert creds.token.get_secret_value() == TOKEN
    assert creds.api_url == "http://127.0.0.1:9"


def test_environment_falls_back_to_sprite_token_and_default_url() -> None:
    creds = credentials_from_env({"SPRITE_TOKEN": TOKEN})
    assert creds.token.get_secret_value() == TOKEN
    assert creds.api_url == DEFAULT_API_URL


def test_missing_token_is_credentials_missing() -> None:
    with pytest.raises(errors.CredentialsMissing):
        credentials_from_env({"SPRITES_TOKEN": "  "})


def test_secret_data_is_base64() -> None:
    creds = credentials_from_secret(
        {"token": b64(TOKEN), "apiUrl": b64("https://sprites.example.test")}
    )
    assert creds.token.get_secret_value() == TOKEN
    assert creds.api_url == "https://sprites.example.test"


def test_secret_string_data() -> None:
    creds = credentials_from_secret({"SPRITES_TOKEN": TOKEN}, encoded=False)
    assert creds.token.get_secret_value() == TOKEN


def test_bad_base64_names_the_key_not_the_value() -> None:
    with pytest.raises(errors.InvalidRequest) as caught:
        credentials_from_secret({"token": "not base64 %%% " + TOKEN})
    assert "'token'" in str(caught.value)
    assert TOKEN not in str(caught.value)


def test_load_prefers_the_secret_then_the_environment() -> None:
    env = {"SPRITES_TOKEN": "from-env"}
    assert load_credentials({"token": b64(TOKEN)}, environ=env).token.get_secret_value() == TOKEN
    assert load_credentials({"other": b64("x")}, environ=env).token.get_secret_value() == "from-env"
    assert load_credentials(None, environ=env).token.get_secret_value() == "from-env"


def test_bad_url_is_refused() -> None:
    with pytest.raises(errors.InvalidRequest):
        credentials_from_env({"SPRITES_TOKEN": TOKEN, "SPRITES_API_URL": "ftp://x"})


async def test_token_is_hidden_in_repr_str_and_dumps() -> None:
    creds = credentials_from_env({"SPRITES_TOKEN": TOKEN})
    for text in (repr(creds), str(creds), creds.model_dump_json(), str(creds.model_dump())):
        assert TOKEN not in text
    adapter = SpritesAdapter(creds)
    try:
        assert TOKEN not in repr(adapter)
    finally:
        await adapter.aclose()
