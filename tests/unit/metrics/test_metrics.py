"""The metrics registry: the docs' table lists it exactly, names follow Prometheus'
conventions, no label can carry an object's name; the collectors and helpers behave."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from lattice_operator.metrics import (
    ADMISSION_OUTCOMES,
    REGISTRY,
    OldestCollector,
    PhaseCollector,
    admission_request,
    metric_names,
)

ROOT = Path(__file__).resolve().parents[3]
# Labels that would name (or count) one object: never allowed.
PER_OBJECT_LABELS = {"name", "namespace", "uid", "run", "sprite", "intent", "session", "pod"}


def _documented() -> dict[str, str]:
    text = (ROOT / "docs" / "operating.md").read_text()
    section = text.split("## Metrics (`/metrics`)", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(lattice_[a-z_]+)` \| (\w+) \|", section, flags=re.MULTILINE)
    return dict(rows)


def _families() -> dict[str, tuple[str, list[str]]]:
    """name as exposed → (type, label names), from every collector's description."""
    out: dict[str, tuple[str, list[str]]] = {}
    for collector in list(REGISTRY._collector_to_names):
        for family in collector.describe():  # type: ignore[attr-defined]
            name = f"{family.name}_total" if family.type == "counter" else family.name
            labels = sorted(
                {k for s in family.samples for k in s.labels}
                | set(getattr(collector, "_labelnames", ()))
                | set(getattr(collector, "_labels", ()))
            )
            out[name] = (family.type, labels)
    return out


def test_the_docs_table_is_the_registry() -> None:
    documented = _documented()
    assert set(documented) == metric_names()
    families = _families()
    assert {name: kind for name, (kind, _) in families.items()} == documented


def test_names_follow_prometheus_conventions() -> None:
    for name, (kind, labels) in _families().items():
        assert name.startswith("lattice_"), name
        assert name.endswith("_total") == (kind == "counter"), name
        if kind == "histogram":
            assert name.endswith(("_seconds", "_bytes")), name
        if "timestamp" in name:
            assert name.endswith("_timestamp_seconds"), name
        assert not PER_OBJECT_LABELS & set(labels), (name, labels)


def test_phase_collector_counts_from_its_bound_view() -> None:
    registry = CollectorRegistry()
    collector = PhaseCollector("unit_things", "Things.", ["phase"])
    registry.register(collector)
    assert b"unit_things{" not in generate_latest(registry)  # unbound: no series, no error
    collector.bind(lambda: {("Ready",): 3, ("Pending",): 1})
    assert registry.get_sample_value("unit_things", {"phase": "Ready"}) == 3
    assert registry.get_sample_value("unit_things", {"phase": "Pending"}) == 1


def test_a_view_changed_during_a_scrape_is_read_again() -> None:
    """kopf's loop changes the indexes while the metrics thread walks them."""
    registry = CollectorRegistry()
    collector = PhaseCollector("unit_moving", "Things.", ["phase"])
    registry.register(collector)
    walks = []

    def moving() -> dict[tuple[str, ...], int]:
        walks.append(1)
        if len(walks) < 3:
            raise RuntimeError("dictionary changed size during iteration")
        return {("Ready",): 2}

    collector.bind(moving)
    assert registry.get_sample_value("unit_moving", {"phase": "Ready"}) == 2
    assert len(walks) == 3


def test_oldest_collector_reports_the_least_recent_and_nothing_when_empty() -> None:
    registry = CollectorRegistry()
    oldest = OldestCollector("unit_oldest_timestamp_seconds", "Oldest.")
    registry.register(oldest)
    assert registry.get_sample_value("unit_oldest_timestamp_seconds") is None
    oldest.touch("a", 100.0)
    oldest.touch("b", 50.0)
    assert registry.get_sample_value("unit_oldest_timestamp_seconds") == 50.0
    oldest.touch("b", 150.0)  # b did something since
    assert registry.get_sample_value("unit_oldest_timestamp_seconds") == 100.0
    oldest.bind(lambda: [70.0])
    assert registry.get_sample_value("unit_oldest_timestamp_seconds") == 70.0
    oldest.bind(lambda: [])
    oldest.forget("a")
    oldest.forget("b")
    oldest.forget("never-seen")
    assert registry.get_sample_value("unit_oldest_timestamp_seconds") is None


class Refused(Exception):
    pass


def _webhook(outcome: str) -> float:
    labels = {"webhook": "unit-test", "outcome": outcome}
    return REGISTRY.get_sample_value("lattice_admission_requests_total", labels) or 0.0


def test_webhook_requests_are_counted_by_outcome() -> None:
    before = {o: _webhook(o) for o in ADMISSION_OUTCOMES}
    with admission_request("unit-test", refused=(Refused,)):
        pass
    with pytest.raises(Refused), admission_request("unit-test", refused=(Refused,)):
        raise Refused
    with pytest.raises(KeyError), admission_request("unit-test", refused=(Refused,)):
        raise KeyError("bug")
    assert {o: _webhook(o) - before[o] for o in ADMISSION_OUTCOMES} == {
        "allowed": 1,
        "refused": 1,
        "error": 1,
    }
    count = REGISTRY.get_sample_value(
        "lattice_admission_duration_seconds_count", {"webhook": "unit-test"}
    )
    assert count == 3
