"""The Sprites API's JSON answers as typed models, and the conversions to the port's models.

Lenient where the official SDKs are (missing fields take defaults, unknown ones are ignored,
an unparseable timestamp is None), strict where the operator depends on a value (a sprite's
status, a service definition, a network rule): those raise `ProtocolError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, TypeVar, cast

from pydantic import BaseModel, BeforeValidator, ConfigDict, JsonValue, TypeAdapter, ValidationError

from lattice_operator.api.v1alpha1.sprite import BackendStatus, NetworkRule, SpriteService, UrlAuth
from lattice_operator.ports.errors import OperationFailed, ProtocolError
from lattice_operator.ports.sprites import (
    CheckpointInfo,
    FileStat,
    ServiceEvent,
    ServiceInfo,
    ServiceStatus,
    SessionInfo,
    SpriteInfo,
)

M = TypeVar("M", bound=BaseModel)
_STATUSES: frozenset[str] = frozenset({"cold", "warm", "running"})
_SERVICE_STATUSES: frozenset[str] = frozenset(
    {"stopped", "starting", "running", "stopping", "failed"}
)


def _time(value: object) -> datetime | None:
    """An ISO 8601 time (`Z` accepted); anything else is None, as in the SDKs."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def _text(value: object) -> str:
    """Ids the API sends as numbers or strings (session ids), and nulls, as text."""
    return "" if value is None else str(value)


Time = Annotated[datetime | None, BeforeValidator(_time)]
Text = Annotated[str, BeforeValidator(_text)]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class UrlSettingsWire(_Wire):
    auth: str | None = None


class SpriteWire(_Wire):
    """`GET /v1/sprites/{name}`, an entry of the listing, the answer of create and update."""

    id: Text = ""
    name: Text = ""
    organization: Text = ""
    org_slug: Text = ""
    url: str | None = None
    url_settings: UrlSettingsWire | None = None
    status: JsonValue = None
    labels: list[str] | None = None
    created_at: Time = None
    updated_at: Time = None
    last_running_at: Time = None
    last_warming_at: Time = None

    def info(self) -> SpriteInfo:
        if self.status not in _STATUSES:
            raise ProtocolError(f"unknown sprite status {self.status!r}")
        auth = self.url_settings.auth if self.url_settings else None
        return SpriteInfo(
            id=self.id,
            name=self.name,
            organization=self.organization or self.org_slug,
            url=self.url,
            url_auth=cast(UrlAuth, auth) if auth in ("sprite", "public") else None,
            status=cast(BackendStatus, self.status),
            labels=tuple(self.labels or ()),
            created_at=self.created_at,
            updated_at=self.updated_at,
            last_running_at=self.last_running_at,
            last_warming_at=self.last_warming_at,
        )


class SpriteListWire(_Wire):
    """`GET /v1/sprites`."""

    sprites: list[SpriteWire] = []
    has_more: bool = False
    next_continuation_token: str | None = None
    running: int = 0
    warm: int = 0
    cold: int = 0


class SessionWire(_Wire):
    id: Text = ""
    command: Text = ""
    workdir: Text = ""
    tty: bool = False
    created: Time = None
    is_active: bool = False
    last_activity: Time = None

    def info(self) -> SessionInfo:
        return SessionInfo(
            id=self.id,
            command=self.command,
            workdir=self.workdir,
            tty=self.tty,
            created=self.created,
            is_active=self.is_active,
            last_activity=self.last_activity,
        )


class SessionListWire(_Wire):
    """`GET /v1/sprites/{name}/exec` (`{count, sessions}`, as every SDK reads it)."""

    sessions: list[SessionWire] = []


class FileEntryWire(_Wire):
    """An entry of `GET …/fs/list`."""

    path: Text = ""
    name: Text = ""
    size: int | None = None
    mode: Text = ""
    isDir: bool = False  # the wire's name
    type: JsonValue = None
    modTime: Time = None  # the wire's name

    def stat(self) -> FileStat:
        return FileStat(
            path=self.path,
            name=self.name or self.path.rsplit("/", 1)[-1],
            size=self.size or 0,
            mode=self.mode or "0644",
            is_dir=self.isDir,
            is_symlink=self.type == "symlink",
            mod_time=self.modTime,
        )


class FileListWire(_Wire):
    """`GET …/fs/list?path=`: the path's entry for a file, its children for a directory."""

    path: str | None = None
    entries: list[FileEntryWire] | None = None


class CheckpointWire(_Wire):
    """An entry of `GET …/checkpoints` (a JSON array)."""

    id: Text = ""
    create_time: Time = None
    comment: str | None = None
    history: list[Text] | None = None

    def info(self) -> CheckpointInfo:
        return CheckpointInfo(
            id=self.id,
            create_time=self.create_time,
            comment=self.comment or "",
            source_id=self.history[-1] if self.history else None,
        )


class ServiceStateWire(_Wire):
    status: str | None = None
    pid: int | None = None
    started_at: Time = None
    error: str | None = None
    restart_count: int | None = None


class ServiceWire(_Wire):
    """A service and its state: `GET …/services/{svc}`, an entry of `GET …/services`."""

    name: Text = ""
    cmd: Text = ""
    args: list[str] | None = None
    needs: list[str] | None = None
    http_port: int | None = None
    env: dict[str, str] | None = None
    dir: str | None = None
    state: ServiceStateWire | None = None

    def info(self) -> ServiceInfo:
        try:
            spec = SpriteService(
                name=self.name,
                cmd=self.cmd,
                args=list(self.args or []),
                env=dict(self.env or {}),
                dir=self.dir,
                http_port=self.http_port,
                needs=list(self.needs or []),
            )
        except ValidationError as exc:
            raise ProtocolError(
                f"unexpected service definition: {exc.error_count()} errors"
            ) from None
        state = self.state or ServiceStateWire()
        status = state.status or "unknown"
        return ServiceInfo(
            spec=spec,
            status=cast(ServiceStatus, status if status in _SERVICE_STATUSES else "unknown"),
            pid=state.pid,
            restart_count=state.restart_count or 0,
            started_at=state.started_at,
            error=state.error or None,
        )


class PolicyRuleWire(_Wire):
    domain: str | None = None
    action: str | None = None
    include: str | None = None


class PolicyWire(_Wire):
    """`GET …/policy/network`."""

    rules: list[PolicyRuleWire] = []

    def network_rules(self) -> list[NetworkRule]:
        try:
            return [NetworkRule.model_validate(r.model_dump()) for r in self.rules]
        except ValidationError as exc:
            raise ProtocolError(f"unexpected network rule: {exc.error_count()} errors") from None


class StreamLine(_Wire):
    """One NDJSON line of a progress stream (checkpoint, restore, services, kill, logs)."""

    type: Text = ""
    data: JsonValue = None
    error: JsonValue = None
    message: JsonValue = None
    exit_code: JsonValue = None

    def event(self) -> ServiceEvent:
        return ServiceEvent(
            type=self.type,
            data=self.data if isinstance(self.data, str) else None,
            exit_code=self.exit_code if isinstance(self.exit_code, int) else None,
        )


class ServiceListWire(_Wire):
    """`GET …/services` as an object (the local server answers a bare list; sprites-py reads
    both)."""

    services: list[ServiceWire] = []


ServicesWire = TypeAdapter(list[ServiceWire] | ServiceListWire)
CheckpointsWire = TypeAdapter(list[CheckpointWire])


def parse(model: type[M], body: bytes, *, what: str) -> M:
    """`body` as `model`; a body that is not that JSON is a `ProtocolError`."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise ProtocolError(f"{what}: unexpected answer: {exc.error_count()} errors") from None


def parse_line(line: str) -> StreamLine | None:
    """One NDJSON line; None for a blank line or a JSON value that is not an object."""
    line = line.strip()
    if not line:
        return None
    try:
        data = json.loads(line)
    except ValueError:
        raise ProtocolError(f"not NDJSON: {line[:80]!r}") from None
    if not isinstance(data, dict):
        return None
    try:
        return StreamLine.model_validate(data)
    except ValidationError:
        raise ProtocolError(f"not a progress line: {line[:80]!r}") from None


def progress_lines(body: str) -> Iterator[StreamLine]:
    """The lines of a whole progress stream; lines that are not JSON are skipped (as the SDKs
    do: the outcome is the `complete` or `error` line)."""
    for raw in body.splitlines():
        try:
            line = parse_line(raw)
        except ProtocolError:
            continue
        if line is not None:
            yield line


def finish_stream(lines: list[StreamLine], *, what: str) -> str:
    """The text of the `complete` line; an `error` line raises, a missing end too."""
    for line in lines:
        if line.type == "error":
            detail = line.error or line.data or "error"
            raise OperationFailed(f"{what}: {detail}")
    for line in lines:
        if line.type == "complete":
            return str(line.data or "")
    raise ProtocolError(f"{what}: the progress stream ended without a complete line")


def service_events(lines: list[StreamLine], *, what: str) -> list[ServiceEvent]:
    """A service operation's events; an `error` line raises `OperationFailed`."""
    events = [line.event() for line in lines]
    for event in events:
        if event.type == "error":
            raise OperationFailed(f"{what}: {event.data or 'error'}")
    return events


__all__ = [
    "CheckpointsWire",
    "FileListWire",
    "PolicyWire",
    "ServicesWire",
    "SessionListWire",
    "SpriteListWire",
    "SpriteWire",
    "StreamLine",
    "finish_stream",
    "parse",
    "parse_line",
    "progress_lines",
    "service_events",
]
