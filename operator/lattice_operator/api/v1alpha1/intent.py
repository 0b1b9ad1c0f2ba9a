"""The Intent resource: a governed action (propose → classify → gate → execute)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import ConfigDict, Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

from lattice_operator.api.v1alpha1._base import (
    LIST_SET,
    PRESERVE_UNKNOWN,
    ApiModel,
    LocalObjectReference,
    ObjectMeta,
    SecretKeyReference,
    cel,
    list_map,
)
from lattice_operator.api.v1alpha1.checkpoint_restore import CheckpointRestoreParams
from lattice_operator.api.v1alpha1.conditions import CONDITIONS_LIST_SCHEMA, Condition
from lattice_operator.api.v1alpha1.fileops import FileOpsRequest
from lattice_operator.api.v1alpha1.run import RunTemplate
from lattice_operator.api.v1alpha1.sprite import SpriteSpec

IntentKind = Literal[
    "issue_triage",
    "issue_plan_approve",
    "pr_create_from_plan",
    "pr_fixup_from_feedback",
    "sprite_create",
    "sprite_task_exec",
    "health_detect",
    "health_remediate",
    "fileops",
    "environment_change",
    "fly_machines",
    "checkpoint_restore",
]
INTENT_KINDS: tuple[str, ...] = get_args(IntentKind)

ActionName = Literal["OPEN_PR", "POST_COMMENT", "LABEL_ISSUE", "NOTIFY_USER", "FETCH_CREDENTIAL"]
IntentPhase = Literal[
    "Proposed",
    "Classified",
    "AwaitingApproval",
    "Approved",
    "Executing",
    "Waiting",
    "Succeeded",
    "Failed",
    "Rejected",
    "Canceled",
]
RiskClass = Literal["safe", "controlled", "dangerous"]

REPO_PATTERN = r"^[A-Za-z0-9][-A-Za-z0-9_.]*/[A-Za-z0-9][-A-Za-z0-9_.]*$"
BRANCH_PATTERN = r"^[A-Za-z0-9][-A-Za-z0-9_./]*$"
LongText = Annotated[str, StringConstraints(max_length=65536)]
ShortText = Annotated[str, StringConstraints(min_length=1, max_length=1024)]


class IssueTriageParams(ApiModel):
    """Triage a GitHub issue: ask clarifying questions or propose a plan."""

    repo: str = Field(max_length=256, pattern=REPO_PATTERN)
    """Repository as owner/name."""
    issue_number: int = Field(ge=1)
    """Issue number."""
    title: str | None = Field(default=None, max_length=1024)
    """Issue title, as seen when proposed."""
    body: LongText | None = None
    """Issue body, as seen when proposed."""
    base_branch: str = Field(default="main", max_length=255, pattern=BRANCH_PATTERN)
    """Branch a plan that comes out of the triage targets (a GitHubRepository sets its
    `baseBranch`)."""
    research: bool = False
    """The issue asks open questions (a GitHubRepository's `research` labels set it): the
    agent is told so (`research` in its context) and the notes it declares (ARTIFACT kind
    `notes`) are posted on the issue with their sources, then the plan it proposes."""
    run: RunTemplate | None = None
    """The agent that does the work (its Sprite and command); a GitHubRepository's rules
    fill it in. Without it the Intent waits with reason NoAgentConfigured."""


class TaskDraft(ApiModel):
    """An issue proposed by an agent, created on GitHub only once the plan is approved."""

    title: str = Field(min_length=1, max_length=256)
    """The issue's title."""
    body: str = Field(default="", max_length=16384)
    """Its body."""


class IssuePlanApproveParams(ApiModel):
    """Record approval of a plan proposed on an issue and begin execution."""

    repo: str = Field(max_length=256, pattern=REPO_PATTERN)
    """Repository as owner/name."""
    issue_number: int = Field(ge=1)
    """Issue number."""
    plan: LongText
    """The plan being approved."""
    tasks: list[TaskDraft] = Field(default_factory=list, max_length=30)
    """Issues drafted for approval (a project's epics and tasks): once approved they are
    created, and no pull request is started."""
    base_branch: str = Field(default="main", max_length=255, pattern=BRANCH_PATTERN)
    """Branch the pull request implementing it targets."""
    run: RunTemplate | None = None
    """The agent that does the work (its Sprite and command); a GitHubRepository's rules
    fill it in. Without it the Intent waits with reason NoAgentConfigured."""


Path = Annotated[str, StringConstraints(min_length=1, max_length=1024)]
Glob = Annotated[str, StringConstraints(min_length=1, max_length=256)]


class DocsCheck(ApiModel):
    """Loop 6, documentation upheld: the push to the default branch whose code the docs
    describe (a GitHubRepository's `docs` rules matched it)."""

    sha: str = Field(min_length=1, max_length=64)
    """The commit pushed."""
    changed: list[Path] = Field(default_factory=list, max_length=100)
    """The code paths it changed that a rule matched."""
    docs: list[Glob] = Field(min_length=1, max_length=16)
    """The docs that describe them (the rules' `docs` globs): one open lag issue per set."""


class PrCreateFromPlanParams(ApiModel):
    """Open a pull request implementing a plan."""

    repo: str = Field(max_length=256, pattern=REPO_PATTERN)
    """Repository as owner/name."""
    base_branch: str = Field(default="main", max_length=255, pattern=BRANCH_PATTERN)
    """Branch the PR targets."""
    head_branch: str | None = Field(default=None, max_length=255, pattern=BRANCH_PATTERN)
    """Branch to create; generated when unset."""
    plan: LongText
    """The plan to implement."""
    sprite_ref: LocalObjectReference | None = None
    """Sprite to work in."""
    issue_number: int | None = Field(default=None, ge=1)
    """The issue the plan came from (the pull request says it resolves it)."""
    docs: DocsCheck | None = None
    """Set for a docs update (loop 6): the agent is told what changed (`docs` in its
    context); lag it reports (ARTIFACT kind `docs_lag`) opens or comments one issue
    instead of a pull request."""
    run: RunTemplate | None = None
    """The agent that does the work (its Sprite and command); a GitHubRepository's rules
    fill it in. Without it the Intent waits with reason NoAgentConfigured."""


class PrFixupFromFeedbackParams(ApiModel):
    """Push follow-up commits to a pull request from review feedback."""

    repo: str = Field(max_length=256, pattern=REPO_PATTERN)
    """Repository as owner/name."""
    pr_number: int = Field(ge=1)
    """Pull request number."""
    feedback: LongText
    """The review comments to address."""
    sprite_ref: LocalObjectReference | None = None
    """Sprite to work in."""
    review_id: int | None = Field(default=None, ge=1)
    """The review that asked for it (its line comments are handed to the agent too)."""
    run: RunTemplate | None = None
    """The agent that does the work (its Sprite and command); a GitHubRepository's rules
    fill it in. Without it the Intent waits with reason NoAgentConfigured."""


class SpriteCreateParams(ApiModel):
    """Create a Sprite."""

    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    """Name of the Sprite object to create (same namespace)."""
    spec: SpriteSpec = Field(default_factory=SpriteSpec)
    """Its spec."""


class HealthDetectParams(ApiModel):
    """Detect an unhealthy condition."""

    check: str = Field(min_length=1, max_length=253)
    """Name of the check that fired."""
    signal: ShortText
    """What was observed."""
    severity: Literal["low", "medium", "high", "critical"] = "medium"
    """How bad it is."""
    sprite_ref: LocalObjectReference | None = None
    """The sprite concerned, if any."""
    probe: RunTemplate | None = None
    """The check to run (a HealthCheck's firing sets it): the Intent executes it as a Run,
    and the Run's outcome is the check's."""


class HealthRemediateParams(ApiModel):
    """Carry out a remediation for a detected condition."""

    detect_intent_ref: LocalObjectReference | None = None
    """The health_detect Intent this answers."""
    remediation: Literal["run_command", "recreate_sprite", "restart_service", "open_pr"]
    """What kind of remediation."""
    run: RunTemplate | None = None
    """For run_command: what to run; for open_pr: the agent that implements the plan."""
    service: str | None = Field(default=None, max_length=63)
    """For restart_service: which service."""
    sprite_ref: LocalObjectReference | None = None
    """The sprite concerned: recreate_sprite recreates it, restart_service restarts a
    service in it."""
    repo: str | None = Field(default=None, max_length=256, pattern=REPO_PATTERN)
    """For open_pr: the repository (owner/name) the pull request is opened on."""
    base_branch: str = Field(default="main", max_length=255, pattern=BRANCH_PATTERN)
    """For open_pr: the branch the pull request targets."""
    plan: LongText | None = None
    """For open_pr: what the pull request should do (the pr_create_from_plan Intent's plan)."""


class ObservedFailure(ApiModel):
    """The failure a sprite observed (ENVIRONMENT_PROPOSAL)."""

    model_config = ConfigDict(alias_generator=None)

    phase: str = Field(max_length=253)
    """Phase in which it failed."""
    exit_code: int | None = None
    """Exit code seen."""
    stderr_hint: str | None = Field(default=None, max_length=4096)
    """A telling line of stderr."""


class SuggestedAdjustment(ApiModel):
    """The change a sprite proposes (ENVIRONMENT_PROPOSAL)."""

    type: Literal[
        "runtime_install",
        "runtime_version_adjust",
        "dependency_manager_switch",
        "add_preinstall_step",
        "adjust_smoke_command",
        "add_system_package",
        "enable_network_access",
        "escalate_to_human",
    ]
    """Adjustment type."""
    details: dict[str, Any] = Field(default_factory=dict, json_schema_extra=PRESERVE_UNKNOWN)
    """Type-specific details."""


class EnvironmentChangeParams(ApiModel):
    """An environment change proposed by a sprite; applied only through this pipeline."""

    run_ref: LocalObjectReference | None = None
    """The Run whose sprite proposed it."""
    sprite_ref: LocalObjectReference | None = None
    """The sprite concerned."""
    observed_failure: ObservedFailure
    """What failed."""
    suggested_adjustment: SuggestedAdjustment
    """What to change."""
    confidence: float = Field(ge=0.0, le=1.0)
    """The sprite's confidence, 0 to 1."""
    evidence: list[ShortText] = Field(default_factory=list, max_length=32)
    """Why the sprite believes it."""
    scope: Literal["repo_specific", "global_candidate"]
    """Whether the change is for this repo only or a candidate for all."""


FLY_APP_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
FLY_MACHINE_ID_PATTERN = r"^[a-z0-9]{1,32}$"


class FlyGuestSpec(ApiModel):
    """The size of a Fly machine."""

    cpu_kind: Literal["shared", "performance"] = "shared"
    """shared or performance CPUs."""
    cpus: int = Field(default=1, ge=1, le=16)
    """How many CPUs."""
    memory_mb: int = Field(default=256, ge=256, le=131072)
    """Memory in MiB."""


class FlyMachineSpec(ApiModel):
    """A Fly machine to create."""

    image: str = Field(min_length=1, max_length=512)
    """The OCI image it runs."""
    name: str | None = Field(
        default=None, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9_]*[a-z0-9])?$"
    )
    """Its name in the app (default: the Intent's name); a create finds a machine of this
    name that the same Intent made instead of making a second one."""
    region: str | None = Field(default=None, max_length=3, pattern=r"^[a-z]{3}$")
    """Fly region code (default: the app's)."""
    env: dict[str, Annotated[str, StringConstraints(max_length=4096)]] = Field(
        default_factory=dict, max_length=64
    )
    """Environment variables (visible to whoever reads the Intent: no secrets here)."""
    guest: FlyGuestSpec | None = None
    """Its size (default: Fly's smallest shared machine)."""


class FlyMachinesParams(ApiModel):
    """A deployment hook on Fly: create, start or stop a machine of an app."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            {
                "rule": "self.action != 'create' || (has(self.machine) && !has(self.machineId))",
                "message": "action create takes machine (what to make), not machineId",
                "fieldPath": ".machine",
            },
            {
                "rule": "self.action == 'create' || (has(self.machineId) && !has(self.machine))",
                "message": "actions start and stop take machineId, not machine",
                "fieldPath": ".machineId",
            },
        )
    )

    app: str = Field(min_length=1, max_length=63, pattern=FLY_APP_PATTERN)
    """The Fly app."""
    action: Literal["create", "start", "stop"]
    """What to do."""
    machine_id: str | None = Field(default=None, max_length=32, pattern=FLY_MACHINE_ID_PATTERN)
    """For start and stop: the machine."""
    machine: FlyMachineSpec | None = None
    """For create: the machine to make."""
    wait_seconds: int = Field(default=60, ge=0, le=60)
    """Seconds to wait for the machine to reach the state the action leads to (started,
    stopped); 0: do not wait."""

    @model_validator(mode="after")
    def _fits_the_action(self) -> FlyMachinesParams:
        if self.action == "create" and (self.machine is None or self.machine_id is not None):
            raise ValueError("action create takes machine (what to make), not machineId")
        if self.action != "create" and (self.machine_id is None or self.machine is not None):
            raise ValueError("actions start and stop take machineId, not machine")
        return self


class IntentParams(ApiModel):
    """Typed parameters: exactly the member named after the Intent's kind is set."""

    issue_triage: IssueTriageParams | None = None
    issue_plan_approve: IssuePlanApproveParams | None = None
    pr_create_from_plan: PrCreateFromPlanParams | None = None
    pr_fixup_from_feedback: PrFixupFromFeedbackParams | None = None
    sprite_create: SpriteCreateParams | None = None
    sprite_task_exec: RunTemplate | None = None
    health_detect: HealthDetectParams | None = None
    health_remediate: HealthRemediateParams | None = None
    fileops: FileOpsRequest | None = None
    environment_change: EnvironmentChangeParams | None = None
    fly_machines: FlyMachinesParams | None = None
    checkpoint_restore: CheckpointRestoreParams | None = None


def params_field(kind: str) -> str:
    """The wire name of the params member for an Intent kind."""
    return to_camel(kind)


def _params_match_kind_rules() -> list[dict[str, str]]:
    rules = [
        {
            "rule": "self.kind != 'fileops' || "
            "(has(self.subject) && self.subject.type == 'sprite')",
            "message": "a fileops Intent names the Sprite it works in: "
            "subject {type: sprite, ref: NAME}",
            "fieldPath": ".subject",
        }
    ]
    for kind in INTENT_KINDS:
        member = params_field(kind)
        rules.append(
            {
                "rule": f"(self.kind == '{kind}') == has(self.params.{member})",
                "message": f"params.{member} must be set when kind is {kind}, and only then",
                "fieldPath": f".params.{member}",
            }
        )
    return rules


class Subject(ApiModel):
    """What the Intent is about."""

    type: Literal["issue", "pull_request", "repository", "sprite", "run", "health_check", "file"]
    """Kind of subject."""
    ref: str = Field(min_length=1, max_length=1024)
    """Identifier: a URL, owner/name#number, or an object name."""


class ProposedBy(ApiModel):
    """Who or what proposed the Intent."""

    type: Literal["user", "webhook", "cron", "system", "sprite"]
    """The kind of proposer."""
    name: str | None = Field(default=None, max_length=253)
    """Its name (user name, webhook source, cron job, sprite)."""


class PlanStep(ApiModel):
    """One step of a structured plan."""

    id: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    """Step id, unique in the plan."""
    title: str = Field(min_length=1, max_length=256)
    """Short title."""
    description: str | None = Field(default=None, max_length=4096)
    """What the step does."""


class Plan(ApiModel):
    """A structured plan of steps."""

    steps: list[PlanStep] = Field(
        default_factory=list,
        max_length=64,
        json_schema_extra=list_map("id"),
    )
    """Ordered steps."""


class CredentialGrant(ApiModel):
    """A Secret key a sprite may FETCH, under a name it asks for."""

    name: str = Field(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9][-A-Za-z0-9_.]*$")
    """The name the sprite uses in FETCH_CREDENTIAL."""
    secret_key_ref: SecretKeyReference
    """Where the value lives."""


class IntentResume(ApiModel):
    """Inputs for the Run the Intent waits on."""

    checkpoint_id: str = Field(max_length=256, pattern=r"^[A-Za-z0-9][-A-Za-z0-9_.]*$")
    """The checkpoint the Run's WAITING named."""
    inputs: dict[str, Any] = Field(
        default_factory=dict, max_length=64, json_schema_extra=PRESERVE_UNKNOWN
    )
    """Values for the WAITING's expected inputs."""


class IntentSpec(ApiModel):
    """Desired state of an Intent: what is proposed, and what the sprite doing it is granted."""

    model_config = ConfigDict(json_schema_extra=cel(*_params_match_kind_rules()))

    kind: IntentKind
    """What kind of action."""
    params: IntentParams
    """Typed parameters for the kind."""
    summary: str | None = Field(default=None, max_length=1024)
    """One line for humans."""
    subject: Subject | None = None
    """What the Intent is about."""
    proposed_by: ProposedBy = Field(default_factory=lambda: ProposedBy(type="user"))
    """Who proposed it."""
    plan: Plan | None = None
    """A structured plan of steps."""
    allowed_actions: list[ActionName] = Field(
        default_factory=list, max_length=5, json_schema_extra=LIST_SET
    )
    """ACTION_REQUEST actions the sprite may ask for. Nothing is granted by default."""
    credentials: list[CredentialGrant] = Field(
        default_factory=list,
        max_length=16,
        json_schema_extra=list_map("name"),
    )
    """Credentials the sprite may FETCH. Nothing is granted by default."""
    cancel: bool = False
    """Set to true to cancel the Intent and its Run."""
    resume: IntentResume | None = None
    """Resume the Intent's Waiting Run (forwarded to the Run's spec.resume)."""

    @model_validator(mode="after")
    def _params_match_kind(self) -> IntentSpec:
        set_members = [k for k in INTENT_KINDS if getattr(self.params, k) is not None]
        if set_members != [self.kind]:
            member = params_field(self.kind)
            raise ValueError(f"params.{member} must be set when kind is {self.kind}, and only then")
        if self.kind == "fileops" and (self.subject is None or self.subject.type != "sprite"):
            raise ValueError(
                "a fileops Intent names the Sprite it works in: subject {type: sprite, ref: NAME}"
            )
        return self

    def kind_params(self) -> ApiModel:
        """The params member for this Intent's kind."""
        value = getattr(self.params, self.kind)
        assert isinstance(value, ApiModel)
        return value


class AuditEntry(ApiModel):
    """One phase transition."""

    from_phase: str | None = Field(default=None, alias="from", max_length=32)
    """Phase before."""
    to_phase: str = Field(alias="to", max_length=32)
    """Phase after."""
    time: datetime
    """When."""
    actor: str = Field(max_length=512)
    """Who caused it (a user as authenticated, or the operator)."""
    reason: str = Field(default="", max_length=1024)
    """Why."""


class Classification(ApiModel):
    """How policy classified the Intent."""

    risk: RiskClass
    """safe, controlled or dangerous."""
    outcome: Literal["allow", "require_approval", "deny"]
    """What the gate decided."""
    approvers_required: int = Field(default=0, ge=0, le=10)
    """How many distinct approvals are needed."""
    policy: str | None = Field(default=None, max_length=253)
    """The IntentPolicy that decided, if any."""
    rule: str | None = Field(default=None, max_length=253)
    """The rule that decided, or `default`."""


class ApprovalRecord(ApiModel):
    """An approval or rejection, with the identity the API server authenticated."""

    user: str = Field(max_length=512)
    """The approver's user name, as authenticated by the API server (never as claimed)."""
    uid: str | None = Field(default=None, max_length=512)
    """The approver's user uid, if the authenticator gives one."""
    decision: Literal["approve", "reject"]
    """approve or reject."""
    reason: str = Field(default="", max_length=1024)
    """Why, in the approver's words."""
    time: datetime
    """When the API server admitted it."""
    spec_digest: str | None = Field(default=None, max_length=80)
    """sha256 of the spec (without cancel and resume) the decision was made on. Only
    decisions on the current spec count: an edit after an approval resets it."""
    forge_user: str | None = Field(default=None, max_length=128)
    """For a decision made on GitHub: the GitHub login that made it (`user` is the
    Kubernetes identity it is mapped to, checked like `lattice approve`)."""
    forge_ref: str | None = Field(default=None, max_length=256)
    """Where it was made: the comment's URL or the label event (one record per comment)."""


class IntentWaiting(ApiModel):
    """The Run's WAITING, shown on the Intent."""

    reason: str = Field(max_length=512)
    """Why the Run waits."""
    checkpoint_id: str = Field(max_length=256)
    """The checkpoint to resume from (name it in spec.resume)."""
    expected_inputs: dict[str, Annotated[str, StringConstraints(max_length=64)]] = Field(
        default_factory=dict, max_length=64
    )
    """The inputs the Run expects, with their protocol types."""


class QueuedAction(ApiModel):
    """An action a sprite asked for that waits for a capability (a forge) to carry it out."""

    request_id: str = Field(max_length=32)
    """The request, as the Run's status names it."""
    action: str = Field(max_length=32)
    """OPEN_PR, POST_COMMENT or LABEL_ISSUE."""
    state: Literal["pending"] = "pending"
    """pending until the forge integration carries it out."""
    blocking: bool = False
    """Whether the sprite waits for it."""


class ForgePullRequestRef(ApiModel):
    """A pull request on the forge."""

    number: int = Field(ge=1)
    """Its number."""
    url: str = Field(default="", max_length=1024)
    """Its web address."""


class ForgeStatus(ApiModel):
    """What an Intent did on the forge: the workspace it handed the sprite, what it pushed,
    the pull request, the Intents it started. Each write carries an idempotency key, so a
    retried pass finds it instead of doing it again."""

    repo: str = Field(max_length=256)
    """owner/name."""
    base_branch: str | None = Field(default=None, max_length=255)
    """The branch the sprite's workspace was made from."""
    base_sha: str | None = Field(default=None, max_length=64)
    """The commit the sprite was given: its branch must descend from it."""
    head_branch: str | None = Field(default=None, max_length=255)
    """The branch the sprite works on (what OPEN_PR's `head` must name)."""
    prepared_at: datetime | None = None
    """When the workspace was written into the sprite."""
    pushed_sha: str | None = Field(default=None, max_length=64)
    """The last commit pushed from the sprite's branch."""
    pull_request: ForgePullRequestRef | None = None
    """The pull request opened or updated."""
    followup: str | None = Field(default=None, max_length=253)
    """The Intent this one started (an approved plan's pr_create_from_plan)."""
    issues: list[int] = Field(default_factory=list, max_length=30)
    """The issues it created (an approved plan's drafted tasks)."""
    finished: bool = False
    """The forge side of the Intent is done (pushed, commented)."""
    problem: str | None = Field(default=None, max_length=1024)
    """Why the forge side waits or failed (the last error, with its class)."""
    retry_at: datetime | None = None
    """After a forge error: when the step is tried again."""
    attempts: int = Field(default=0, ge=0, le=1000)
    """Forge steps attempted (bounded retries)."""


class IntentResult(ApiModel):
    """What the execution produced."""

    status: Literal["success", "failure", "canceled"]
    """The outcome."""
    summary: str = Field(default="", max_length=1024)
    """A human summary (the sprite's COMPLETED summary, or why it failed)."""
    artifacts: list[Annotated[str, StringConstraints(max_length=1024)]] = Field(
        default_factory=list, max_length=32
    )
    """The artifacts the Run declared (kind: ref or url)."""


class FileOpsStatus(ApiModel):
    """A fileops Intent's execution: attempts, and the FileOpsRES once it is there."""

    attempts: int = Field(default=0, ge=0, le=100)
    """Executions started (an operator that stopped mid-way leaves one counted)."""
    started_at: datetime | None = None
    """When the last attempt started."""
    finished_at: datetime | None = None
    """When the response was recorded."""
    response: dict[str, Any] | None = Field(default=None, json_schema_extra=PRESERVE_UNKNOWN)
    """The FileOpsRES (bounded: long contents and outputs are kept in the sprite under
    /workspace/.lattice/fileops/<id>/ and referenced here)."""


class FlyStatus(ApiModel):
    """A fly_machines Intent's execution on Fly."""

    app: str = Field(max_length=63)
    """The Fly app."""
    action: str = Field(max_length=16)
    """create, start or stop."""
    machine_id: str | None = Field(default=None, max_length=64)
    """The machine acted on (for a create: the one made)."""
    state: str | None = Field(default=None, max_length=32)
    """The machine's state when the action ended."""
    attempts: int = Field(default=0, ge=0, le=100)
    """Executions started (an operator that stopped mid-way leaves one counted)."""
    finished: bool = False
    """The action ended (its outcome is in status.result)."""


class IntentStatus(ApiModel):
    """Observed state of the Intent."""

    observed_generation: int | None = None
    """The .metadata.generation last reconciled."""
    conditions: list[Condition] = Field(
        default_factory=list, max_length=16, json_schema_extra=CONDITIONS_LIST_SCHEMA
    )
    """Classified, Approved, Succeeded."""
    phase: IntentPhase | None = None
    """A one-word summary derived from the conditions, for `kubectl get`."""
    classification: Classification | None = None
    """The policy decision."""
    audit_log: list[AuditEntry] = Field(default_factory=list, max_length=64)
    """Phase transitions, oldest first (bounded: the oldest are dropped beyond 64)."""
    run_ref: LocalObjectReference | None = None
    """The Run executing this Intent."""
    sprite_ref: LocalObjectReference | None = None
    """The Sprite a sprite_create Intent created."""
    approvals: list[ApprovalRecord] = Field(default_factory=list, max_length=20)
    """Approvals and rejections, as the admission webhook recorded them."""
    awaiting_since: datetime | None = None
    """When the Intent started waiting for approval."""
    waiting: IntentWaiting | None = None
    """The Run's WAITING, while it waits."""
    actions: list[QueuedAction] = Field(default_factory=list, max_length=32)
    """Actions queued for a capability that is not configured yet."""
    proposals: list[Annotated[str, StringConstraints(max_length=253)]] = Field(
        default_factory=list, max_length=32
    )
    """environment_change Intents created from the Run's ENVIRONMENT_PROPOSALs."""
    result: IntentResult | None = None
    """The outcome, once the Intent ended."""
    fileops: FileOpsStatus | None = None
    """A fileops Intent's execution and response."""
    forge: ForgeStatus | None = None
    """A GitHub Intent's workspace, pushes, pull request."""
    fly: FlyStatus | None = None
    """A fly_machines Intent's machine and attempts."""


class Intent(ApiModel):
    """A governed action: why work happens, and who allowed it."""

    api_version: Literal["lattice.dev/v1alpha1"] = "lattice.dev/v1alpha1"
    kind: Literal["Intent"] = "Intent"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: IntentSpec
    status: IntentStatus = Field(default_factory=IntentStatus)


FROZEN_PHASES: tuple[str, ...] = ("Approved", "Executing", "Waiting", "Succeeded", "Failed")
"""From approval on, the spec is frozen (cancellation and resume stay possible)."""
UNFROZEN_FIELDS = frozenset({"cancel", "resume"})


def frozen_spec_rule() -> dict[str, str]:
    """The CEL rule (on the whole object) that refuses spec changes after approval."""
    required = {name for name, f in IntentSpec.model_fields.items() if f.is_required()}
    checks = []
    for name, field_info in IntentSpec.model_fields.items():
        if name in UNFROZEN_FIELDS:
            continue
        wire = field_info.alias or to_camel(name)
        if name in required:
            checks.append(f"self.spec.{wire} == oldSelf.spec.{wire}")
        else:
            checks.append(
                f"(has(self.spec.{wire}) == has(oldSelf.spec.{wire}) && "
                f"(!has(self.spec.{wire}) || self.spec.{wire} == oldSelf.spec.{wire}))"
            )
    phases = ", ".join(f"'{p}'" for p in FROZEN_PHASES)
    return {
        "rule": "!has(oldSelf.status) || !has(oldSelf.status.phase) || "
        f"!(oldSelf.status.phase in [{phases}]) || ({' && '.join(checks)})",
        "message": "the spec is frozen once the Intent is approved: "
        "only spec.cancel and spec.resume may change",
        "reason": "FieldValueForbidden",
        "fieldPath": ".spec",
    }
