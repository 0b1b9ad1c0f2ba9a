"""Folding committed events into a bounded Run status.

`RunEventsStatus` is the part of a Run's status that comes from the sprite's
events. It is an `ApiModel` with a structural schema (the Run CRD embeds
it), and it stays under a byte budget (64 KiB by default) for any stream:
lists are capped rings with a total count beside them, strings are clipped,
free-form maps are kept only when small, and `snapshot()` trims the oldest
entries further if a hostile stream still pushes it over the budget.

Two ways in, one implementation:

- `reduce(status, event) -> status` and `fold(events, status)` are pure
  (the input status is never modified);
- `Projector` is the same reducer holding its state between events, which
  the engine uses so that a million events cost a million cheap updates and
  one snapshot, not a million model copies. `Projector(status)` continues
  from any earlier snapshot exactly as `reduce` would. `apply_run` folds a
  run of events at once: the INFO events (most of a stream) only change the
  counts, the recent ring and the progress, which are computed for the run
  inside C loops; the other events go through `apply`'s handlers, in order.

A `PHASE_FINISHED` with `success: false` is a failed phase. Action requests
are recorded as Pending; the operator resolves them later with
`resolve_action_request` (pure, on a status) or the engine's method of the
same name.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from datetime import datetime
from itertools import compress, repeat
from operator import is_, is_not, itemgetter, methodcaller
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from lattice_operator.modeling import PRESERVE_UNKNOWN, ApiModel
from lattice_operator.protocol.errors import UnknownActionRequestError
from lattice_operator.protocol.merge import CommittedEvent
from lattice_operator.protocol.models import ActionName, AdjustmentType, EventType
from lattice_operator.protocol.parse import compact_size
from lattice_operator.protocol.violations import Violation
from lattice_operator.text import clip

STATUS_BUDGET_BYTES = 64 * 1024
"""The projection never serialises (camelCase JSON) larger than this."""

MAX_PHASES = 32
MAX_ARTIFACTS = 32
MAX_ACTION_REQUESTS = 32
MAX_ERRORS = 10
MAX_PROPOSALS = 10
MAX_RECENT = 20
MAX_VIOLATIONS = 20
MAX_MAP_BYTES = 1024
"""Free-form maps (error details, proposal details) larger than this are left out."""
MAX_PARAMETERS_BYTES = 2048
"""Action parameters larger than this are left out (the event stays in the outbox)."""

NAME_CHARS = 64
MESSAGE_CHARS = 256
SUMMARY_CHARS = 160

_Name = Annotated[str, StringConstraints(max_length=NAME_CHARS)]
_Message = Annotated[str, StringConstraints(max_length=MESSAGE_CHARS)]

RunEventsState = Literal["Active", "Waiting", "Completed"]
PhaseState = Literal["Running", "Succeeded", "Failed"]
RequestState = Literal["Pending", "Answered", "Refused"]


class PhaseStatus(ApiModel):
    """One phase the sprite announced."""

    name: str = Field(max_length=NAME_CHARS)
    """The phase name."""
    state: PhaseState
    """Running until PHASE_FINISHED; then Succeeded or Failed."""
    success: bool | None = None
    """PHASE_FINISHED's success (None while running)."""
    started_at: datetime | None = None
    """Timestamp of the last PHASE_STARTED."""
    finished_at: datetime | None = None
    """Timestamp of PHASE_FINISHED."""
    starts: int = Field(default=1, ge=0)
    """How many times the phase was started."""
    session: int = Field(default=1, ge=1)
    """The session of the last change."""


class ProgressStatus(ApiModel):
    """The last INFO of kind progress."""

    percent: float | None = Field(default=None, ge=0, le=100)
    """metadata.percent of the last progress INFO that carried one (0-100)."""
    message: str = Field(default="", max_length=MESSAGE_CHARS)
    """Its message."""
    phase: str | None = Field(default=None, max_length=NAME_CHARS)
    """metadata.phase, when given."""
    updated_at: datetime
    """The event's timestamp."""
    line: int = Field(ge=0)
    """The event's outbox line."""


class ArtifactStatus(ApiModel):
    """A declared work product."""

    line: int = Field(ge=0)
    """The event's outbox line."""
    session: int = Field(ge=1)
    """The session that declared it."""
    kind: str = Field(max_length=NAME_CHARS)
    """branch, commit, file, pr_url, issue_url, ..."""
    ref: str | None = Field(default=None, max_length=MESSAGE_CHARS)
    """Branch, SHA, path or PR number."""
    url: str | None = Field(default=None, max_length=1024)
    """URL, if any."""
    at: datetime
    """The event's timestamp."""


class ActionRequestStatus(ApiModel):
    """An ACTION_REQUEST and what became of it."""

    request_id: str = Field(max_length=32)
    """`req-<line>`: stable, derived from the outbox position."""
    line: int = Field(ge=0)
    """The event's outbox line."""
    offset: int | None = Field(default=None, ge=0)
    """Byte offset of the event in the session's outbox (to re-read omitted parameters)."""
    digest: str = Field(max_length=80)
    """Digest of the event's line."""
    session: int = Field(ge=1)
    """The session that asked."""
    action: ActionName
    """What is asked."""
    blocking: bool
    """Whether the sprite waits for the result."""
    state: RequestState = "Pending"
    """Pending until the operator answers or refuses it."""
    parameters: dict[str, Any] | None = Field(default=None, json_schema_extra=PRESERVE_UNKNOWN)
    """The parameters, unless larger than 2 KiB."""
    parameters_omitted: bool = False
    """The parameters were too large to keep here; read the outbox line."""
    requested_at: datetime
    """The event's timestamp."""
    resolved_at: datetime | None = None
    """When the operator answered or refused it."""
    message: str | None = Field(default=None, max_length=MESSAGE_CHARS)
    """The operator's note on the outcome."""


class WaitingStatus(ApiModel):
    """The WAITING the Run is paused on."""

    line: int = Field(ge=0)
    """The event's outbox line."""
    session: int = Field(ge=1)
    """The session that paused."""
    reason: str = Field(max_length=512)
    """Why the sprite waits."""
    checkpoint_id: str = Field(max_length=256)
    """The checkpoint to restore on resume."""
    expected_inputs: dict[str, _Name] = Field(default_factory=dict, max_length=64)
    """Name → type of each input the resume must carry."""
    request_id: str | None = Field(default=None, max_length=32)
    """The blocking action request this WAITING follows, if any."""
    since: datetime
    """The event's timestamp."""


class CompletionStatus(ApiModel):
    """The COMPLETED event."""

    status: Literal["success", "failure"]
    """How the sprite says it ended."""
    summary: str | None = Field(default=None, max_length=1024)
    """Its summary."""
    at: datetime
    """The event's timestamp."""
    line: int = Field(ge=0)
    """The event's outbox line."""


class ErrorStatus(ApiModel):
    """An ERROR event."""

    line: int = Field(ge=0)
    """The event's outbox line."""
    session: int = Field(ge=1)
    """The session that failed."""
    message: str = Field(max_length=512)
    """What went wrong."""
    details: dict[str, Any] | None = Field(default=None, json_schema_extra=PRESERVE_UNKNOWN)
    """Structured details, unless larger than 1 KiB."""
    at: datetime
    """The event's timestamp."""


class ProposalStatus(ApiModel):
    """An ENVIRONMENT_PROPOSAL, as proposed (never applied by the sprite)."""

    line: int = Field(ge=0)
    """The event's outbox line."""
    session: int = Field(ge=1)
    """The session that proposed it."""
    adjustment: AdjustmentType
    """suggested_adjustment.type."""
    scope: Literal["repo_specific", "global_candidate"]
    """Where the fix would apply."""
    confidence: float = Field(ge=0, le=1)
    """The sprite's confidence."""
    details: dict[str, Any] | None = Field(default=None, json_schema_extra=PRESERVE_UNKNOWN)
    """suggested_adjustment.details, unless larger than 1 KiB."""
    observed_failure: dict[str, Any] | None = Field(
        default=None, json_schema_extra=PRESERVE_UNKNOWN
    )
    """What failed, unless larger than 1 KiB."""
    evidence: list[_Message] = Field(default_factory=list, max_length=8)
    """The first pieces of evidence (clipped)."""
    at: datetime
    """The event's timestamp."""


class EventCounts(ApiModel):
    """Committed events per type."""

    info: int = 0
    phase_started: int = 0
    phase_finished: int = 0
    action_request: int = 0
    artifact: int = 0
    waiting: int = 0
    completed: int = 0
    error: int = 0
    environment_proposal: int = 0


class RecentEvent(ApiModel):
    """One of the last events, summarised."""

    line: int = Field(ge=0)
    """The event's outbox line."""
    event_type: EventType
    """Its type."""
    at: datetime
    """Its timestamp."""
    summary: str = Field(default="", max_length=SUMMARY_CHARS)
    """A one-line summary."""


class RunEventsStatus(ApiModel):
    """What the sprite's events say about the Run: bounded whatever the stream length."""

    state: RunEventsState = "Active"
    """Active; Waiting after WAITING (until resumed); Completed after COMPLETED."""
    session: int = Field(default=1, ge=1)
    """The current exec session (1 + number of resumes)."""
    resumes: int = Field(default=0, ge=0)
    """How many times the Run was resumed."""
    event_count: int = Field(default=0, ge=0)
    """Committed events."""
    first_event_at: datetime | None = None
    """Timestamp of the first committed event."""
    last_event_at: datetime | None = None
    """Timestamp of the last committed event."""
    current_phase: str | None = Field(default=None, max_length=NAME_CHARS)
    """The most recently started phase that has not finished."""
    phases: list[PhaseStatus] = Field(default_factory=list, max_length=MAX_PHASES)
    """Phases, least recently started first."""
    phases_dropped: int = Field(default=0, ge=0)
    """Phases no longer listed (over the cap)."""
    progress: ProgressStatus | None = None
    """The last progress report."""
    artifacts: list[ArtifactStatus] = Field(default_factory=list, max_length=MAX_ARTIFACTS)
    """The last artifacts, oldest first."""
    artifact_count: int = Field(default=0, ge=0)
    """All artifacts declared."""
    action_requests: list[ActionRequestStatus] = Field(
        default_factory=list, max_length=MAX_ACTION_REQUESTS
    )
    """Action requests, oldest first (resolved ones are dropped first past the cap)."""
    action_request_count: int = Field(default=0, ge=0)
    """All action requests made."""
    waiting: WaitingStatus | None = None
    """The WAITING the Run is paused on (cleared on resume)."""
    completion: CompletionStatus | None = None
    """The COMPLETED event, once seen."""
    errors: list[ErrorStatus] = Field(default_factory=list, max_length=MAX_ERRORS)
    """The last ERROR events."""
    error_count: int = Field(default=0, ge=0)
    """All ERROR events."""
    proposals: list[ProposalStatus] = Field(default_factory=list, max_length=MAX_PROPOSALS)
    """The last environment proposals."""
    proposal_count: int = Field(default=0, ge=0)
    """All environment proposals."""
    counts: EventCounts = Field(default_factory=EventCounts)
    """Committed events per type."""
    recent: list[RecentEvent] = Field(default_factory=list, max_length=MAX_RECENT)
    """The last events, oldest first."""
    violations: list[Violation] = Field(default_factory=list, max_length=MAX_VIOLATIONS)
    """The last protocol violations, oldest first."""
    violation_count: int = Field(default=0, ge=0)
    """All protocol violations."""
    violation_counts: dict[str, int] = Field(default_factory=dict, max_length=32)
    """Protocol violations per category."""
    trimmed: bool = False
    """Some lists were shortened further to keep the status under its byte budget."""

    def pending_action_requests(self) -> list[ActionRequestStatus]:
        """Requests the operator has not answered or refused yet."""
        return [r for r in self.action_requests if r.state == "Pending"]


_COUNT_FIELDS: dict[EventType, str] = {t: t.value.lower() for t in EventType}
_INFO = EventType.INFO
_NUMBERS = frozenset({int, float})  # exact types: JSON gives no subclasses, and bool is excluded
_EMPTY: dict[str, Any] = {}


def _small_map(value: dict[str, Any] | None, limit: int) -> dict[str, Any] | None:
    if not value:
        return value
    try:
        return value if compact_size(value) <= limit else None
    except (TypeError, ValueError):  # not JSON-serialisable: cannot happen for parsed JSON
        return None


def _summary(event: CommittedEvent) -> str:
    t, p = event.data["event_type"], event.data["payload"]
    text: str
    if t is EventType.INFO or t is EventType.ERROR:
        text = p["message"]
    elif t is EventType.PHASE_STARTED:
        text = p["phase"]
    elif t is EventType.PHASE_FINISHED:
        text = f"{p['phase']} {'succeeded' if p['success'] else 'FAILED'}"
    elif t is EventType.ACTION_REQUEST:
        text = f"{p['action'].value}{' (blocking)' if p['blocking'] else ''}"
    elif t is EventType.ARTIFACT:
        text = " ".join(x for x in (p["kind"], p.get("ref") or p.get("url")) if x)
    elif t is EventType.WAITING:
        text = f"{p['reason']} [{p['checkpoint_id']}]"
    elif t is EventType.COMPLETED:
        text = f"{p['status']}: {p.get('summary') or ''}"
    else:
        text = (
            f"{p['suggested_adjustment']['type'].value} "
            f"(confidence {p['confidence']:g}, {p['scope']})"
        )
    return clip(text, SUMMARY_CHARS)


_DATA = itemgetter(4)  # CommittedEvent.data, without the named field's descriptor
_PAYLOAD = itemgetter("payload")
_KIND = methodcaller("get", "kind")


def _artifact_status(committed: CommittedEvent) -> ArtifactStatus:
    p = committed.data["payload"]
    ref, url = p.get("ref"), p.get("url")
    return ArtifactStatus(
        line=committed.line,
        session=committed.session,
        kind=clip(p["kind"], NAME_CHARS),
        ref=None if ref is None else clip(ref, MESSAGE_CHARS),
        url=None if url is None else clip(url, 1024),
        at=committed.data["timestamp"],
    )


def _request_status(committed: CommittedEvent) -> ActionRequestStatus:
    payload = committed.data["payload"]
    params = payload.get("parameters") or {}
    kept = _small_map(params, MAX_PARAMETERS_BYTES)
    return ActionRequestStatus(
        request_id=f"req-{committed.line}",
        line=committed.line,
        offset=committed.offset if committed.offset >= 0 else None,
        digest=committed.digest,
        session=committed.session,
        action=payload["action"],
        blocking=payload["blocking"],
        parameters=kept,
        parameters_omitted=kept is None and bool(params),
        requested_at=committed.data["timestamp"],
    )


def _request_state(request: ActionRequestStatus | CommittedEvent) -> RequestState:
    return request.state if isinstance(request, ActionRequestStatus) else "Pending"


def _request_blocking(request: ActionRequestStatus | CommittedEvent) -> bool:
    if isinstance(request, ActionRequestStatus):
        return request.blocking
    blocking: bool = request.data["payload"]["blocking"]
    return blocking


class _Phase:
    """A phase while the projector runs: a plain record, a `PhaseStatus` at snapshot time."""

    __slots__ = ("finished_at", "name", "session", "started_at", "starts", "state", "success")

    def __init__(self, name: str, session: int) -> None:
        self.name = name
        self.state: PhaseState = "Running"
        self.success: bool | None = None
        self.started_at: datetime | None = None
        self.finished_at: datetime | None = None
        self.starts = 0
        self.session = session

    @classmethod
    def of(cls, status: PhaseStatus) -> _Phase:
        record = cls(status.name, status.session)
        record.state, record.success = status.state, status.success
        record.started_at, record.finished_at = status.started_at, status.finished_at
        record.starts = status.starts
        return record

    def status(self) -> PhaseStatus:
        return PhaseStatus(
            name=self.name,
            state=self.state,
            success=self.success,
            started_at=self.started_at,
            finished_at=self.finished_at,
            starts=self.starts,
            session=self.session,
        )


class Projector:
    """The reducer with its state kept between events (see the module docstring)."""

    def __init__(
        self, status: RunEventsStatus | None = None, *, budget_bytes: int = STATUS_BUDGET_BYTES
    ) -> None:
        s = status.model_copy(deep=True) if status is not None else RunEventsStatus()
        self._budget = budget_bytes
        self.state: RunEventsState = s.state
        self.session = s.session
        self._resumes = s.resumes
        self._event_count = s.event_count
        self._first_at = s.first_event_at
        self._last_at = s.last_event_at
        self._current_phase = s.current_phase
        self._phases: dict[str, _Phase] = {p.name: _Phase.of(p) for p in s.phases}
        self._phases_dropped = s.phases_dropped
        # Progress is the hot path (most events are INFO): remember the last report and the
        # last usable percent; the model is built at snapshot time.
        self._progress_restored = s.progress
        self._progress_event: tuple[dict[str, Any], datetime, int] | None = None
        self._percent: float | None = None if s.progress is None else s.progress.percent
        # Like `_recent`: committed events are rendered only if still here at snapshot time.
        self._artifacts: deque[ArtifactStatus | CommittedEvent] = deque(
            s.artifacts, maxlen=MAX_ARTIFACTS
        )
        self._artifact_count = s.artifact_count
        # A request is kept as its committed event until a snapshot or a resolution needs
        # the model (most are never resolved before the next status write).
        self._requests: OrderedDict[str, ActionRequestStatus | CommittedEvent] = OrderedDict(
            (r.request_id, r) for r in s.action_requests
        )
        self._request_count = s.action_request_count
        # Requests no longer Pending: eviction looks for one of these first, and most
        # streams have none (then nothing is scanned).
        self._resolved = {r.request_id for r in s.action_requests if r.state != "Pending"}
        self._waiting = s.waiting
        self._completion = s.completion
        self._errors: deque[ErrorStatus] = deque(s.errors, maxlen=MAX_ERRORS)
        self._error_count = s.error_count
        self._proposals: deque[ProposalStatus] = deque(s.proposals, maxlen=MAX_PROPOSALS)
        self._proposal_count = s.proposal_count
        counts = s.counts.model_dump()
        self._counts: dict[EventType, int] = {t: counts[f] for t, f in _COUNT_FIELDS.items()}
        # Rendered lazily: committed events are summarised only if still here at snapshot time.
        self._recent: deque[CommittedEvent | RecentEvent] = deque(s.recent, maxlen=MAX_RECENT)
        self._violations: deque[Violation] = deque(s.violations, maxlen=MAX_VIOLATIONS)
        self._violation_count = s.violation_count
        self._violation_counts = dict(s.violation_counts)
        self._handlers: dict[EventType, Callable[[CommittedEvent], None]] = {
            EventType.PHASE_STARTED: self._phase_started,
            EventType.PHASE_FINISHED: self._phase_finished,
            EventType.ACTION_REQUEST: self._action_request,
            EventType.ARTIFACT: self._artifact,
            EventType.WAITING: self._waiting_event,
            EventType.COMPLETED: self._completed,
            EventType.ERROR: self._error,
            EventType.ENVIRONMENT_PROPOSAL: self._proposal,
        }

    # -- events -------------------------------------------------------------------------------

    def apply(self, committed: CommittedEvent) -> None:
        """Fold one committed event in."""
        data = committed.data
        event_type = data["event_type"]
        timestamp = data["timestamp"]
        self._counts[event_type] += 1
        self._recent.append(committed)
        self._event_count += 1
        if self._first_at is None:
            self._first_at = timestamp
        self._last_at = timestamp
        if event_type is _INFO:
            payload = data["payload"]
            if payload.get("kind") == "progress":
                # Inlined: INFO progress is most of a stream.
                percent: Any = (payload.get("metadata") or _EMPTY).get("percent")
                if type(percent) in _NUMBERS and 0 <= percent <= 100:
                    self._percent = percent
                self._progress_event = (payload, timestamp, committed.line)
            return
        self._handlers[event_type](committed)

    def apply_run(self, events: list[CommittedEvent], types: list[EventType]) -> None:
        """Fold consecutive events in, as `apply` on each in order would; `types` are theirs."""
        total = len(events)
        if not total:
            return
        counts = self._counts
        self._event_count += total
        self._recent.extend(events[-MAX_RECENT:])
        if self._first_at is None:
            self._first_at = events[0].data["timestamp"]
        self._last_at = events[-1].data["timestamp"]
        infos = types.count(_INFO)
        if infos:
            counts[_INFO] += infos
            if infos < total:
                events_info = list(compress(events, map(is_, types, repeat(_INFO))))
            else:
                events_info = events
            self._progress_run(events_info)
        if infos < total:
            handlers = self._handlers
            others = compress(zip(events, types, strict=True), map(is_not, types, repeat(_INFO)))
            for committed, event_type in others:
                counts[event_type] += 1
                handlers[event_type](committed)

    def _progress_run(self, infos: list[CommittedEvent]) -> None:
        # Only the last progress report and the last usable percent survive a run.
        payloads = list(map(_PAYLOAD, map(_DATA, infos)))
        kinds = list(map(_KIND, payloads))
        if "progress" not in kinds:
            return
        last = len(kinds) - 1 - kinds[::-1].index("progress")
        committed = infos[last]
        self._progress_event = (payloads[last], committed.data["timestamp"], committed.line)
        for index in range(last, -1, -1):
            if kinds[index] == "progress":
                percent: Any = (payloads[index].get("metadata") or _EMPTY).get("percent")
                if type(percent) in _NUMBERS and 0 <= percent <= 100:
                    self._percent = percent
                    return

    def _phase_started(self, committed: CommittedEvent) -> None:
        name = clip(committed.data["payload"]["phase"], NAME_CHARS)
        record = self._phases.pop(name, None)
        if record is None:
            record = _Phase(name, self.session)
        record.state, record.success = "Running", None
        record.started_at, record.finished_at = committed.data["timestamp"], None
        record.starts += 1
        record.session = self.session
        self._phases[name] = record  # re-inserted: the dict is ordered by last start
        self._current_phase = name
        self._evict_phases()

    def _phase_finished(self, committed: CommittedEvent) -> None:
        payload = committed.data["payload"]
        name = clip(payload["phase"], NAME_CHARS)
        record = self._phases.get(name)
        if record is None:
            record = _Phase(name, self.session)
            self._phases[name] = record
        success = payload["success"] is True
        record.success = success
        record.state = "Succeeded" if success else "Failed"
        record.finished_at = committed.data["timestamp"]
        record.session = self.session
        if self._current_phase == name:
            running = [p.name for p in self._phases.values() if p.state == "Running"]
            self._current_phase = running[-1] if running else None
        self._evict_phases()

    def _evict_phases(self) -> None:
        while len(self._phases) > MAX_PHASES:
            finished = next((n for n, p in self._phases.items() if p.state != "Running"), None)
            del self._phases[finished if finished is not None else next(iter(self._phases))]
            self._phases_dropped += 1

    def _action_request(self, committed: CommittedEvent) -> None:
        requests = self._requests
        requests[f"req-{committed.line}"] = committed
        self._request_count += 1
        while len(requests) > MAX_ACTION_REQUESTS:
            resolved = self._resolved
            doomed = next((k for k in requests if k in resolved), None) if resolved else None
            if doomed is None:
                doomed = next(iter(requests))
            del requests[doomed]
            self._resolved.discard(doomed)

    def _request(self, request_id: str) -> ActionRequestStatus | None:
        """The request as its model (built once, then kept), or None."""
        request = self._requests.get(request_id)
        if request is None or isinstance(request, ActionRequestStatus):
            return request
        model = self._requests[request_id] = _request_status(request)
        return model

    def _artifact(self, committed: CommittedEvent) -> None:
        self._artifacts.append(committed)
        self._artifact_count += 1

    def _waiting_event(self, committed: CommittedEvent) -> None:
        p = committed.data["payload"]
        blocking = [
            request_id
            for request_id, r in self._requests.items()
            if _request_blocking(r)
            and _request_state(r) == "Pending"
            and r.session == committed.session
        ]
        self._waiting = WaitingStatus(
            line=committed.line,
            session=committed.session,
            reason=clip(p["reason"], 512),
            checkpoint_id=p["checkpoint_id"],
            expected_inputs=dict(p.get("expected_inputs") or {}),
            request_id=blocking[-1] if blocking else None,
            since=committed.data["timestamp"],
        )
        self.state = "Waiting"

    def _completed(self, committed: CommittedEvent) -> None:
        p = committed.data["payload"]
        summary = p.get("summary")
        self._completion = CompletionStatus(
            status=p["status"],
            summary=None if summary is None else clip(summary, 1024),
            at=committed.data["timestamp"],
            line=committed.line,
        )
        self.state = "Completed"
        self._current_phase = None

    def _error(self, committed: CommittedEvent) -> None:
        p = committed.data["payload"]
        self._errors.append(
            ErrorStatus(
                line=committed.line,
                session=committed.session,
                message=clip(p["message"], 512),
                details=_small_map(p.get("details"), MAX_MAP_BYTES),
                at=committed.data["timestamp"],
            )
        )
        self._error_count += 1

    def _proposal(self, committed: CommittedEvent) -> None:
        p = committed.data["payload"]
        adjustment = p["suggested_adjustment"]
        self._proposals.append(
            ProposalStatus(
                line=committed.line,
                session=committed.session,
                adjustment=adjustment["type"],
                scope=p["scope"],
                confidence=p["confidence"],
                details=_small_map(adjustment.get("details"), MAX_MAP_BYTES),
                observed_failure=_small_map(p["observed_failure"], MAX_MAP_BYTES),
                evidence=[clip(e, MESSAGE_CHARS) for e in p["evidence"][:8]],
                at=committed.data["timestamp"],
            )
        )
        self._proposal_count += 1

    # -- everything that is not an event ------------------------------------------------------

    def add_violation(self, violation: Violation) -> None:
        """Record a protocol violation."""
        self._violations.append(violation)
        self._violation_count += 1
        key = violation.category.value
        self._violation_counts[key] = self._violation_counts.get(key, 0) + 1

    def resume(self) -> None:
        """The Run was resumed from its WAITING: a new session begins."""
        self.restart()
        self._resumes += 1

    def restart(self) -> None:
        """A new session begins (a resume, or another attempt): the Run is active again."""
        self.session += 1
        self._waiting = None
        self.state = "Active"

    def resolve_action_request(
        self,
        request_id: str,
        *,
        answered: bool,
        at: datetime,
        message: str | None = None,
    ) -> None:
        """Mark a request Answered (or Refused); repeating the same outcome is a no-op."""
        request = self._request(request_id)
        if request is None:
            raise UnknownActionRequestError(f"no action request {request_id!r} in the status")
        state: RequestState = "Answered" if answered else "Refused"
        if request.state == state:
            return
        if request.state != "Pending":
            raise UnknownActionRequestError(f"{request_id} is already {request.state}, not {state}")
        request.state = state
        self._resolved.add(request_id)
        request.resolved_at = at
        request.message = None if message is None else clip(message, MESSAGE_CHARS)

    def snapshot(self) -> RunEventsStatus:
        """The status now, trimmed to the byte budget if need be."""
        progress = self._progress_restored
        if self._progress_event is not None:
            payload, at, line = self._progress_event
            phase = (payload.get("metadata") or _EMPTY).get("phase")
            progress = ProgressStatus(
                percent=None if self._percent is None else float(self._percent),
                message=clip(payload["message"], MESSAGE_CHARS),
                phase=clip(phase, NAME_CHARS) if isinstance(phase, str) else None,
                updated_at=at,
                line=line,
            )
        recent = [
            item
            if isinstance(item, RecentEvent)
            else RecentEvent(
                line=item.line,
                event_type=item.data["event_type"],
                at=item.data["timestamp"],
                summary=_summary(item),
            )
            for item in self._recent
        ]
        status = RunEventsStatus(
            state=self.state,
            session=self.session,
            resumes=self._resumes,
            event_count=self._event_count,
            first_event_at=self._first_at,
            last_event_at=self._last_at,
            current_phase=self._current_phase,
            phases=[p.status() for p in self._phases.values()],
            phases_dropped=self._phases_dropped,
            progress=progress,
            artifacts=[
                item if isinstance(item, ArtifactStatus) else _artifact_status(item)
                for item in self._artifacts
            ],
            artifact_count=self._artifact_count,
            action_requests=[self._request(k).model_copy() for k in list(self._requests)],  # type: ignore[union-attr]
            action_request_count=self._request_count,
            waiting=self._waiting,
            completion=self._completion,
            errors=list(self._errors),
            error_count=self._error_count,
            proposals=list(self._proposals),
            proposal_count=self._proposal_count,
            counts=EventCounts(**{f: self._counts[t] for t, f in _COUNT_FIELDS.items()}),
            recent=recent,
            violations=list(self._violations),
            violation_count=self._violation_count,
            violation_counts=dict(self._violation_counts),
        )
        return fit_to_budget(status, self._budget)


# Trimmed in this order, oldest entries first; action requests last (pending ones matter).
_TRIM_ORDER = ("recent", "violations", "proposals", "errors", "artifacts", "phases")


def status_size(status: RunEventsStatus) -> int:
    """Bytes of the status as the API server stores it (camelCase JSON)."""
    return len(status.model_dump_json(by_alias=True))


def fit_to_budget(status: RunEventsStatus, budget: int) -> RunEventsStatus:
    """`status`, with the oldest list entries dropped until it serialises within `budget`."""
    if status_size(status) <= budget:
        return status
    status = status.model_copy(update={"trimmed": True}, deep=True)
    for name in _TRIM_ORDER:
        items: list[Any] = getattr(status, name)
        while items and status_size(status) > budget:
            del items[: (len(items) + 1) // 2]
    if status_size(status) > budget:
        for request in status.action_requests:
            if request.parameters:
                request.parameters, request.parameters_omitted = None, True
    requests = status.action_requests
    while requests and status_size(status) > budget:
        resolved = next((i for i, r in enumerate(requests) if r.state != "Pending"), 0)
        del requests[resolved]
    return status


def reduce(status: RunEventsStatus, event: CommittedEvent) -> RunEventsStatus:
    """The status after one more committed event (pure: `status` is not modified)."""
    projector = Projector(status)
    projector.apply(event)
    return projector.snapshot()


def fold(
    events: Iterable[CommittedEvent], status: RunEventsStatus | None = None
) -> RunEventsStatus:
    """The status after all `events` (pure)."""
    projector = Projector(status)
    for event in events:
        projector.apply(event)
    return projector.snapshot()


def resolve_action_request(
    status: RunEventsStatus,
    request_id: str,
    *,
    answered: bool,
    at: datetime,
    message: str | None = None,
) -> RunEventsStatus:
    """The status with one action request Answered or Refused (pure)."""
    projector = Projector(status)
    projector.resolve_action_request(request_id, answered=answered, at=at, message=message)
    return projector.snapshot()


def record_violation(status: RunEventsStatus, violation: Violation) -> RunEventsStatus:
    """The status with one more violation (pure)."""
    projector = Projector(status)
    projector.add_violation(violation)
    return projector.snapshot()


__all__ = [
    "STATUS_BUDGET_BYTES",
    "ActionRequestStatus",
    "ArtifactStatus",
    "CompletionStatus",
    "ErrorStatus",
    "EventCounts",
    "PhaseStatus",
    "ProgressStatus",
    "Projector",
    "ProposalStatus",
    "RecentEvent",
    "RunEventsStatus",
    "WaitingStatus",
    "fit_to_budget",
    "fold",
    "record_violation",
    "reduce",
    "resolve_action_request",
    "status_size",
]
