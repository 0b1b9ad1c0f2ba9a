"""The public names of the Sprites packages (changing them is a decision, not an accident)."""

from __future__ import annotations

from pydantic import SecretStr

import lattice_adapters.sprites
import lattice_devtools.sprites_local
import lattice_operator.ports.errors
import lattice_operator.ports.sprites
from lattice_operator.ports import SpriteBackend


def test_adapter_surface() -> None:
    assert sorted(lattice_adapters.sprites.__all__) == [
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


def test_local_server_surface() -> None:
    assert sorted(lattice_devtools.sprites_local.__all__) == [
        "Faults",
        "LauncherError",
        "LocalSpritesConfig",
        "OutputRing",
        "PathRefused",
        "RateLimitFault",
        "build_app",
        "host_path",
        "serve",
        "sprite_path",
    ]


def test_the_adapter_implements_every_port_method() -> None:
    port = lattice_operator.ports.sprites.SpriteBackend
    wanted = {n for n in vars(port) if not n.startswith("_")}
    missing = {
        n for n in wanted if not callable(getattr(lattice_adapters.sprites.SpritesAdapter, n, None))
    }
    assert wanted
    assert not missing


async def test_the_adapter_is_a_sprite_backend_for_the_type_checker() -> None:
    adapter = lattice_adapters.sprites.SpritesAdapter(
        lattice_adapters.sprites.SpritesCredentials(
            token=SecretStr("t"), api_url="http://127.0.0.1:1"
        )
    )
    backend: SpriteBackend = adapter  # mypy checks the structural match
    await backend.aclose()


def test_errors_surface() -> None:
    for name in lattice_operator.ports.errors.__all__:
        assert issubclass(getattr(lattice_operator.ports.errors, name), Exception)
