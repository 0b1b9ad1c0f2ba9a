"""`lattice events replay` end to end on the captured samples in tests/data/protocol."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lattice_operator.cli import app

DATA = Path(__file__).resolve().parents[2] / "data" / "protocol"
IDS = ["--sprite-id", "sprite-42", "--work-item", "issue-17"]


def replay(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["events", "replay", *IDS, *args])
    return result.exit_code, result.output


def replay_json(sample: str, *extra: str, outbox: bool = True) -> dict[str, Any]:
    args = ["--stdout", str(DATA / sample / "stdout.txt")]
    if outbox:
        args += ["--outbox", str(DATA / sample / "outbox.jsonl")]
    code, output = replay(*args, "--json", *extra)
    assert code == 0, output
    document: dict[str, Any] = json.loads(output)
    return document


@pytest.mark.parametrize("frame_bytes", ["1", "7", "4096"])
def test_complete_session(frame_bytes: str) -> None:
    doc = replay_json("complete", "--frame-bytes", frame_bytes, "--exit-code", "0")
    status = doc["status"]
    assert status["state"] == "Completed"
    assert status["eventCount"] == 18 == doc["cursor"]["lineCount"]
    assert status["completion"]["status"] == "success"
    assert [p["state"] for p in status["phases"]] == ["Succeeded"] * 3
    assert status["progress"]["percent"] == 90
    assert doc["violations"] == []
    events = [r["event"] for r in doc["receipts"]]
    assert events[:2] == ["session.starting", "session.started"]
    assert events[-2:] == ["session.ending", "session.ended"]
    assert events.count("frame.opened") == 4
    assert [r["sequence"] for r in doc["receipts"]] == list(range(1, len(events) + 1))
    assert "progress 100%" not in doc["logTail"]  # a progress bar shows its last state
    assert "Resolving dependencies... 100%" in doc["logTail"]


def test_stdout_alone_is_taken_as_it_is() -> None:
    doc = replay_json("complete", outbox=False)
    assert doc["status"]["eventCount"] == 17  # the capture misses one event


def test_waiting_session() -> None:
    status = replay_json("waiting")["status"]
    assert status["state"] == "Waiting"
    assert status["waiting"]["checkpointId"] == "chk_abc123"
    assert status["waiting"]["expectedInputs"] == {
        "approved": "boolean",
        "comments": "array<string>",
    }
    assert status["waiting"]["requestId"] == status["actionRequests"][0]["requestId"]


def test_a_resumed_run_ends_the_waiting_session_before_the_resume(tmp_path: Path) -> None:
    first = (DATA / "waiting" / "outbox.jsonl").read_bytes()
    # The checkpoint was taken before WAITING: the restored file lacks that line.
    restored = first[: first.rstrip(b"\n").rfind(b"\n") + 1]
    done = {
        "protocol_version": "v1",
        "event_type": "COMPLETED",
        "sprite_id": "sprite-42",
        "work_item_id": "issue-17",
        "timestamp": "2026-01-15T10:40:00Z",
        "payload": {"status": "success", "summary": "merged"},
    }
    second = restored + json.dumps(done).encode() + b"\n"
    (tmp_path / "s1.jsonl").write_bytes(first)
    (tmp_path / "s2.jsonl").write_bytes(second)
    code, output = replay(
        "--outbox", str(tmp_path / "s1.jsonl"), "--outbox", str(tmp_path / "s2.jsonl"), "--json"
    )
    assert code == 0, output
    doc = json.loads(output)
    assert doc["status"]["state"] == "Completed"
    events = [r["event"] for r in doc["receipts"]]
    resumed = events.index("session.starting", 1)  # the resume starts a session
    before = events[:resumed]
    assert before[-2:] == ["session.ending", "session.ended"], before
    assert events.count("session.ended") == 2
    assert [r["sequence"] for r in doc["receipts"]] == list(range(1, len(events) + 1))


def test_malformed_corpus_reports_every_violation() -> None:
    doc = replay_json("malformed")
    assert [(v["category"], v["source"]) for v in doc["violations"]] == [
        ("not_json", "outbox"),
        ("not_object", "outbox"),
        ("wrong_protocol_version", "outbox"),
        ("unknown_event_type", "outbox"),
        ("invalid_field", "outbox"),
        ("invalid_field", "outbox"),
        ("spoofed_identity", "outbox"),
        ("spoofed_identity", "outbox"),
        ("bad_timestamp", "outbox"),
        ("blocking_request_without_waiting", "outbox"),
        ("waiting_without_checkpoint", "outbox"),
        ("event_after_waiting", "outbox"),
        ("stdout_only_event", "stdout"),
    ]
    assert doc["status"]["violationCount"] == 13
    assert doc["status"]["eventCount"] == 4


def test_tables_by_default() -> None:
    code, output = replay(
        "--stdout",
        str(DATA / "malformed" / "stdout.txt"),
        "--outbox",
        str(DATA / "malformed" / "outbox.jsonl"),
    )
    assert code == 0
    for text in ("Run status", "Violations (13)", "spoofed_identity", "Lifeloop receipts"):
        assert text in output


def test_strict_fails_on_violations_only() -> None:
    malformed = ["--outbox", str(DATA / "malformed" / "outbox.jsonl"), "--json", "--strict"]
    assert replay(*malformed)[0] == 1
    complete = ["--outbox", str(DATA / "complete" / "outbox.jsonl"), "--json", "--strict"]
    assert replay(*complete)[0] == 0


def test_an_input_is_required() -> None:
    code, _ = replay("--json")
    assert code == 2


def test_the_installed_command() -> None:
    lattice = Path(sys.executable).parent / "lattice"
    command = (
        [str(lattice)]
        if lattice.exists()
        else [sys.executable, "-c", "from lattice_operator.cli import main; main()"]
    )
    out = subprocess.run(
        [
            *command,
            "events",
            "replay",
            *IDS,
            "--json",
            "--outbox",
            str(DATA / "waiting" / "outbox.jsonl"),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(out.stdout)["status"]["state"] == "Waiting"


def test_both_inputs_stream_in_bounded_memory(tmp_path: Path) -> None:
    """stdout is read only a bounded distance ahead of the outbox and neither file is read
    whole: the peak of Python allocations stays far below the size of the inputs."""
    import tracemalloc

    from tests.support.streams import outbox_bytes, realistic_events, stdout_bytes

    lines = list(realistic_events(40_000))
    (tmp_path / "outbox.jsonl").write_bytes(outbox_bytes(lines))
    (tmp_path / "stdout.txt").write_bytes(stdout_bytes(lines))
    inputs = sum(p.stat().st_size for p in tmp_path.iterdir())
    del lines
    tracemalloc.start()
    try:
        code, output = replay(
            "--outbox",
            str(tmp_path / "outbox.jsonl"),
            "--stdout",
            str(tmp_path / "stdout.txt"),
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == 0, output[-2000:]
    assert "40000 committed of 40000 lines" in output
    assert "Violations (1)" in output  # only missing_terminal_event: no copy was dropped
    assert "the last 200 shown" in output
    # Reading either file whole, or holding stdout's copies until the end, costs more than
    # the inputs' size; streaming costs a bounded amount (lazy imports included).
    assert peak < inputs // 3, (peak, inputs)
