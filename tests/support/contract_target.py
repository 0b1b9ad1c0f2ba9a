"""Where the contract suite runs: the local Sprites server, or the real Sprites API."""

from __future__ import annotations

from dataclasses import dataclass

from lattice_adapters.sprites import SpritesCredentials
from tests.support.sprites_server import LocalSprites

REAL_SKIP = "SPRITES_TOKEN is not set: the real Sprites API part of the suite is skipped"


@dataclass
class Target:
    """Where the suite runs: the local server or the real service."""

    name: str
    credentials: SpritesCredentials
    scratch: str
    """A writable directory inside every sprite."""
    local: LocalSprites | None


def local_target(server: LocalSprites) -> Target:
    """The local server as a target; modules of local-only tests (fault switches, process
    checks) override the `target` fixture with it instead of parametrizing."""
    return Target("local", server.credentials, "/workspace", server)
