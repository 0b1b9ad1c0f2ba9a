"""The manifest registry ("Manifest registry"): every adapter with shipped support, by
`adapter_id`, with the routes its placement claims rest on.

What an agent's manifest says is what the operator can do for that agent running
in a sprite, never what the agent can do elsewhere. Every agent is started the same
way, by the operator's exec with the command wrapper (`launcher_wrapper`), so its
lifecycle events, receipts, identity and failure modes are those of the `sprites`
adapter (the same mapping produces them); context pressure and compaction are not
observed (no hook of the agent is installed). They differ in where a payload can go:

- every agent: a file in the workspace, written before the session, named by an
  environment variable (side_channel_context, manifest `pre_session`), and
  receipt_only;
- `claude` (v1 conformance): also `--append-system-prompt <payload>` after the
  program (developer_equivalent_frame, `pre_session`) and the payload prepended
  to the prompt of `claude -p <prompt>` (pre_prompt_frame, `pre_frame_leading`);
- `codex` (v1 conformance): also the payload prepended to the prompt of
  `codex exec <prompt>` (pre_prompt_frame, `pre_frame_leading`); no
  developer-equivalent route;
- `gemini`, `hermes`, `openclaw`, `opencode` (pre-conformance): the file only.

The `sprites` adapter (plain Runs) delivers no client payloads. Adapters here import
nothing of any client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, get_args

from lattice_operator.lifeloop.classes import FailureClass
from lattice_operator.lifeloop.errors import LifeloopError
from lattice_operator.lifeloop.manifest import (
    SPRITES_MANIFEST,
    AdapterManifest,
    CapabilityClaim,
    PlacementClaim,
    validate_manifest,
)
from lattice_operator.lifeloop.placement import Route
from lattice_operator.lifeloop.vocabulary import ManifestPlacement, PayloadPlacement, SupportState

AgentAdapterId = Literal["claude", "codex", "gemini", "hermes", "openclaw", "opencode"]
"""The adapters a Run can name as its agent."""

FILE_MAX_BYTES = 65536
"""A workspace file route's limit (the largest payload a Run's spec can carry)."""
ARGV_MAX_BYTES = 32768
"""An argv route's limit (one argument, well below the kernel's 128 KiB)."""


class Conformance(StrEnum):
    """How far a manifest's claims are verified."""

    LATTICE = "lattice"
    """The operator's own adapter; every claim paired with a test."""
    V1 = "v1"
    """A v1 conformance adapter: every claim paired with a test of its code path."""
    PRE_CONFORMANCE = "pre_conformance"
    """Initial claims, not verified end to end against the agent."""


@dataclass(frozen=True)
class RegisteredAdapter:
    """One adapter: its manifest, how verified it is, and its placement routes."""

    manifest: AdapterManifest
    conformance: Conformance
    routes: Mapping[PayloadPlacement, Route]


class UnknownAdapter(LifeloopError):
    """No adapter with that id is registered."""


_FILE = Route("file", ManifestPlacement.PRE_SESSION, max_bytes=FILE_MAX_BYTES)
_RECORD = Route("record", None)
_COMMON_ROUTES = {
    PayloadPlacement.SIDE_CHANNEL_CONTEXT: _FILE,
    PayloadPlacement.RECEIPT_ONLY: _RECORD,
}
_AGENT_FAILURE_MODES = [
    *SPRITES_MANIFEST.failure_modes,
    FailureClass.CAPABILITY_UNSUPPORTED,
    FailureClass.PLACEMENT_UNAVAILABLE,
]


def _agent(
    adapter_id: str,
    display_name: str,
    routes: Mapping[PayloadPlacement, Route],
) -> AdapterManifest:
    """An agent run by the operator's launcher wrapper: the sprites adapter's lifecycle
    claims, and placement claimed exactly where a route delivers."""
    positions: dict[ManifestPlacement, int | None] = {}
    for route in routes.values():
        if route.position is not None:
            current = positions.get(route.position)
            limit = route.max_bytes
            positions[route.position] = max(current or 0, limit or 0) or None
    placement = {
        p: (
            PlacementClaim(support=SupportState.SYNTHESIZED, max_bytes=positions[p])
            if p in positions
            else PlacementClaim(support=SupportState.UNAVAILABLE)
        )
        for p in ManifestPlacement
    }
    return validate_manifest(
        SPRITES_MANIFEST.model_copy(
            update={
                "adapter_id": adapter_id,
                "display_name": f"{display_name} in a Lattice sprite",
                "placement": placement,
                "context_pressure": CapabilityClaim(
                    support=SupportState.UNAVAILABLE,
                    evidence=f"no {display_name} hook is installed; the sprite protocol carries "
                    "no context-pressure signal",
                ),
                "failure_modes": _AGENT_FAILURE_MODES,
            }
        )
    )


def _entry(
    adapter_id: str,
    display_name: str,
    conformance: Conformance,
    extra: Mapping[PayloadPlacement, Route] | None = None,
) -> RegisteredAdapter:
    routes = {**_COMMON_ROUTES, **(extra or {})}
    return RegisteredAdapter(_agent(adapter_id, display_name, routes), conformance, routes)


def _prompt(program: str) -> Route:
    return Route(
        "prompt_prefix", ManifestPlacement.PRE_FRAME_LEADING, ARGV_MAX_BYTES, program=program
    )


REGISTRY: Mapping[str, RegisteredAdapter] = {
    "sprites": RegisteredAdapter(SPRITES_MANIFEST, Conformance.LATTICE, {}),
    "claude": _entry(
        "claude",
        "Claude Code",
        Conformance.V1,
        {
            PayloadPlacement.DEVELOPER_EQUIVALENT_FRAME: Route(
                "argv_flag",
                ManifestPlacement.PRE_SESSION,
                ARGV_MAX_BYTES,
                program="claude",
                flag="--append-system-prompt",
            ),
            PayloadPlacement.PRE_PROMPT_FRAME: _prompt("claude"),
        },
    ),
    "codex": _entry(
        "codex", "Codex", Conformance.V1, {PayloadPlacement.PRE_PROMPT_FRAME: _prompt("codex")}
    ),
    "gemini": _entry("gemini", "Gemini CLI", Conformance.PRE_CONFORMANCE),
    "hermes": _entry("hermes", "Hermes", Conformance.PRE_CONFORMANCE),
    "openclaw": _entry("openclaw", "OpenClaw", Conformance.PRE_CONFORMANCE),
    "opencode": _entry("opencode", "OpenCode", Conformance.PRE_CONFORMANCE),
}
"""Every registered adapter, by adapter_id."""

AGENT_ADAPTERS: tuple[str, ...] = get_args(AgentAdapterId)


def lookup(adapter_id: str) -> RegisteredAdapter:
    """The registered adapter `adapter_id` (`UnknownAdapter` when there is none)."""
    entry = REGISTRY.get(adapter_id)
    if entry is None:
        raise UnknownAdapter(
            f"unknown adapter {adapter_id!r} (registered: {', '.join(sorted(REGISTRY))})"
        )
    return entry


__all__ = [
    "AGENT_ADAPTERS",
    "ARGV_MAX_BYTES",
    "FILE_MAX_BYTES",
    "REGISTRY",
    "AgentAdapterId",
    "Conformance",
    "RegisteredAdapter",
    "UnknownAdapter",
    "lookup",
]
