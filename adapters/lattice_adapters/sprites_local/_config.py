"""Settings of the local Sprites server."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class LocalSpritesConfig(BaseModel):
    """Everything `lattice sprites-local` needs to know."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    state_dir: Path
    """Where sprites live: one directory per sprite, kept across restarts."""
    token: SecretStr
    """The bearer token every request must carry."""
    host: str = "127.0.0.1"
    """Address to listen on."""
    port: int = Field(default=8480, ge=0, le=65535)
    """Port to listen on; 0 picks a free one (see `ready_file`)."""
    organization: str = "local"
    """The organisation name reported for every sprite."""
    warm_after: float = Field(default=30.0, gt=0)
    """Idle seconds before a running sprite turns warm."""
    cold_after: float = Field(default=600.0, gt=0)
    """Idle seconds before a sprite turns cold (its processes are killed, files kept)."""
    scrollback_bytes: int = Field(default=64 * 1024, ge=0)
    """Output kept per session for replay on attach."""
    exit_grace: float = Field(default=2.0, ge=0)
    """After a process exits, how long to wait for output still held by its children."""
    ready_file: Path | None = None
    """Written (JSON: url, port, pid) once the server accepts connections."""


__all__ = ["LocalSpritesConfig"]
