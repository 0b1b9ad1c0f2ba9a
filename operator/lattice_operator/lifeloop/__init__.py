"""Lifeloop: receipts, failure and retry classes, the adapter manifest (pure, no kopf).

- `vocabulary`: the contract's closed vocabularies (events, statuses, modes, support states);
- `classes`: the 13 failure classes, 5 retry classes and the default failure → retry table;
- `receipts`: the receipt model (nullable fields always on the wire);
- `ledger`: sequence, invocations and parent chaining, idempotency, gap detection;
- `mapping`: protocol events and Run transitions → lifecycle events, the one table;
- `builder`: `RunReceipts`, what the operator calls for each event and transition;
- `manifest`: manifest models and rules, and the `sprites` adapter's manifest;
- `registry`: every adapter's manifest by adapter_id (sprites, the v1 conformance agents
  claude and codex, the pre-conformance ones) with its payload placement routes;
- `negotiation`: requirement levels against a manifest (satisfied, degraded, unsupported,
  requires_operator; partial only when accepted);
- `placement`: where a payload goes (first satisfiable acceptable placement), or why not;
- `dispatch`: negotiate and place before the exec, the exec's response unchanged.
"""

from lattice_operator.lifeloop.builder import RunReceipts, RunReceiptsState, event_id_for
from lattice_operator.lifeloop.classes import DEFAULT_RETRY, FailureClass, RetryClass
from lattice_operator.lifeloop.errors import LifeloopError, ManifestError, ReceiptRequestError
from lattice_operator.lifeloop.ledger import (
    IdFactory,
    Invocation,
    LedgerState,
    ReceiptLedger,
    ReceiptRequest,
    UlidIds,
)
from lattice_operator.lifeloop.manifest import SPRITES_MANIFEST, AdapterManifest, validate_manifest
from lattice_operator.lifeloop.mapping import LIFECYCLE_MAP, LifecycleStep, RunTransition
from lattice_operator.lifeloop.receipts import (
    CapabilityDegradation,
    LifecycleReceipt,
    PayloadReceipt,
)
from lattice_operator.lifeloop.vocabulary import (
    CONTRACT_VERSION,
    AdapterRole,
    IntegrationMode,
    LifecycleEvent,
    ManifestPlacement,
    PayloadPlacement,
    ReceiptStatus,
    SupportState,
)

__all__ = [
    "CONTRACT_VERSION",
    "DEFAULT_RETRY",
    "LIFECYCLE_MAP",
    "SPRITES_MANIFEST",
    "AdapterManifest",
    "AdapterRole",
    "CapabilityDegradation",
    "FailureClass",
    "IdFactory",
    "IntegrationMode",
    "Invocation",
    "LedgerState",
    "LifecycleEvent",
    "LifecycleReceipt",
    "LifecycleStep",
    "LifeloopError",
    "ManifestError",
    "ManifestPlacement",
    "PayloadPlacement",
    "PayloadReceipt",
    "ReceiptLedger",
    "ReceiptRequest",
    "ReceiptRequestError",
    "ReceiptStatus",
    "RetryClass",
    "RunReceipts",
    "RunReceiptsState",
    "RunTransition",
    "SupportState",
    "UlidIds",
    "event_id_for",
    "validate_manifest",
]
