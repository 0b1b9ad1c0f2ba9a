"""docs/operating.md's metrics table lists exactly the operator's metrics and their labels."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client.metrics import MetricWrapperBase

from lattice_operator import metrics

DOC = Path(__file__).resolve().parents[3] / "docs" / "operating.md"
# Registered at start-up from kopf's indexes (handlers/run.py, handlers/intent.py).
PHASE_COLLECTORS = {"lattice_runs": ("phase",), "lattice_intents": ("phase", "kind")}


def documented() -> dict[str, tuple[str, ...]]:
    section = DOC.read_text().split("## Metrics", 1)[1].split("\n## ", 1)[0]
    table: dict[str, tuple[str, ...]] = {}
    for name, labels in re.findall(r"^\| `(lattice_\w+)` \| (.*?) \|$", section, re.MULTILINE):
        plain = re.sub(r"\([^)]*\)", "", labels)  # drop the value lists and remarks
        table[name] = tuple(
            part.split()[0] for part in plain.split(",") if part.strip() not in ("", "—")
        )
    return table


def registered() -> dict[str, tuple[str, ...]]:
    found: dict[str, tuple[str, ...]] = dict(PHASE_COLLECTORS)
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            suffix = "_total" if value._type == "counter" else ""
            found[value._name + suffix] = tuple(value._labelnames)
    return found


def test_the_metrics_table_is_the_registry() -> None:
    table, ours = documented(), registered()
    assert sorted(table) == sorted(ours)
    assert table == ours
