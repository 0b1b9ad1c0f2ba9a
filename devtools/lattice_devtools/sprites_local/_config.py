"""Settings of the local Sprites server."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from lattice_devtools.sprites_local._netpolicy import parse_networks


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
    isolation: Literal["container", "sandbox", "none"] = "container"
    """container: each sprite a runc container on a root filesystem of its own (`rootfs`,
    with a writable layer per sprite), its own PID, IPC, UTS and mount namespaces, a user of
    its own, control groups with the limits below.
    sandbox: the host's filesystem as root, but a user of its own, a /proc showing only its
    own processes, its own /tmp and the same control groups (where runc cannot run).
    container and sandbox: each sprite has a network namespace of its own (loopback only)
    whose one way out is the server's egress proxy, which enforces its network policy.
    none: plain processes in a private mount namespace (as root, the host's network; not
    isolated)."""
    rootfs: Path | None = None
    """The sprites' shared read-only root filesystem (container isolation); None: the one
    `hack/build-sprite-rootfs.sh` built last, or $LATTICE_SPRITE_ROOTFS."""
    runc: str = "runc"
    """The runc binary (container isolation)."""
    sprite_cpus: float = Field(default=1.0, gt=0, le=1024)
    """CPU time each sprite may use, in CPUs."""
    sprite_memory_mib: int = Field(default=1024, ge=16)
    """Memory each sprite may use, in MiB (beyond it the kernel kills in the sprite)."""
    sprite_pids: int = Field(default=512, ge=8)
    """Processes and threads each sprite may have at once."""
    uid_base: int = Field(default=200_000, ge=1000, le=2**31 - 100_000)
    """The first user id given to a sprite; each sprite gets the next one."""
    egress_allow_private: tuple[str, ...] = ()
    """Addresses or CIDRs outside the global ranges that sprites may reach through their
    egress proxy all the same (say 127.0.0.1/32 for a service on this host). Empty: every
    loopback, private, link-local, unspecified and multicast address is refused."""
    egress_max_connections: int = Field(default=256, ge=1, le=65_536)
    """Connections one sprite may have open through its egress proxy at once."""
    egress_idle_timeout: float = Field(default=600.0, gt=0)
    """Seconds without traffic before the egress proxy closes a connection."""

    @field_validator("egress_allow_private")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(str(n) for n in parse_networks(value))

    @field_validator("token")
    @classmethod
    def _usable_token(cls, value: SecretStr) -> SecretStr:
        text = value.get_secret_value()
        if not text.strip():
            raise ValueError("the token is empty: no client could use the server")
        if text != text.strip() or any(c in text for c in "\r\n\x00"):
            raise ValueError("the token must not contain spaces at its ends or line breaks")
        return value

    @model_validator(mode="after")
    def _cold_after_warm(self) -> LocalSpritesConfig:
        if self.cold_after < self.warm_after:
            raise ValueError(
                f"cold-after ({self.cold_after:g}s) must not be shorter than warm-after "
                f"({self.warm_after:g}s)"
            )
        return self

    @field_validator("state_dir")
    @classmethod
    def _directory(cls, value: Path) -> Path:
        try:
            if value.exists() and not value.is_dir():
                raise ValueError(f"{value} exists and is not a directory")
        except PermissionError:
            pass  # not ours to look at here: start-up reports what it cannot do
        return value


__all__ = ["LocalSpritesConfig"]
