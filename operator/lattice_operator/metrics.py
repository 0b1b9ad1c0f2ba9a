"""Prometheus metrics of the operator. Label values are bounded sets: never a Run's name.

Conventions (a test keeps them): base units in names (`_seconds`, `_bytes`), `_total` on
counters, histograms for the latencies people take quantiles of. Every metric is registered
here, at import, so `/metrics` and docs/operating.md list the same set; the gauges counted
from the operator's in-memory views are bound to those views at start-up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import TypeVar, get_args

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from lattice_operator.api.v1alpha1.intentpolicy import GateOutcome
from lattice_operator.protocol import EventType, ViolationCategory

# No `_created` series beside every counter and histogram: Prometheus does not use them from
# the text format, and they would double the series of each scrape.
disable_created_metrics()  # type: ignore[no-untyped-call]

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
    "resumed, ignored, duplicate (a repeat or a replay), unknown_event, bad_signature, "
    "bad_payload, too_large, slow_body, busy, ...).",
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
BACKEND_THROTTLED = Counter(
    "lattice_backend_throttled_total",
    "Sprites API answers 429 (rate limited), retried ones included.",
    registry=REGISTRY,
)
RUN_COLD_STARTS = Counter(
    "lattice_run_cold_starts",
    "Run sessions started on a sprite the backend reported cold just before the start.",
    registry=REGISTRY,
)
RUN_APPLY_TO_EXEC_SECONDS = Histogram(
    "lattice_run_apply_to_exec_seconds",
    "Time from a Run's creation to its first exec session started.",
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
INTENT_DECISION_SECONDS = Histogram(
    "lattice_intent_decision_seconds",
    "Time from an Intent's creation to the policy decision written, by outcome.",
    ["outcome"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
ADMISSION_REQUESTS = Counter(
    "lattice_admission_requests_total",
    "Admission webhook requests by webhook and outcome (allowed, refused, error).",
    ["webhook", "outcome"],
    registry=REGISTRY,
)
ADMISSION_SECONDS = Histogram(
    "lattice_admission_duration_seconds",
    "Admission webhook handling time by webhook.",
    ["webhook"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
RECEIPT_POST_FAILURES = Counter(
    "lattice_receipt_post_failures_total",
    "Receipt Events the API server did not accept (logged; the receipt is missing).",
    registry=REGISTRY,
)
RECEIPTS_MISSING = Counter(
    "lattice_receipts_missing_total",
    "Receipt sequence numbers found never published (a gap) when a restarted operator audits.",
    registry=REGISTRY,
)
BUILD_INFO = Gauge(
    "lattice_build_info",
    "Always 1; the operator's version as a label.",
    ["version"],
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


def _own_version() -> str:
    try:
        return version("lattice-operator")
    except PackageNotFoundError:  # run from a source tree without an install
        return "unknown"


BUILD_INFO.labels(version=_own_version()).set(1)

RECONCILE_OUTCOMES = ("ok", "error", "blocked")
"""ok: done; error: failed, retried (or cut short); blocked: failed for good until the spec
changes (invalid object, a permanent refusal)."""
RECONCILED_KINDS = ("Sprite", "Run", "Intent", "HealthCheck")
APPROVAL_OUTCOMES = ("approve", "reject", "unauthorized")

# Series of the closed label sets exist from the start at 0 (Prometheus' advice): a rate()
# over them is 0, not "no data", before the first error, refusal or violation.
for _kind in RECONCILED_KINDS:
    RECONCILE_SECONDS.labels(kind=_kind)
    for _outcome in RECONCILE_OUTCOMES:
        RECONCILES.labels(kind=_kind, outcome=_outcome)
for _outcome in APPROVAL_OUTCOMES:
    APPROVALS.labels(outcome=_outcome)
for _category in ViolationCategory:
    VIOLATIONS.labels(category=_category.value)
for _type in EventType:
    EVENTS_INGESTED.labels(type=_type.value)
# A histogram series born with its first observation would show no increase to rate():
# the decision outcomes exist from the start.
for _gate in get_args(GateOutcome):
    INTENT_DECISION_SECONDS.labels(outcome=_gate)


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


ADMISSION_OUTCOMES = ("allowed", "refused", "error")


@contextmanager
def admission_request(webhook: str, *, refused: tuple[type[BaseException], ...]) -> Iterator[None]:
    """Count one admission request of `webhook` and observe its duration: a normal exit is
    `allowed`, one of the `refused` exception types `refused`, anything else `error`."""
    started = time.monotonic()
    outcome = "error"
    try:
        yield
        outcome = "allowed"
    except refused:
        outcome = "refused"
        raise
    finally:
        ADMISSION_REQUESTS.labels(webhook=webhook, outcome=outcome).inc()
        ADMISSION_SECONDS.labels(webhook=webhook).observe(time.monotonic() - started)


def _no_objects() -> Mapping[tuple[str, ...], int]:
    return {}


class PhaseCollector(Collector):
    """Objects by phase (and kind label), counted at scrape time from an in-memory view.

    Registered at import with an empty view; start-up binds the operator's (kopf's indexes).
    """

    def __init__(
        self,
        name: str,
        doc: str,
        labels: list[str],
        source: Callable[[], Mapping[tuple[str, ...], int]] = _no_objects,
    ) -> None:
        self._name, self._doc, self._labels, self._source = name, doc, labels, source

    def bind(self, source: Callable[[], Mapping[tuple[str, ...], int]]) -> None:
        """Count from `source` from now on."""
        self._source = source

    def describe(self) -> Iterable[GaugeMetricFamily]:
        yield GaugeMetricFamily(self._name, self._doc, labels=self._labels)

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(self._name, self._doc, labels=self._labels)
        for label_values, count in sorted(read_settled(lambda: dict(self._source())).items()):
            family.add_metric(list(label_values), count)
        yield family


T = TypeVar("T")

READ_ATTEMPTS = 5


def read_settled(read: Callable[[], T]) -> T:
    """`read()`, again while it fails because the collection it walks changed under it.

    Scrapes run on the metrics server's thread while kopf's loop updates the indexes they
    read: a walk that meets a change raises RuntimeError; the next one usually does not.
    """
    for _ in range(READ_ATTEMPTS - 1):
        try:
            return read()
        except RuntimeError:
            continue
    return read()


def _no_stamps() -> Iterable[float]:
    return ()


class OldestCollector(Collector):
    """One gauge: the least recent of a set of Unix timestamps (one per object: pushed with
    `touch`, or read from a bound view), absent while there is none. An alert compares it
    with `time()`; no object's name becomes a label."""

    def __init__(self, name: str, doc: str) -> None:
        self._name, self._doc = name, doc
        self._stamps: dict[str, float] = {}
        self._source: Callable[[], Iterable[float]] = _no_stamps

    def bind(self, source: Callable[[], Iterable[float]]) -> None:
        """Also take the timestamps `source` returns at scrape time."""
        self._source = source

    def touch(self, key: str, at: float) -> None:
        """`key` was active at `at` (seconds since the epoch)."""
        self._stamps[key] = at

    def forget(self, key: str) -> None:
        self._stamps.pop(key, None)

    def __len__(self) -> int:
        return len(self._stamps)

    def describe(self) -> Iterable[GaugeMetricFamily]:
        yield GaugeMetricFamily(self._name, self._doc)

    def collect(self) -> Iterable[GaugeMetricFamily]:
        # Copies: scrapes run on another thread.
        stamps = [*list(self._stamps.values()), *read_settled(lambda: list(self._source()))]
        if stamps:
            yield GaugeMetricFamily(self._name, self._doc, value=min(stamps))


RUNS_BY_PHASE = PhaseCollector("lattice_runs", "Runs by phase.", ["phase"])
INTENTS_BY_PHASE = PhaseCollector(
    "lattice_intents", "Intents by phase and kind.", ["phase", "kind"]
)
SPRITES_BY_PHASE = PhaseCollector(
    "lattice_sprites",
    "Sprites by phase and by what the backend last reported (cold, warm, running, unknown).",
    ["phase", "backend_status"],
)
RUN_OLDEST_ACTIVITY = OldestCollector(
    "lattice_run_oldest_activity_timestamp_seconds",
    "Unix time of the least recent activity (session started, output or events read) among "
    "the Runs this replica drives in phase Running; absent when none runs.",
)
INTENT_OLDEST_AWAITING = OldestCollector(
    "lattice_intent_oldest_awaiting_approval_timestamp_seconds",
    "Unix time since which the longest-waiting Intent awaits approval; absent when none does.",
)
for _collector in (
    RUNS_BY_PHASE,
    INTENTS_BY_PHASE,
    SPRITES_BY_PHASE,
    RUN_OLDEST_ACTIVITY,
    INTENT_OLDEST_AWAITING,
):
    REGISTRY.register(_collector)


def metric_names() -> set[str]:
    """Every metric's name as exposed (counters with `_total`), for the docs' table."""
    names: set[str] = set()
    # The registry has no public list of its collectors.
    for collector in list(REGISTRY._collector_to_names):
        describe = getattr(collector, "describe", None)
        families = describe() if describe is not None else collector.collect()
        for family in families:
            names.add(f"{family.name}_total" if family.type == "counter" else family.name)
    return names


__all__ = [
    "ADMISSION_OUTCOMES",
    "ADMISSION_REQUESTS",
    "ADMISSION_SECONDS",
    "APPROVALS",
    "AWAITING_APPROVAL_SECONDS",
    "BACKEND_CALL_SECONDS",
    "BACKEND_ERRORS",
    "BACKEND_THROTTLED",
    "BUILD_INFO",
    "EVENTS_INGESTED",
    "FILEOPS_DONE",
    "INTENTS_BY_PHASE",
    "INTENT_DECISIONS",
    "INTENT_DECISION_SECONDS",
    "INTENT_OLDEST_AWAITING",
    "K8S_EVENTS_DROPPED",
    "LEADER",
    "OUTBOX_LAG",
    "RECEIPTS",
    "RECEIPTS_MISSING",
    "RECEIPT_POST_FAILURES",
    "RECONCILES",
    "RECONCILE_OUTCOMES",
    "RECONCILE_SECONDS",
    "REFUSED_ACTIONS",
    "REGISTRY",
    "RUNS_BY_PHASE",
    "RUN_APPLY_TO_EXEC_SECONDS",
    "RUN_COLD_STARTS",
    "RUN_OLDEST_ACTIVITY",
    "SPRITES_BY_PHASE",
    "STATUS_PATCHES",
    "VIOLATIONS",
    "WEBHOOK_CERT_EXPIRY",
    "WEBHOOK_CERT_STEPS",
    "OldestCollector",
    "PhaseCollector",
    "admission_request",
    "metric_names",
    "reconcile_timer",
]
