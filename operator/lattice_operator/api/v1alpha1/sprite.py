"""The Sprite resource: a persistent sandbox at a Sprites backend."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StringConstraints, model_validator

from lattice_operator.api.v1alpha1._base import DNS_LABEL, ApiModel, ObjectMeta, cel, list_map
from lattice_operator.api.v1alpha1.conditions import CONDITIONS_LIST_SCHEMA, Condition

BackendStatus = Literal["cold", "warm", "running"]
UrlAuth = Literal["sprite", "public"]
RunPolicy = Literal["Any", "IntentOnly"]
DeletionPolicy = Literal["Delete", "Orphan"]
SpritePhase = Literal["Pending", "Ready", "NotReady", "Missing", "Deleting"]

DOMAIN_PATTERN = (
    r"^(\*|(\*\.)?[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?"
    r"(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*)$"
)
SpriteLabel = Annotated[
    str,
    StringConstraints(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$"),
]
Arg = Annotated[str, StringConstraints(max_length=4096)]


class NetworkRule(ApiModel):
    """One egress rule: a domain with an action, or an include of a preset."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            {
                "rule": "has(self.domain) != has(self.include)",
                "message": "exactly one of domain or include must be set",
            },
            {
                "rule": "!has(self.domain) || has(self.action)",
                "message": "action is required when domain is set",
                "fieldPath": ".action",
                "reason": "FieldValueRequired",
            },
        )
    )

    domain: str | None = Field(default=None, max_length=253, pattern=DOMAIN_PATTERN)
    """A host name, `*.suffix` wildcard, or `*`. Exact hosts beat wildcards beat `*`."""
    action: Literal["allow", "deny"] | None = None
    """allow or deny egress to the domain."""
    include: Literal["defaults"] | None = None
    """A preset rule list; `defaults` is the backend's list of common development domains."""

    @model_validator(mode="after")
    def _one_of(self) -> NetworkRule:
        if (self.domain is None) == (self.include is None):
            raise ValueError("exactly one of domain or include must be set")
        if self.domain is not None and self.action is None:
            raise ValueError("action is required when domain is set")
        return self


class NetworkPolicy(ApiModel):
    """A DNS-based egress allowlist. An empty rule list means unrestricted."""

    rules: list[NetworkRule] = Field(default_factory=list, max_length=256)
    """Ordered rules; the most specific matching domain decides."""


FORGE_DOMAINS = (
    "github.com",
    "*.github.com",
    "*.githubusercontent.com",
    "gitlab.com",
    "*.gitlab.com",
    "bitbucket.org",
    "*.bitbucket.org",
)
"""The forges' web, API and git endpoints: a sprite never pushes or calls a forge itself
(sprite-protocol-v1, hard rules); the operator does, with its own credential."""


def forge_deny_policy() -> NetworkPolicy:
    """Everything allowed but the forges (exact names beat `*.` wildcards, which beat `*`)."""
    rules = [NetworkRule(domain="*", action="allow")]
    rules += [NetworkRule(domain=d, action="deny") for d in FORGE_DOMAINS]
    return NetworkPolicy(rules=rules)


class SpriteService(ApiModel):
    """A supervised process the backend starts, restarts on crash, and keeps across wakes."""

    name: str = Field(min_length=1, max_length=63, pattern=DNS_LABEL)
    """Service name, unique within the sprite."""
    cmd: str = Field(min_length=1, max_length=4096)
    """The program to run."""
    args: list[Arg] = Field(default_factory=list, max_length=64)
    """Arguments to the program."""
    env: dict[str, Arg] = Field(default_factory=dict, max_length=64)
    """Extra environment variables."""
    dir: str | None = Field(default=None, max_length=4096)
    """Working directory."""
    http_port: int | None = Field(default=None, ge=1, le=65535)
    """The port that serves the sprite URL; at most one service may set it."""
    needs: list[Annotated[str, StringConstraints(max_length=63, pattern=DNS_LABEL)]] = Field(
        default_factory=list, max_length=16
    )
    """Services that must be started before this one."""


class CheckpointsSpec(ApiModel):
    """How the Sprite's checkpoints are kept."""

    retention: int | None = Field(default=None, ge=1, le=100)
    """Keep the newest N checkpoints taken through SpriteCheckpoint objects: older ones
    (their objects and backend checkpoints) are deleted, never one with deletionPolicy
    Retain nor one a Run took to resume from. Unset: all are kept."""


StepType = Literal[
    "runtime_install",
    "runtime_version_adjust",
    "dependency_manager_switch",
    "add_preinstall_step",
    "adjust_smoke_command",
    "add_system_package",
]
"""The adjustment types that become a step run in the sprite (enable_network_access changes
spec.networkPolicy instead; escalate_to_human runs nothing)."""


class EnvironmentStep(ApiModel):
    """One step of the Sprite's environment: a command every Run runs in the sprite before
    the agent's command, once per environment (a marker per environment digest)."""

    name: str = Field(min_length=1, max_length=253)
    """Unique within the environment: the environment_change Intent that added it."""
    type: StepType
    """The adjustment type it came from."""
    command: str = Field(min_length=1, max_length=4096)
    """A shell command (`sh -c`); it must exit 0, or the Run fails (EnvironmentFailed)."""
    details: dict[str, Arg] = Field(default_factory=dict, max_length=16)
    """What it installs or switches to (runtime, version, package, manager), as recorded."""


class SpriteSpec(ApiModel):
    """Desired state of a sprite at the backend."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            {
                "rule": "has(self.spriteName) == has(oldSelf.spriteName) && "
                "(!has(self.spriteName) || self.spriteName == oldSelf.spriteName)",
                "message": "spriteName is immutable",
                "fieldPath": ".spriteName",
            }
        )
    )

    sprite_name: str | None = Field(default=None, min_length=1, max_length=63, pattern=DNS_LABEL)
    """Name of the sprite at the backend. Defaults to `<namespace>-<name>`. Immutable."""
    url_auth: UrlAuth = "sprite"
    """Who may use the sprite's URL: `sprite` (organisation credentials) or `public`."""
    labels: list[SpriteLabel] = Field(default_factory=list, max_length=32)
    """Labels stored with the sprite at the backend."""
    network_policy: NetworkPolicy | None = None
    """Egress policy. Unset: the operator's default (`sprites.default_network_policy`: all
    egress allowed except the forges' web, API and git endpoints, which a sprite must never
    reach itself). Set: exactly these rules (`rules: []` is unrestricted)."""
    services: list[SpriteService] = Field(
        default_factory=list,
        max_length=32,
        json_schema_extra={
            **list_map("name"),
            **cel(
                {
                    "rule": "self.filter(s, has(s.httpPort)).size() <= 1",
                    "message": "at most one service may set httpPort",
                }
            ),
        },
    )
    """Services the backend supervises inside the sprite."""
    deletion_policy: DeletionPolicy = "Delete"
    """`Delete` removes the backend sprite with this object; `Orphan` leaves it."""
    adopt: bool = False
    """Adopt an existing backend sprite of the same name instead of failing."""
    recreate: bool = True
    """Recreate the backend sprite if it disappears; otherwise report Ready=False reason=Missing."""
    run_policy: RunPolicy = "Any"
    """Which Runs may execute here: `Any` (whoever may create Runs in the namespace, as with
    `pods/exec`) or `IntentOnly` (only Runs an Intent created, so every command went through
    policy and approval). Refused at admission and again by the operator before it starts one."""
    environment: list[EnvironmentStep] = Field(
        default_factory=list, max_length=64, json_schema_extra=list_map("name")
    )
    """Steps every Run on this Sprite runs before the agent's command, in order, once per
    environment (approved environment_change Intents append to it; people may edit it)."""
    keep_warm: bool | None = None
    """`true`: the operator keeps the backend sprite from going cold (a Run then starts without
    a cold start) by waking it with a light request every `backend.keep_warm_interval`
    seconds; the backend offers no setting for it. `false`: nothing keeps it warm, it goes
    cold when the backend decides. Unset: as `false`, and status carries no Warm condition."""
    checkpoints: CheckpointsSpec | None = None
    """Checkpoint retention (SpriteCheckpoint objects)."""

    @model_validator(mode="after")
    def _one_http_port(self) -> SpriteSpec:
        if sum(1 for s in self.services if s.http_port is not None) > 1:
            raise ValueError("at most one service may set httpPort")
        names = [s.name for s in self.services]
        if len(names) != len(set(names)):
            raise ValueError("service names must be unique")
        steps = [s.name for s in self.environment]
        if len(steps) != len(set(steps)):
            raise ValueError("environment step names must be unique")
        return self


class SpriteServiceStatus(ApiModel):
    """What the backend reports about one service."""

    name: str = Field(max_length=63)
    """Service name."""
    status: str = Field(default="unknown", max_length=32)
    """stopped, starting, running, stopping or failed."""
    restart_count: int = 0
    """How often the backend restarted it."""


CHECKPOINTS_SHOWN = 10
"""The newest checkpoints listed in a Sprite's status."""


class SpriteCheckpointEntry(ApiModel):
    """One backend checkpoint of the sprite, as the backend lists it."""

    id: str = Field(max_length=128)
    """The backend id (`v3`)."""
    create_time: datetime | None = None
    """When it was taken."""
    comment: str = Field(default="", max_length=1024)
    """Its comment."""
    object: str | None = Field(default=None, max_length=253)
    """The SpriteCheckpoint object that holds it (none: a Run's or the backend's own)."""


class SpriteStatus(ApiModel):
    """Observed state of the sprite."""

    observed_generation: int | None = None
    """The .metadata.generation last reconciled."""
    conditions: list[Condition] = Field(
        default_factory=list, max_length=16, json_schema_extra=CONDITIONS_LIST_SCHEMA
    )
    """Ready (the sprite exists and is usable), Synced (the spec is applied) and, with
    spec.keepWarm set, Warm (whether the backend state is the warmth asked for)."""
    phase: SpritePhase | None = None
    """A one-word summary derived from the conditions, for `kubectl get`."""
    sprite_name: str | None = Field(default=None, max_length=63)
    """The backend sprite's name."""
    sprite_id: str | None = Field(default=None, max_length=256)
    """The backend sprite's id."""
    url: str | None = Field(default=None, max_length=2048)
    """The sprite's URL."""
    backend_status: BackendStatus | None = None
    """cold, warm or running, as the backend last reported."""
    last_running_time: datetime | None = None
    """When the backend sprite last started running (woke), if the backend says."""
    last_warming_time: datetime | None = None
    """When the backend sprite last went warm (suspended), if the backend says. The backend
    does not say when it went cold."""
    last_seen_time: datetime | None = None
    """When the backend last listed (or returned) this sprite, to within the operator's
    `backend.last_seen_interval` (5 minutes by default)."""
    services: list[SpriteServiceStatus] = Field(default_factory=list, max_length=32)
    """Services as the backend reports them."""
    checkpoints: list[SpriteCheckpointEntry] = Field(
        default_factory=list, max_length=CHECKPOINTS_SHOWN
    )
    """The newest backend checkpoints (at most 10), newest first."""

    def to_patch(self) -> dict[str, Any]:
        """As ApiModel's, without `checkpoints`: the SpriteCheckpoint handler is its one
        writer, so a whole status computed from an older view never puts an old list back."""
        patch = super().to_patch()
        patch.pop("checkpoints", None)
        return patch


class Sprite(ApiModel):
    """A persistent sandbox at a Sprites backend: desired state in spec, observed in status."""

    api_version: Literal["lattice.dev/v1alpha1"] = "lattice.dev/v1alpha1"
    kind: Literal["Sprite"] = "Sprite"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: SpriteSpec
    status: SpriteStatus = Field(default_factory=SpriteStatus)

    def backend_name(self) -> str:
        """The name of the sprite at the backend."""
        if self.spec.sprite_name:
            return self.spec.sprite_name
        return f"{self.metadata.namespace}-{self.metadata.name}"[:63].rstrip("-")
