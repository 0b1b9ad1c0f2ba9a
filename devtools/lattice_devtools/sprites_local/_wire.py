"""The JSON the local server reads and writes, as pydantic models (Sprites wire shapes)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SPRITE_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
SERVICE_NAME = re.compile(r"^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$")
DOMAIN = re.compile(
    r"\*|(\*\.)?[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*"
)
"""What a network policy rule may name (the operator's Sprite CRD allows the same)."""
SERVICE_NAME_RULE = "service names are 1-63 lowercase letters, digits, '-' or '_'"
ENVIRONMENT_VERSION = "v0.0.1-rc48"
"""The sprite-environment protocol level the local server speaks (Sprite-Version header)."""


def utcnow() -> datetime:
    """The current time, timezone-aware UTC, whole milliseconds."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def iso(value: datetime | None) -> str | None:
    """RFC 3339 with a Z, as the service writes timestamps."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


class _Body(BaseModel):
    """A request body: unknown fields are ignored, as the service does."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class _Stored(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UrlSettings(_Stored):
    """Who may use the sprite's URL."""

    auth: Literal["sprite", "public"] = "sprite"
    private_access: Literal["admins", "organization"] | None = None


class UrlSettingsBody(_Body):
    auth: Literal["sprite", "public"] | None = None
    private_access: Literal["admins", "organization"] | None = None


class SpriteRecord(_Stored):
    """A sprite as stored in `<state>/sprites/<name>/sprite.json`."""

    id: str
    name: str
    organization: str
    url_settings: UrlSettings = UrlSettings()
    labels: list[str] = Field(default_factory=list)
    environment: dict[str, str] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime
    last_running_at: datetime | None = None
    last_warming_at: datetime | None = None
    uid: int | None = None
    """The user (and group) the sprite's processes run as; None without isolation."""


class CreateSpriteBody(_Body):
    name: str
    url_settings: UrlSettingsBody | None = None
    labels: list[str] | None = None
    environment: dict[str, str] | None = None
    wait_for_capacity: bool = False

    @field_validator("name")
    @classmethod
    def _dns_name(cls, value: str) -> str:
        if not SPRITE_NAME.match(value):
            raise ValueError("name must be 1-63 lowercase letters, digits or '-'")
        return value


class UpdateSpriteBody(_Body):
    url_settings: UrlSettingsBody | None = None
    labels: list[str] | None = None
    clear_labels: bool = False


class SessionInfoMessage(BaseModel):
    """The first text frame of every exec and attach."""

    type: Literal["session_info"] = "session_info"
    session_id: str
    command: str
    created: int
    cols: int
    rows: int
    is_owner: bool
    tty: bool
    scrollback_bytes: int
    """Extension: the size of the replay that follows (0 on a fresh exec)."""


class ExitMessage(BaseModel):
    type: Literal["exit"] = "exit"
    exit_code: int


class ClientMessage(_Body):
    """A text frame from an exec client: resize or signal."""

    type: str
    cols: int | None = Field(default=None, ge=1, le=65535)
    rows: int | None = Field(default=None, ge=1, le=65535)
    signal: str | None = None


class SessionEntry(BaseModel):
    id: str
    command: str
    workdir: str
    created: str
    tty: bool
    bytes_per_second: float
    is_active: bool
    last_activity: str | None


class CheckpointRecord(_Stored):
    """A checkpoint as stored next to its snapshot."""

    id: str
    create_time: datetime
    comment: str = ""
    source_id: str | None = None
    history: list[str] = Field(default_factory=list)
    is_auto: bool = False


class CheckpointBody(_Body):
    comment: str = ""


class ServiceBody(_Body):
    cmd: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    needs: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    dir: str | None = None
    http_port: int | None = Field(default=None, ge=1, le=65535)


class ServiceDefinition(_Stored):
    """A service as stored in `services.json`."""

    name: str
    cmd: str
    args: list[str] = Field(default_factory=list)
    needs: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    dir: str | None = None
    http_port: int | None = None
    stopped: bool = False
    """Explicitly stopped: stays stopped across wakes and restarts."""

    @field_validator("name")
    @classmethod
    def _service_name(cls, value: str) -> str:
        # The name becomes a log file name: nothing that could be a path.
        if not SERVICE_NAME.fullmatch(value):
            raise ValueError(SERVICE_NAME_RULE)
        return value


class ServiceSignalBody(_Body):
    name: str
    signal: str


class NetworkRuleBody(_Body):
    domain: str | None = Field(default=None, max_length=253)
    action: Literal["allow", "deny"] | None = None
    include: Literal["defaults"] | None = None

    @field_validator("domain")
    @classmethod
    def _domain(cls, value: str | None) -> str | None:
        if value is not None and not DOMAIN.fullmatch(value):
            raise ValueError("a domain is a host name, *.suffix or *")
        return value

    @model_validator(mode="after")
    def _one_of(self) -> NetworkRuleBody:
        if (self.domain is None) == (self.include is None):
            raise ValueError("exactly one of domain or include must be set")
        if self.domain is not None and self.action is None:
            raise ValueError("action is required with domain")
        return self


class NetworkPolicyBody(_Body):
    rules: list[NetworkRuleBody] = Field(default_factory=list)


class RenameBody(_Body):
    source: str
    dest: str
    working_dir: str = Field(default="/", alias="workingDir")


class CopyBody(_Body):
    source: str
    dest: str
    working_dir: str = Field(default="/", alias="workingDir")
    recursive: bool = False


class ChmodBody(_Body):
    path: str
    working_dir: str = Field(default="/", alias="workingDir")
    mode: str
    recursive: bool = False


class DeleteBody(_Body):
    path: str
    working_dir: str = Field(default="/", alias="workingDir")
    recursive: bool = False


class TaskBody(_Body):
    name: str | None = None
    expire: str = "1h"


__all__ = [
    "ENVIRONMENT_VERSION",
    "SPRITE_NAME",
    "CheckpointBody",
    "CheckpointRecord",
    "ChmodBody",
    "ClientMessage",
    "CopyBody",
    "CreateSpriteBody",
    "DeleteBody",
    "ExitMessage",
    "NetworkPolicyBody",
    "NetworkRuleBody",
    "RenameBody",
    "ServiceBody",
    "ServiceDefinition",
    "ServiceSignalBody",
    "SessionEntry",
    "SessionInfoMessage",
    "SpriteRecord",
    "TaskBody",
    "UpdateSpriteBody",
    "UrlSettings",
    "iso",
    "utcnow",
]
