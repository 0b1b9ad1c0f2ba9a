"""Monitoring end to end: a real Prometheus (Debian's package, on 127.0.0.1) scrapes the
operator while the tests drive a Run, an approval and an Intent; its HTTP API must show what
happened, every dashboard panel's query must return data, the series count must not grow
with the number of objects, and the "no active replica" alert must go pending when the
operator cannot be reached."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest

from dashboards.lattice import OUTPUTS, panel_queries
from lattice_operator.api.v1alpha1.intent import IntentKind, IntentPhase
from lattice_operator.api.v1alpha1.run import RunPhase
from lattice_operator.api.v1alpha1.sprite import SpritePhase
from lattice_operator.handlers.admission_config import APPROVAL_HANDLER
from lattice_operator.lifeloop.classes import FailureClass
from lattice_operator.ports.sprites import SpriteBackend
from tests.support.admission_cases import build
from tests.support.agents import agent
from tests.support.cluster import Cluster, wait_for
from tests.support.e2e_intents import intent_doc
from tests.support.e2e_runs import apply_run, lattice, ready_sprite
from tests.support.prometheus import JOB, Prometheus, prometheus_server
from tests.support.sprites_server import LocalSprites
from tests.support.stack import Stack, operator_stack

pytestmark = pytest.mark.e2e

EVENTS = 40
POLICY = {
    "apiVersion": "lattice.dev/v1alpha1",
    "kind": "IntentPolicy",
    "metadata": {"name": "monitored"},
    "spec": {
        "rules": [
            {
                "name": "gated",
                "match": "has(intent.metadata.labels) && 'gated' in intent.metadata.labels",
                "risk": "dangerous",
                "outcome": "require_approval",
                "approvers": 1,
            },
        ]
    },
}
# Every kind of thing the dashboard shows: events, a protocol violation (a line that is not
# JSON), an action request it is not granted, completion.
BUSY_AGENT = agent(
    f"""
emit("PHASE_STARTED", {{"phase": "work"}})
for i in range({EVENTS}):
    emit("INFO", {{"message": "step %d" % i}})
emit_raw("{{not json")
emit("ACTION_REQUEST", {{"action": "FETCH_CREDENTIAL", "parameters": {{"name": "gh"}},
                        "blocking": False}})
emit("PHASE_FINISHED", {{"phase": "work"}})
emit("COMPLETED", {{"status": "success", "summary": "done"}})
"""
)


# The operator of this module serves only its namespaces: objects other modules leave behind
# in namespaces still being deleted must not add to the counts asserted here.
PREFIX = "monitoring"


@pytest.fixture(scope="module")
def stack(
    cluster: Cluster, local_sprites: LocalSprites, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    log_dir: Path = tmp_path_factory.mktemp("operator")
    with operator_stack(cluster, local_sprites, log_dir, "--namespace", f"t-{PREFIX}-*") as s:
        yield s


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    name = cluster.create_namespace(f"{PREFIX}-{request.node.name}")
    yield name
    cluster.delete_namespace(name)


@pytest.fixture(scope="module")
def prometheus(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    workdir: Path = tmp_path_factory.mktemp("prometheus")
    with prometheus_server(workdir, [f"127.0.0.1:{stack.metrics_port}"]) as server:
        wait_for(lambda: server.scrapes_since(0), timeout=30, what="the first scrape")
        yield server


def _scrape(stack: Stack) -> str:
    return httpx.get(f"http://127.0.0.1:{stack.metrics_port}/metrics", trust_env=False).text


def _series_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def _value(prom: Prometheus, expr: str) -> float | None:
    result = prom.query(expr)
    if not result:
        return None
    assert len(result) == 1, (expr, result)
    return float(result[0]["value"][1])


def _settled(prom: Prometheus) -> None:
    """Wait for a scrape that started after now (so it saw everything done so far)."""
    after = time.time()
    wait_for(lambda: prom.scrapes_since(after + 0.1), timeout=30, what="a fresh scrape")


def _equals(prom: Prometheus, expr: str, expected: float) -> None:
    def reached() -> bool:
        return _value(prom, expr) == expected

    try:
        wait_for(reached, timeout=30, what=f"{expr} == {expected}")
    except AssertionError as exc:
        raise AssertionError(f"{expr}: {_value(prom, expr)} != {expected}") from exc


def test_prometheus_sees_the_run_the_approval_and_the_intent(
    stack: Stack, prometheus: Prometheus, namespace: str
) -> None:
    assert [t["labels"]["job"] for t in prometheus.targets()] == [JOB]
    stack.create(namespace, POLICY)
    ready_sprite(stack, namespace)
    apply_run(stack, namespace, "busy-run", ["python3", "-c", BUSY_AGENT])
    run = stack.wait_phase(namespace, "runs", "busy-run", {"Succeeded", "Failed"})
    assert run["status"]["phase"] == "Succeeded", run["status"]

    gated = intent_doc("awaited-intent", ["sh", "-c", "echo approved"])
    gated["metadata"]["labels"] = {"gated": "yes"}
    stack.create(namespace, gated)
    stack.wait_phase(namespace, "intents", "awaited-intent", {"AwaitingApproval"})
    _settled(prometheus)
    _equals(prometheus, 'sum(lattice_intents{phase="AwaitingApproval"})', 1)
    waiting_since = _value(prometheus, "lattice_intent_oldest_awaiting_approval_timestamp_seconds")
    assert waiting_since is not None
    assert time.time() - 120 < waiting_since <= time.time()

    lattice(stack, "approve", "awaited-intent", "-n", namespace, "--reason", "watched")
    intent = stack.wait_phase(namespace, "intents", "awaited-intent", {"Succeeded", "Failed"})
    assert intent["status"]["phase"] == "Succeeded", intent["status"]

    _settled(prometheus)
    sel = f'job="{JOB}"'
    _equals(prometheus, f"lattice_leader{{{sel}}}", 1)
    _equals(prometheus, f'sum(lattice_runs{{{sel},phase="Succeeded"}})', 2)
    _equals(prometheus, f'sum(lattice_intents{{{sel},phase="Succeeded"}})', 1)
    _equals(prometheus, f'sum(lattice_sprites{{{sel},phase="Ready"}})', 1)
    _equals(prometheus, f'sum(lattice_events_ingested_total{{{sel},type="INFO"}})', EVENTS)
    _equals(prometheus, f'sum(lattice_events_ingested_total{{{sel},type="COMPLETED"}})', 1)
    _equals(prometheus, f'lattice_approvals_total{{{sel},outcome="approve"}}', 1)
    _equals(prometheus, f"lattice_intent_awaiting_approval_seconds_count{{{sel}}}", 1)
    _equals(prometheus, f"lattice_run_apply_to_exec_seconds_count{{{sel}}}", 2)
    _equals(
        prometheus, f'lattice_intent_decision_seconds_count{{{sel},outcome="require_approval"}}', 1
    )
    # Violations and refusals: what the Runs' status records, category by category (the
    # Intent's Run prints no COMPLETED: a missing_terminal_event).
    runs = stack.cluster.custom.list_namespaced_custom_object(
        "lattice.dev", "v1alpha1", namespace, "runs"
    )["items"]
    violations: dict[str, int] = {}
    for item in runs:
        for category, count in (item["status"]["events"].get("violationCounts") or {}).items():
            violations[category] = violations.get(category, 0) + count
    assert {"not_json", "missing_terminal_event"} <= set(violations), violations
    for category, count in violations.items():
        metric = f'lattice_protocol_violations_total{{{sel},category="{category}"}}'
        _equals(prometheus, metric, count)
    _equals(
        prometheus, f"sum(lattice_protocol_violations_total{{{sel}}})", sum(violations.values())
    )
    refused = [a for a in run["status"]["actionResults"] if a["status"] == "refused"]
    assert len(refused) == 1, run["status"]["actionResults"]
    _equals(prometheus, f"sum(lattice_refused_actions_total{{{sel}}})", 1)
    approvals = (
        f'lattice_admission_requests_total{{{sel},webhook="{APPROVAL_HANDLER}",outcome="allowed"}}'
    )
    assert (_value(prometheus, approvals) or 0) >= 1
    # Nothing is waiting any more: the gauge of the longest wait is gone.
    assert prometheus.query("lattice_intent_oldest_awaiting_approval_timestamp_seconds") == []
    assert prometheus.query("lattice_run_oldest_activity_timestamp_seconds") == []


def _finite(result: list[dict[str, Any]]) -> bool:
    return any(math.isfinite(float(r["value"][1])) for r in result)


def test_every_dashboard_panel_returns_data(prometheus: Prometheus) -> None:
    # Runs after the test above in this module: the operator did everything a panel shows.
    import json

    model = json.loads(OUTPUTS[0].read_text())
    queries = panel_queries(model)
    assert len(queries) >= 25
    _settled(prometheus)
    broken = []
    for title, expr in queries:
        # What Grafana substitutes: the job variable, and a rate window over the test's run.
        concrete = expr.replace("$job", JOB).replace("$__rate_interval", "10m")
        result = prometheus.query(concrete)
        if not _finite(result):
            broken.append((title, concrete, result))
    assert broken == [], "panels without data"


# Gauges of objects by state: which of their (closed) label values are present depends on
# the objects' states at the moment of the scrape (and on objects of earlier tests whose
# namespace is still being deleted), not on how many objects there are.
STATE_VALUES: dict[str, dict[str, set[str]]] = {
    "lattice_sprites": {
        "phase": set(get_args(SpritePhase)),
        "backend_status": {"cold", "warm", "running", "unknown"},
    },
    "lattice_runs": {"phase": set(get_args(RunPhase))},
    "lattice_intents": {"phase": set(get_args(IntentPhase)), "kind": set(get_args(IntentKind))},
    # Errors come when they come (a race with a deletion): their labels are closed sets too.
    "lattice_backend_errors_total": {
        "operation": {n for n in dir(SpriteBackend) if not n.startswith("_")},
        "failure_class": {c.value for c in FailureClass},
    },
}


CLOSED = "lattice_(sprites|runs|intents|backend_errors_total)"
STORED = f'count({{job="{JOB}",__name__=~"lattice_.+",__name__!~"{CLOSED}"}})'


def _parse(line: str) -> tuple[str, dict[str, str]]:
    series = line.rsplit(" ", 1)[0]
    name, _, rest = series.partition("{")
    return name, dict(re.findall(r'(\w+)="([^"]*)"', rest))


def _identities(lines: list[str]) -> list[str]:
    """Each series as name and labels, but those of the closed-set metrics (checked apart)."""
    return sorted(line.rsplit(" ", 1)[0] for line in lines if _parse(line)[0] not in STATE_VALUES)


def _sprite_and_runs(stack: Stack, namespace: str, sprite: str, runs: int) -> None:
    stack.create(namespace, build("sprite.yaml", sprite, {"spec.networkPolicy": {"rules": []}}))
    for i in range(runs):
        doc = build("run.yaml", f"{sprite}-r{i}", {"spec.spriteRef.name": sprite})
        doc["spec"]["command"] = ["python3", "-c", BUSY_AGENT]
        doc["spec"].pop("retries", None)
        stack.create(namespace, doc)


def _all_done(stack: Stack, namespace: str, runs: int) -> None:
    def done() -> bool:
        items = stack.cluster.custom.list_namespaced_custom_object(
            "lattice.dev", "v1alpha1", namespace, "runs"
        )["items"]
        phases = [(i.get("status") or {}).get("phase") for i in items]
        return len(items) == runs and all(p in ("Succeeded", "Failed") for p in phases)

    wait_for(done, timeout=240, what=f"{runs} Runs to finish")


def _sprite_made_and_deleted(stack: Stack, namespace: str, name: str) -> None:
    stack.create(namespace, build("sprite.yaml", name, {"spec.networkPolicy": {"rules": []}}))
    stack.wait_sprite_ready(namespace, name)
    stack.cluster.kubectl("delete", "sprite", name, "-n", namespace, "--wait=true")


def test_series_do_not_grow_with_the_number_of_objects(
    stack: Stack, prometheus: Prometheus, namespace: str
) -> None:
    # First a few objects of every shape (every label value they bring appears: a Sprite
    # deleted, too), then three times as many more: the number of series must stay the same.
    _sprite_and_runs(stack, namespace, "fleet-0", 2)
    _sprite_made_and_deleted(stack, namespace, "fleet-gone-0")
    _all_done(stack, namespace, 2)
    _settled(prometheus)
    first = _series_lines(_scrape(stack))
    stored_first = _value(prometheus, STORED)
    assert stored_first is not None
    assert stored_first > 100
    for i in range(1, 4):
        _sprite_and_runs(stack, namespace, f"fleet-{i}", 2)
        _sprite_made_and_deleted(stack, namespace, f"fleet-gone-{i}")
    _all_done(stack, namespace, 8)
    _settled(prometheus)
    text = _scrape(stack)
    second = _series_lines(text)
    assert _identities(second) == _identities(first)
    # The state gauges' and errors' label values come from closed sets.
    for line in second:
        name, labels = _parse(line)
        if name in STATE_VALUES:
            for label, value in labels.items():
                assert value in STATE_VALUES[name][label], line
    # Prometheus agrees: the series it stored from the operator did not grow either.
    assert _value(prometheus, STORED) == stored_first
    # No object's name, no namespace, no credential in any series.
    for secret in (stack.sprites.token, namespace, "fleet-", "busy-run", "awaited-intent"):
        assert secret not in text, secret


def test_no_active_replica_alert_when_prometheus_cannot_reach_the_operator(
    stack: Stack, prometheus: Prometheus
) -> None:
    # Last in this module: it stops the operator (and starts a new one afterwards).
    expr = f'(sum(lattice_leader{{job="{JOB}"}}) or vector(0)) < 1'
    _settled(prometheus)
    assert prometheus.query(expr) == []
    stack.operator.stop()
    try:

        def unreachable() -> bool:
            return all(t["health"] == "down" for t in prometheus.targets())

        wait_for(unreachable, timeout=30, what="the target to be down")
        assert prometheus.query(f'up{{job="{JOB}"}}')[0]["value"][1] == "0"
        assert len(prometheus.query(expr)) == 1
        pending = 'ALERTS{alertname="LatticeOperatorNoActiveReplica",alertstate="pending"}'
        wait_for(lambda: prometheus.query(pending), timeout=30, what="the alert to be pending")
        [alert] = prometheus.query(pending)
        assert alert["metric"]["severity"] == "critical"
    finally:
        stack.start()
    wait_for(lambda: not prometheus.query(expr), timeout=60, what="the operator to be back")
