"""Prometheus metrics of the operator. Label values are bounded sets: never a Run's name."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

REGISTRY = CollectorRegistry(auto_describe=True)

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

RECONCILES = Counter(
    "lattice_reconcile_total",
    "Reconciliations by kind and outcome.",
    ["kind", "outcome"],
    registry=REGISTRY,
)
RECONCILE_SECONDS = Histogram(
    "lattice_reconcile_duration_seconds",
    "Reconciliation duration by kind.",
    ["kind"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
BACKEND_CALL_SECONDS = Histogram(
    "lattice_backend_call_duration_seconds",
    "Sprites backend call latency by operation.",
    ["operation"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
BACKEND_ERRORS = Counter(
    "lattice_backend_errors_total",
    "Sprites backend call errors by operation and failure class.",
    ["operation", "failure_class"],
    registry=REGISTRY,
)
EVENTS_INGESTED = Counter(
    "lattice_events_ingested_total",
    "Sprite protocol events committed, by event type.",
    ["type"],
    registry=REGISTRY,
)
VIOLATIONS = Counter(
    "lattice_protocol_violations_total",
    "Sprite protocol violations by category.",
    ["category"],
    registry=REGISTRY,
)
RECEIPTS = Counter(
    "lattice_receipts_total",
    "Lifeloop receipts by lifecycle event and status.",
    ["event", "status"],
    registry=REGISTRY,
)
K8S_EVENTS_DROPPED = Counter(
    "lattice_kube_events_dropped_total",
    "Receipt Events not posted because a Run exceeded its Event rate limit.",
    registry=REGISTRY,
)
STATUS_PATCHES = Counter(
    "lattice_status_patches_total",
    "Status patches written, by kind.",
    ["kind"],
    registry=REGISTRY,
)
OUTBOX_LAG = Gauge(
    "lattice_outbox_lag_bytes",
    "Outbox bytes written by sprites but not yet consumed (all Runs).",
    registry=REGISTRY,
)
INTENT_DECISIONS = Counter(
    "lattice_policy_decisions_total",
    "Policy decisions by policy, rule and outcome.",
    ["policy", "rule", "outcome"],
    registry=REGISTRY,
)
FORGE_STEPS = Counter(
    "lattice_forge_steps_total",
    "Forge steps of GitHub Intents (prepare, finish), by outcome (done, or the failure class).",
    ["step", "outcome"],
    registry=REGISTRY,
)
WEBHOOK_DELIVERIES = Counter(
    "lattice_github_webhook_deliveries_total",
    "GitHub webhook deliveries, by event and outcome (created, exists, approved, refused, "
    "resumed, ignored, unknown_event, bad_signature, too_large, ...).",
    ["event", "outcome"],
    registry=REGISTRY,
)
WEBHOOK_SECONDS = Histogram(
    "lattice_github_webhook_seconds",
    "Time from a webhook delivery's arrival to its answer (the Intent written, when any).",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
    registry=REGISTRY,
)
FILEOPS_DONE = Counter(
    "lattice_fileops_requests_total",
    "FileOps requests carried out, by response status (ok, split, ask, fail, validation_error).",
    ["status"],
    registry=REGISTRY,
)
APPROVALS = Counter(
    "lattice_approvals_total",
    "Approval decisions by outcome.",
    ["outcome"],
    registry=REGISTRY,
)
AWAITING_APPROVAL_SECONDS = Histogram(
    "lattice_intent_awaiting_approval_seconds",
    "Time Intents spent in AwaitingApproval.",
    buckets=(1, 5, 15, 60, 300, 900, 3600, 14400, 86400),
    registry=REGISTRY,
)
REFUSED_ACTIONS = Counter(
    "lattice_refused_actions_total",
    "ACTION_REQUESTs refused, by reason.",
    ["reason"],
    registry=REGISTRY,
)
LEADER = Gauge(
    "lattice_leader",
    "1 while this replica holds the leader Lease and reconciles; 0 while it stands by.",
    registry=REGISTRY,
)
WEBHOOK_CERT_EXPIRY = Gauge(
    "lattice_webhook_cert_expiry_timestamp_seconds",
    "When the webhook serving certificate this replica serves expires (Unix time).",
    registry=REGISTRY,
)
WEBHOOK_CERT_STEPS = Counter(
    "lattice_webhook_cert_steps_total",
    "Webhook certificate steps carried out (create, reissue, publish, begin, switch, drop).",
    ["step"],
    registry=REGISTRY,
)


RECONCILE_OUTCOMES = ("ok", "error", "blocked")
"""ok: done; error: failed, retried (or cut short); blocked: failed for good until the spec
changes (invalid object, a permanent refusal)."""


@contextmanager
def reconcile_timer(kind: str, *, blocked: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
    """Count one reconciliation of `kind` and observe its duration, whatever its end.

    A normal exit is `ok`, one of the `blocked` exception types is `blocked`, anything else
    (cancellation included) is `error`; the exception is re-raised.
    """
    started = time.monotonic()
    outcome = "error"
    try:
        yield
        outcome = "ok"
    except blocked:
        outcome = "blocked"
        raise
    finally:
        RECONCILES.labels(kind=kind, outcome=outcome).inc()
        RECONCILE_SECONDS.labels(kind=kind).observe(time.monotonic() - started)


class PhaseCollector(Collector):
    """Objects by phase (and kind label), counted at scrape time from an in-memory view."""

    def __init__(
        self,
        name: str,
        doc: str,
        labels: list[str],
        source: Callable[[], Mapping[tuple[str, ...], int]],
    ) -> None:
        self._name, self._doc, self._labels, self._source = name, doc, labels, source

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(self._name, self._doc, labels=self._labels)
        for label_values, count in sorted(self._source().items()):
            family.add_metric(list(label_values), count)
        yield family


__all__ = [
    "APPROVALS",
    "AWAITING_APPROVAL_SECONDS",
    "BACKEND_CALL_SECONDS",
    "BACKEND_ERRORS",
    "EVENTS_INGESTED",
    "FILEOPS_DONE",
    "INTENT_DECISIONS",
    "K8S_EVENTS_DROPPED",
    "LEADER",
    "OUTBOX_LAG",
    "RECEIPTS",
    "RECONCILES",
    "RECONCILE_OUTCOMES",
    "RECONCILE_SECONDS",
    "REFUSED_ACTIONS",
    "REGISTRY",
    "STATUS_PATCHES",
    "VIOLATIONS",
    "WEBHOOK_CERT_EXPIRY",
    "WEBHOOK_CERT_STEPS",
    "PhaseCollector",
    "reconcile_timer",
]
