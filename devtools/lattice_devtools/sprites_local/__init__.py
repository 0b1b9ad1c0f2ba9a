"""A Sprites-compatible server on this machine, with real processes.

It speaks the Sprites REST and WebSocket protocol (the parts the operator uses), so the
official sprites-py SDK and `lattice_adapters.sprites.SpritesAdapter` cannot tell it from
the Fly.io service. Each sprite is a directory; its commands run as real processes in a
private mount namespace that shows the directory at `/workspace`. Run it with
`lattice sprites-local`; see docs/sprites-backend.md for the switches tests can flip.
"""

from lattice_devtools.sprites_local._app import build_app, serve
from lattice_devtools.sprites_local._config import LocalSpritesConfig
from lattice_devtools.sprites_local._faults import Faults, RateLimitFault
from lattice_devtools.sprites_local._launcher import LauncherError
from lattice_devtools.sprites_local._paths import PathRefused, host_path, sprite_path
from lattice_devtools.sprites_local._ring import OutputRing

__all__ = [
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
