"""The suite's files are handed to the workers longest first, each file's tests together."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tests.support.file_costs import (
    Timeline,
    costs_from_timeline,
    file_cost,
    longest_first,
    main,
    order_items,
    worker_spans,
)

COSTS = {
    "tests/e2e/test_a.py": 60.0,
    "tests/e2e/test_b.py": 20.0,
    "tests/e2e/test_c.py": 30.0,
    "tests/unit/test_x.py": 0.5,
}


def test_longest_first_and_equal_costs_keep_their_order() -> None:
    rels = ["tests/unit/test_x.py", "tests/e2e/test_b.py", "tests/e2e/test_a.py"]
    rels += ["tests/unit/test_y.py", "tests/unit/test_z.py"]  # unknown: 0.5 each, as listed
    assert longest_first(rels, COSTS) == [
        "tests/e2e/test_a.py",
        "tests/e2e/test_b.py",
        "tests/unit/test_x.py",
        "tests/unit/test_y.py",
        "tests/unit/test_z.py",
    ]


def test_files_sharing_the_operator_run_together_where_the_longest_of_them_would() -> None:
    rels = [*COSTS, "tests/e2e/test_d.py"]
    costs = {**COSTS, "tests/e2e/test_d.py": 10.0}
    together = {"tests/e2e/test_c.py", "tests/e2e/test_d.py"}
    # Longest first is a, c, b, d, x: b no longer runs between c and d.
    assert longest_first(rels, costs, together) == [
        "tests/e2e/test_a.py",
        "tests/e2e/test_c.py",
        "tests/e2e/test_d.py",
        "tests/e2e/test_b.py",
        "tests/unit/test_x.py",
    ]
    assert longest_first(rels, costs, ()) == longest_first(rels, costs)


def test_a_new_file_costs_the_median_of_its_directory() -> None:
    assert file_cost("tests/e2e/test_new.py", COSTS) == 30.0
    assert file_cost("tests/contract/test_new.py", COSTS) == 1.0  # nothing measured there


@dataclass
class Item:
    path: Path
    name: str


def test_items_are_grouped_by_file_in_their_own_order(tmp_path: Path) -> None:
    (tmp_path / "tests" / "e2e").mkdir(parents=True)
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    a, x = tmp_path / "tests/e2e/test_a.py", tmp_path / "tests/unit/test_x.py"
    items = [Item(x, "x1"), Item(a, "a1"), Item(x, "x2"), Item(a, "a2"), Item(a, "a3")]
    order_items(items, tmp_path, COSTS)
    assert [item.name for item in items] == ["a1", "a2", "a3", "x1", "x2"]


def test_the_timeline_and_the_costs_written_from_it(tmp_path: Path) -> None:
    timeline = tmp_path / "timeline.jsonl"
    recorder = Timeline(timeline, tmp_path)
    for nodeid in ("tests/e2e/test_a.py::one", "tests/e2e/test_a.py::two", "tests/x.py::t"):
        recorder.pytest_runtest_logstart(nodeid, ("", 0, ""))
        recorder.pytest_runtest_logfinish(nodeid, ("", 0, ""))
    lines = timeline.read_text().splitlines()
    assert [json.loads(line)["file"] for line in lines] == [
        "tests/e2e/test_a.py",
        "tests/e2e/test_a.py",
        "tests/x.py",
    ]
    assert set(costs_from_timeline(lines)) == {"tests/e2e/test_a.py", "tests/x.py"}

    handmade = [
        json.dumps({"file": "f.py", "test": "f.py::a", "worker": "gw0", "start": 10, "end": 40}),
        json.dumps({"file": "g.py", "test": "g.py::a", "worker": "gw1", "start": 10, "end": 20}),
        json.dumps({"file": "f.py", "test": "f.py::b", "worker": "gw0", "start": 40, "end": 45}),
    ]
    assert costs_from_timeline(handmade) == {"f.py": 35.0, "g.py": 10.0}
    assert worker_spans(handmade) == {"gw0": (10.0, 45.0, 35.0), "gw1": (10.0, 20.0, 10.0)}
    (tmp_path / "handmade.jsonl").write_text("\n".join(handmade) + "\n")
    output = tmp_path / "costs.json"
    assert main([str(tmp_path / "handmade.jsonl"), "--output", str(output)]) == 0
    assert json.loads(output.read_text()) == {"f.py": 35.0, "g.py": 10.0}
