"""Folding committed events into the bounded Run status (`status.RunEventsStatus`).

Two ways in, one implementation:

- `reduce(status, event) -> status` and `fold(events, status)` are pure
  (the input status is never modified);
- `Projector` is the same reducer holding its state between events, which
  the engine uses so that a million events cost a million cheap updates and
  one snapshot, not a million model copies. `Projector(status)` continues
  from any earlier snapshot exactly as `reduce` would. `apply_run` folds a
  run of events at once: the INFO events (most of a stream) only change the
  counts, the recent ring and the progress, so a run of them costs a count
  and a look at its last progress report; the other events go through
  `apply`'s handlers, in order.

Lists are capped rings with a total count beside them, strings are clipped,
free-form maps are kept only when small, and `snapshot()` trims the oldest
entries further (`budget.fit_to_budget`) if a hostile stream still pushes the
status over its byte budget.

A `PHASE_FINISHED` with `success: false` is a failed phase. Action requests
are recorded as Pending; the operator resolves them later with
`resolve_action_request` (pure, on a status) or the engine's method of the
same name.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from lattice_operator.protocol.budget import STATUS_BUDGET_BYTES, fit_to_budget
from lattice_operator.protocol.errors import UnknownActionRequestError
from lattice_operator.protocol.events import (
    ActionRequestEvent,
    ArtifactEvent,
    CompletedEvent,
    EnvironmentProposalEvent,
    ErrorEvent,
    InfoEvent,
    InfoPayload,
    PhaseFinishedEvent,
    PhaseStartedEvent,
    WaitingEvent,
    given,
)
from lattice_operator.protocol.merge import CommittedEvent
from lattice_operator.protocol.models import EventType
from lattice_operator.protocol.parse import compact_size
from lattice_operator.protocol.status import (
    MAX_ACTION_REQUESTS,
    MAX_ARTIFACTS,
    MAX_ERRORS,
    MAX_MAP_BYTES,
    MAX_PARAMETERS_BYTES,
    MAX_PHASES,
    MAX_PROPOSALS,
    MAX_RECENT,
    MAX_VIOLATIONS,
    MESSAGE_CHARS,
    NAME_CHARS,
    SUMMARY_CHARS,
    ActionRequestStatus,
    ArtifactStatus,
    CompletionStatus,
    ErrorStatus,
    EventCounts,
    PhaseState,
    PhaseStatus,
    ProgressStatus,
    ProposalStatus,
    RecentEvent,
    RequestState,
    RunEventsState,
    RunEventsStatus,
    WaitingStatus,
)
from lattice_operator.protocol.violations import Violation
from lattice_operator.text import clip

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
    e = event.data
    text: str
    if isinstance(e, InfoEvent | ErrorEvent):
        text = e.payload.message
    elif isinstance(e, PhaseStartedEvent):
        text = e.payload.phase
    elif isinstance(e, PhaseFinishedEvent):
        text = f"{e.payload.phase} {'succeeded' if e.payload.success else 'FAILED'}"
    elif isinstance(e, ActionRequestEvent):
        text = f"{e.payload.action.value}{' (blocking)' if e.payload.blocking else ''}"
    elif isinstance(e, ArtifactEvent):
        a = e.payload
        text = " ".join(x for x in (a.kind, a.ref or a.url) if isinstance(x, str) and x)
    elif isinstance(e, WaitingEvent):
        text = f"{e.payload.reason} [{e.payload.checkpoint_id}]"
    elif isinstance(e, CompletedEvent):
        text = f"{e.payload.status}: {e.payload.summary or ''}"
    else:
        proposal = e.payload
        text = (
            f"{proposal.suggested_adjustment.type.value} "
            f"(confidence {proposal.confidence:g}, {proposal.scope})"
        )
    return clip(text, SUMMARY_CHARS)


def _artifact_status(committed: CommittedEvent) -> ArtifactStatus:
    data = committed.data
    assert isinstance(data, ArtifactEvent)
    ref, url = given(data.payload.ref), given(data.payload.url)
    return ArtifactStatus(
        line=committed.line,
        session=committed.session,
        kind=clip(data.payload.kind, NAME_CHARS),
        ref=None if ref is None else clip(ref, MESSAGE_CHARS),
        url=None if url is None else clip(url, 1024),
        at=committed.timestamp,
    )


def _request_status(committed: CommittedEvent) -> ActionRequestStatus:
    data = committed.data
    assert isinstance(data, ActionRequestEvent)
    payload = data.payload
    params = given(payload.parameters) or {}
    kept = _small_map(params, MAX_PARAMETERS_BYTES)
    return ActionRequestStatus(
        request_id=f"req-{committed.line}",
        line=committed.line,
        offset=committed.offset if committed.offset >= 0 else None,
        digest=committed.digest,
        session=committed.session,
        action=payload.action,
        blocking=payload.blocking,
        parameters=kept,
        parameters_omitted=kept is None and bool(params),
        requested_at=committed.timestamp,
    )


def _request_state(request: ActionRequestStatus | CommittedEvent) -> RequestState:
    return request.state if isinstance(request, ActionRequestStatus) else "Pending"


def _request_blocking(request: ActionRequestStatus | CommittedEvent) -> bool:
    if isinstance(request, ActionRequestStatus):
        return request.blocking
    data = request.data
    return isinstance(data, ActionRequestEvent) and data.payload.blocking


def _percent(payload: InfoPayload) -> float | None:
    """metadata.percent of a progress report, when it is a number from 0 to 100."""
    metadata = payload.metadata
    percent: Any = metadata.get("percent") if isinstance(metadata, dict) else None
    if type(percent) in _NUMBERS and 0 <= percent <= 100:
        value: float = percent
        return value
    return None


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
        self._progress_event: tuple[InfoPayload, datetime, int] | None = None
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
        self.apply_run([committed])

    def apply_run(self, events: list[CommittedEvent]) -> None:
        """Fold consecutive events in, in order."""
        if not events:
            return
        self._event_count += len(events)
        self._recent.extend(events[-MAX_RECENT:])
        if self._first_at is None:
            self._first_at = events[0].timestamp
        self._last_at = events[-1].timestamp
        counts, handlers = self._counts, self._handlers
        infos = False
        for committed in events:
            event_type = committed.data.event_type
            counts[event_type] += 1
            if event_type is _INFO:
                infos = True
            else:
                handlers[event_type](committed)
        if infos:
            self._progress_run(events)

    def _progress_run(self, events: list[CommittedEvent]) -> None:
        # Only the last progress report and the last usable percent survive a run: look
        # from the end, and stop at the first report that carries a percent.
        found = False
        for committed in reversed(events):
            payload = committed.data.payload
            if type(payload) is InfoPayload and payload.kind == "progress":
                if not found:
                    found = True
                    self._progress_event = (payload, committed.timestamp, committed.line)
                percent = _percent(payload)
                if percent is not None:
                    self._percent = percent
                    return

    def _phase_started(self, committed: CommittedEvent) -> None:
        data = committed.data
        assert isinstance(data, PhaseStartedEvent)
        name = clip(data.payload.phase, NAME_CHARS)
        record = self._phases.pop(name, None)
        if record is None:
            record = _Phase(name, self.session)
        record.state, record.success = "Running", None
        record.started_at, record.finished_at = committed.timestamp, None
        record.starts += 1
        record.session = self.session
        self._phases[name] = record  # re-inserted: the dict is ordered by last start
        self._current_phase = name
        self._evict_phases()

    def _phase_finished(self, committed: CommittedEvent) -> None:
        data = committed.data
        assert isinstance(data, PhaseFinishedEvent)
        name = clip(data.payload.phase, NAME_CHARS)
        record = self._phases.get(name)
        if record is None:
            record = _Phase(name, self.session)
            self._phases[name] = record
        success = data.payload.success is True
        record.success = success
        record.state = "Succeeded" if success else "Failed"
        record.finished_at = committed.timestamp
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
        data = committed.data
        assert isinstance(data, WaitingEvent)
        p = data.payload
        expected = given(p.expected_inputs)
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
            reason=clip(p.reason, 512),
            checkpoint_id=p.checkpoint_id,
            expected_inputs=dict(expected or {}),
            request_id=blocking[-1] if blocking else None,
            since=committed.timestamp,
        )
        self.state = "Waiting"

    def _completed(self, committed: CommittedEvent) -> None:
        data = committed.data
        assert isinstance(data, CompletedEvent)
        summary = given(data.payload.summary)
        self._completion = CompletionStatus(
            status=data.payload.status,
            summary=None if summary is None else clip(summary, 1024),
            at=committed.timestamp,
            line=committed.line,
        )
        self.state = "Completed"
        self._current_phase = None

    def _error(self, committed: CommittedEvent) -> None:
        data = committed.data
        assert isinstance(data, ErrorEvent)
        self._errors.append(
            ErrorStatus(
                line=committed.line,
                session=committed.session,
                message=clip(data.payload.message, 512),
                details=_small_map(given(data.payload.details), MAX_MAP_BYTES),
                at=committed.timestamp,
            )
        )
        self._error_count += 1

    def _proposal(self, committed: CommittedEvent) -> None:
        data = committed.data
        assert isinstance(data, EnvironmentProposalEvent)
        p = data.payload
        adjustment = p.suggested_adjustment
        self._proposals.append(
            ProposalStatus(
                line=committed.line,
                session=committed.session,
                adjustment=adjustment.type,
                scope=p.scope,
                confidence=p.confidence,
                details=_small_map(given(adjustment.details), MAX_MAP_BYTES),
                observed_failure=_small_map(p.observed_failure, MAX_MAP_BYTES),
                evidence=[clip(e, MESSAGE_CHARS) for e in p.evidence[:8]],
                at=committed.timestamp,
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
            metadata = payload.metadata
            phase = metadata.get("phase") if isinstance(metadata, dict) else None
            progress = ProgressStatus(
                percent=None if self._percent is None else float(self._percent),
                message=clip(payload.message, MESSAGE_CHARS),
                phase=clip(phase, NAME_CHARS) if isinstance(phase, str) else None,
                updated_at=at,
                line=line,
            )
        recent = [
            item
            if isinstance(item, RecentEvent)
            else RecentEvent(
                line=item.line,
                event_type=item.data.event_type,
                at=item.timestamp,
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
            action_requests=[
                r.model_copy() for k in list(self._requests) if (r := self._request(k)) is not None
            ],
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


__all__ = ["Projector", "fold", "record_violation", "reduce", "resolve_action_request"]
