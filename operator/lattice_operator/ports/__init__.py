"""Every port the reconcilers depend on, in one place; adapters and handlers implement them.

- `sprites`: the Sprites backend (`SpriteBackend`, `ExecSession` and their small models);
- `errors`: the backend's error vocabulary, each error carrying its Lifeloop failure class
  (adapters translate httpx/websocket/SDK errors into these at their boundary);
- `cluster`: what the Run driver needs from the cluster (Sprites from memory, grants and
  secrets, status writes, receipt Events);
- the clock (`lattice_operator.clock`, re-exported here).
"""

from lattice_operator.clock import Clock, SystemClock
from lattice_operator.ports.cluster import (
    ActionServices,
    ForgeAccess,
    ForgeGrant,
    Grants,
    ReceiptPublisher,
    RunStatusWriter,
    SpriteDirectory,
    SpriteView,
)
from lattice_operator.ports.errors import (
    AdapterError,
    Conflict,
    CredentialsMissing,
    ExitStatusUnknown,
    InvalidRequest,
    NotFound,
    OperationFailed,
    PayloadTooLarge,
    ProtocolError,
    RateLimited,
    ServerError,
    Timeout,
    TransportError,
    Unauthorized,
)
from lattice_operator.ports.sprites import (
    CheckpointInfo,
    DetachOnExit,
    ExecOutput,
    ExecSession,
    FileStat,
    KillEvent,
    KillResult,
    ServiceEvent,
    ServiceInfo,
    SessionInfo,
    SpriteBackend,
    SpriteInfo,
    SpritePage,
)

__all__ = [
    "ActionServices",
    "AdapterError",
    "CheckpointInfo",
    "Clock",
    "Conflict",
    "CredentialsMissing",
    "DetachOnExit",
    "ExecOutput",
    "ExecSession",
    "ExitStatusUnknown",
    "FileStat",
    "ForgeAccess",
    "ForgeGrant",
    "Grants",
    "InvalidRequest",
    "KillEvent",
    "KillResult",
    "NotFound",
    "OperationFailed",
    "PayloadTooLarge",
    "ProtocolError",
    "RateLimited",
    "ReceiptPublisher",
    "RunStatusWriter",
    "ServerError",
    "ServiceEvent",
    "ServiceInfo",
    "SessionInfo",
    "SpriteBackend",
    "SpriteDirectory",
    "SpriteInfo",
    "SpritePage",
    "SpriteView",
    "SystemClock",
    "Timeout",
    "TransportError",
    "Unauthorized",
]
