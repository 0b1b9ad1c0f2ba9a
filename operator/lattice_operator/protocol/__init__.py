"""The sprite protocol v1 engine: bytes in, an exact event stream and a bounded status out.

Pure Python, no Kubernetes, no network. The operator drives one
`RunEventEngine` per Run (see `lattice_operator.protocol.engine` for the
calls in order); the pieces it is made of are importable on their own:

- `models`: pydantic models of the envelope and each event type (for people and tools);
- `events`: the same events as msgspec Structs, decoded and validated in one pass (the engine's);
- `parse`: one JSON line → a decoded event or a `Rejection` (duplicate keys, identity, size);
- `splitter`: stdout frames → lines (carry-over buffer, CRLF, caps);
- `outbox`: outbox bytes from an offset → complete lines and the next offset;
- `merge`: outbox-canonical merge with stdout as provisional preview; `StreamCursor`;
- `projection`: names the three parts of the Run's event status: `status` (the schema,
  `RunEventsStatus`), `reducer` (events folded into it) and `budget` (its byte cap);
- `inputs`: resume inputs checked against a WAITING's expected inputs;
- `violations`: what a bad line or sequence becomes.
"""

from lattice_operator.protocol.engine import EngineLimits, FeedResult, RunEventEngine
from lattice_operator.protocol.errors import (
    EngineStateError,
    OutboxGapError,
    ProtocolEngineError,
    UnknownActionRequestError,
)
from lattice_operator.protocol.inputs import InputProblem, validate_resume_inputs
from lattice_operator.protocol.merge import CommittedEvent, ProvisionalEvent, StreamCursor
from lattice_operator.protocol.models import EVENT_ADAPTER, EventType, ProtocolEvent
from lattice_operator.protocol.projection import (
    ActionRequestStatus,
    RunEventsStatus,
    fold,
    reduce,
    resolve_action_request,
)
from lattice_operator.protocol.violations import Violation, ViolationCategory

__all__ = [
    "EVENT_ADAPTER",
    "ActionRequestStatus",
    "CommittedEvent",
    "EngineLimits",
    "EngineStateError",
    "EventType",
    "FeedResult",
    "InputProblem",
    "OutboxGapError",
    "ProtocolEngineError",
    "ProtocolEvent",
    "ProvisionalEvent",
    "RunEventEngine",
    "RunEventsStatus",
    "StreamCursor",
    "UnknownActionRequestError",
    "Violation",
    "ViolationCategory",
    "fold",
    "reduce",
    "resolve_action_request",
    "validate_resume_inputs",
]
