"""Payload placement ("Opaque Payload Envelope", "Placement resolution"): where a payload the
operator hands an agent goes, decided against the adapter's routes and manifest.

A route is how the operator delivers one payload placement class for one adapter,
at one manifest placement (lifecycle position):

- `file`: a file in the sprite's workspace, written before the session starts,
  its path in an environment variable (side_channel_context at pre_session);
- `argv_flag`: a flag and the payload inserted after the program's name, when the
  command runs the adapter's program directly (`claude --append-system-prompt`);
- `prompt_prefix`: the payload prepended to the command's last argument, the
  prompt, when the command runs the adapter's program directly with one
  (`claude -p <prompt>`, `codex exec <prompt>`);
- `record`: nothing delivered, the payload receipt only (receipt_only).

The client's acceptable placements are alternatives in order: the first one
satisfiable is used (its route exists, the manifest claims its position, the
payload fits, the command has the needed shape). A skipped required or preferred
placement makes the payload receipt `degraded` with a warning naming why;
none satisfiable with a `required` one listed refuses (`placement_unavailable`,
or `payload_too_large` when size was each required route's only obstacle);
none satisfiable otherwise skips the payload. The body is never parsed; the
receipt keeps its id, kind, size and digest, never the body.
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from lattice_operator.lifeloop.classes import FailureClass
from lattice_operator.lifeloop.manifest import AdapterManifest
from lattice_operator.lifeloop.negotiation import Requirement
from lattice_operator.lifeloop.receipts import PayloadReceipt
from lattice_operator.lifeloop.vocabulary import (
    ManifestPlacement,
    PayloadPlacement,
    ReceiptStatus,
    SupportState,
)

RouteKind = Literal["file", "argv_flag", "prompt_prefix", "record"]


@dataclass(frozen=True)
class Route:
    """How one adapter delivers one payload placement class."""

    kind: RouteKind
    position: ManifestPlacement | None
    """The manifest placement the route depends on (None for `record`)."""
    max_bytes: int | None = None
    program: str | None = None
    """argv routes: the basename the command's program must have."""
    flag: str | None = None
    """argv_flag: the flag put before the payload."""


@dataclass(frozen=True)
class PlacementRequest:
    """One acceptable placement, at a requirement level."""

    placement: PayloadPlacement
    requirement: Requirement


@dataclass(frozen=True)
class Payload:
    """An opaque client payload: its body is carried, never interpreted."""

    payload_id: str
    payload_kind: str
    body: str
    acceptable_placements: tuple[PlacementRequest, ...]
    file_path: str
    """Where a `file` route writes it."""
    env_name: str
    """The variable a `file` route names the file in."""

    @property
    def byte_size(self) -> int:
        return len(self.body.encode())

    @property
    def content_digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.body.encode()).hexdigest()


@dataclass(frozen=True)
class Delivery:
    """What the exec gets: its argv, extra environment, and files written before it."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    files: Mapping[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class PlacementDecision:
    """Where one payload went, and the delivery with it."""

    payload_id: str
    placement: PayloadPlacement | None
    """The placement used (None: skipped or refused)."""
    receipt: PayloadReceipt
    delivery: Delivery
    failure_class: FailureClass | None = None
    warnings: tuple[str, ...] = ()
    message: str = ""
    """Why it was refused."""


def _obstacle(
    route: Route | None, manifest: AdapterManifest, payload: Payload, argv: tuple[str, ...]
) -> tuple[str, bool] | None:
    """Why `route` cannot deliver `payload` (and whether size is why), None when it can."""
    if route is None:
        return f"adapter {manifest.adapter_id} has no route for it", False
    if route.position is not None:
        claim = manifest.placement.get(route.position)
        if claim is None or claim.support is SupportState.UNAVAILABLE:
            return f"{route.position.value} is unavailable for {manifest.adapter_id}", False
    if route.max_bytes is not None and payload.byte_size > route.max_bytes:
        return f"{payload.byte_size} bytes exceed its limit of {route.max_bytes}", True
    if route.kind in ("argv_flag", "prompt_prefix"):
        program = posixpath.basename(argv[0]) if argv else ""
        if program != route.program:
            return f"the command does not run {route.program} directly (it runs {program})", False
        if route.kind == "prompt_prefix" and (len(argv) < 2 or argv[-1].startswith("-")):
            return f"the {route.program} command has no prompt as its last argument", False
    return None


def _deliver(route: Route, payload: Payload, argv: tuple[str, ...]) -> Delivery:
    if route.kind == "file":
        return Delivery(
            argv,
            env={payload.env_name: payload.file_path},
            files={payload.file_path: payload.body.encode()},
        )
    if route.kind == "argv_flag":
        assert route.flag is not None
        return Delivery((argv[0], route.flag, payload.body, *argv[1:]))
    if route.kind == "prompt_prefix":
        return Delivery((*argv[:-1], f"{payload.body}\n\n{argv[-1]}"))
    return Delivery(argv)


def place(
    manifest: AdapterManifest,
    routes: Mapping[PayloadPlacement, Route],
    payload: Payload,
    argv: tuple[str, ...],
) -> PlacementDecision:
    """The first satisfiable acceptable placement of `payload` for a command `argv`."""
    skipped: list[str] = []
    warn = False
    size_only_required = True
    any_required = False
    for request in payload.acceptable_placements:
        route = routes.get(request.placement)
        obstacle = _obstacle(route, manifest, payload, argv)
        if obstacle is None:
            assert route is not None
            status = ReceiptStatus.DEGRADED if warn else ReceiptStatus.DELIVERED
            warnings = (
                (
                    f"{payload.payload_id} placed in {request.placement.value}: "
                    + "; ".join(skipped),
                )
                if warn
                else ()
            )
            return PlacementDecision(
                payload.payload_id,
                request.placement,
                _receipt(payload, request.placement, status),
                _deliver(route, payload, argv),
                warnings=warnings,
            )
        why, size = obstacle
        skipped.append(f"{request.placement.value} ({request.requirement.value}) skipped: {why}")
        if request.requirement is not Requirement.OPTIONAL:
            warn = True
        if request.requirement is Requirement.REQUIRED:
            any_required = True
            size_only_required = size_only_required and size
    first = (
        payload.acceptable_placements[0].placement
        if payload.acceptable_placements
        else PayloadPlacement.RECEIPT_ONLY
    )
    detail = "; ".join(skipped) or "no acceptable placement listed"
    if any_required:
        failure = (
            FailureClass.PAYLOAD_TOO_LARGE
            if size_only_required
            else FailureClass.PLACEMENT_UNAVAILABLE
        )
        return PlacementDecision(
            payload.payload_id,
            None,
            _receipt(payload, first, ReceiptStatus.FAILED),
            Delivery(argv),
            failure_class=failure,
            message=f"payload {payload.payload_id} ({payload.payload_kind}) cannot be placed: "
            + detail,
        )
    status = ReceiptStatus.DEGRADED if warn else ReceiptStatus.SKIPPED
    return PlacementDecision(
        payload.payload_id,
        None,
        _receipt(payload, first, status),
        Delivery(argv),
        warnings=(f"{payload.payload_id} not placed: {detail}",) if warn else (),
    )


def _receipt(
    payload: Payload, placement: PayloadPlacement, status: ReceiptStatus
) -> PayloadReceipt:
    return PayloadReceipt(
        payload_id=payload.payload_id,
        payload_kind=payload.payload_kind,
        placement=placement,
        status=status,
        byte_size=payload.byte_size,
        content_digest=payload.content_digest,
    )


__all__ = [
    "Delivery",
    "Payload",
    "PlacementDecision",
    "PlacementRequest",
    "Route",
    "RouteKind",
    "place",
]
