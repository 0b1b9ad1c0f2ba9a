"""RunEventEngine: sequence rules, sessions, misuse, the stdout-only mode, the live preview."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lattice_operator.protocol import (
    EngineLimits,
    EngineStateError,
    EventType,
    OutboxGapError,
    RunEventEngine,
    StreamCursor,
    ViolationCategory,
)
from lattice_operator.protocol.violations import Violation
from tests.support.streams import PREFIX, SPRITE, WORK, ev, info

V = ViolationCategory

BLOCKING_PR = ev(
    "ACTION_REQUEST", {"action": "OPEN_PR", "parameters": {"title": "t"}, "blocking": True}, at=2
)
WAITING = ev(
    "WAITING",
    {"reason": "PR_REVIEW", "checkpoint_id": "chk_1", "expected_inputs": {"approved": "boolean"}},
    at=3,
)
COMPLETED = ev("COMPLETED", {"status": "success", "summary": "done"}, at=9)


def outbox(*lines: bytes) -> bytes:
    return b"".join(item + b"\n" for item in lines)


def engine(**kw: object) -> RunEventEngine:
    return RunEventEngine(SPRITE, WORK, **kw)  # type: ignore[arg-type]


def categories(violations: list[Violation]) -> list[V]:
    return [v.category for v in violations]


def test_events_after_completed_are_refused() -> None:
    e = engine()
    result = e.feed_outbox(outbox(info("a"), COMPLETED, info("late"), COMPLETED))
    assert [c.event_type for c in result.committed] == [EventType.INFO, EventType.COMPLETED]
    assert categories(result.violations) == [V.EVENT_AFTER_COMPLETED, V.EVENT_AFTER_COMPLETED]
    assert result.violations[0].line == 2
    assert e.status().state == "Completed"
    assert e.end_session(0).violations == []


def test_events_after_waiting_are_refused_until_resumed() -> None:
    e = engine()
    data = outbox(info("a"), BLOCKING_PR, WAITING, info("still working?"))
    result = e.feed_outbox(data)
    assert categories(result.violations) == [V.EVENT_AFTER_WAITING]
    assert e.cursor.gate == "waiting"
    status = e.status()
    assert status.state == "Waiting"
    assert status.waiting is not None
    assert status.waiting.checkpoint_id == "chk_1"
    assert status.waiting.request_id == "req-1"  # the blocking request it answers
    assert status.waiting.expected_inputs == {"approved": "boolean"}
    assert e.end_session(0).violations == []

    # The checkpoint was taken before WAITING was written: the restored outbox is shorter.
    restored = outbox(info("a"), BLOCKING_PR)
    e.resumed("chk_1", outbox_size=len(restored))
    assert e.cursor.session == 2
    assert e.cursor.gate == "open"
    resumed = e.feed_outbox(restored + outbox(info("resumed", at=5), COMPLETED), 0)
    assert [c.event_type for c in resumed.committed] == [EventType.INFO, EventType.COMPLETED]
    assert [c.session for c in resumed.committed] == [2, 2]
    assert [c.line for c in resumed.committed] == [4, 5]  # the Run-wide sequence continues
    status = e.status()
    assert status.session == 2
    assert status.resumes == 1
    assert status.waiting is None
    assert status.state == "Completed"


def test_another_attempt_is_a_new_session_that_continues_the_outbox() -> None:
    e = engine()
    first = outbox(info("attempt 1"), ev("ERROR", {"message": "crashed"}))
    e.feed_outbox(first)
    e.end_session(1)
    e.restart_session(outbox_size=len(first))
    assert (e.cursor.session, e.cursor.gate, e.cursor.outbox_offset) == (2, "open", len(first))
    result = e.feed_outbox(first + outbox(info("attempt 2"), COMPLETED), 0)
    assert [(c.line, c.session) for c in result.committed] == [(2, 2), (3, 2)]
    status = e.status()
    assert (status.session, status.resumes, status.state) == (2, 0, "Completed")


def test_another_attempt_after_waiting_or_completed_reopens_the_stream() -> None:
    e = engine()
    e.feed_outbox(outbox(COMPLETED))
    e.restart_session(outbox_size=0)  # the workspace and its outbox were re-created
    assert e.cursor.outbox_offset == 0
    assert e.feed_outbox(outbox(info("again"))).violations == []
    assert e.status().state == "Active"


def test_resume_misuse_raises() -> None:
    e = engine()
    with pytest.raises(EngineStateError):
        e.resumed("chk_1", outbox_size=0)  # not waiting
    e.feed_outbox(outbox(WAITING))
    with pytest.raises(EngineStateError):
        e.resumed("chk_other", outbox_size=0)
    with pytest.raises(EngineStateError):
        e.resumed("chk_1", outbox_size=10**6)  # longer than what was read: not the checkpoint
    e.resumed("chk_1", outbox_size=0)  # a fresh outbox file is fine
    assert e.cursor.outbox_offset == 0


def test_blocking_request_must_be_followed_by_waiting() -> None:
    e = engine()
    result = e.feed_outbox(outbox(BLOCKING_PR, info("carrying on")))
    assert categories(result.violations) == [V.BLOCKING_REQUEST_WITHOUT_WAITING]
    assert result.violations[0].line == 0  # points at the request
    assert [c.event_type for c in result.committed] == [EventType.ACTION_REQUEST, EventType.INFO]


def test_blocking_request_at_the_end_of_the_session() -> None:
    e = engine()
    e.feed_outbox(outbox(BLOCKING_PR))
    end = e.end_session(0)
    assert categories(end.violations) == [
        V.BLOCKING_REQUEST_WITHOUT_WAITING,
        V.MISSING_TERMINAL_EVENT,
    ]


def test_a_rejected_waiting_does_not_satisfy_a_blocking_request() -> None:
    e = engine()
    bad_waiting = ev("WAITING", {"reason": "PR_REVIEW"})
    result = e.feed_outbox(outbox(BLOCKING_PR, bad_waiting, info("x")))
    assert categories(result.violations) == [
        V.WAITING_WITHOUT_CHECKPOINT,
        V.BLOCKING_REQUEST_WITHOUT_WAITING,
    ]


def test_non_blocking_requests_need_no_waiting() -> None:
    e = engine()
    request = ev("ACTION_REQUEST", {"action": "POST_COMMENT", "blocking": False})
    result = e.feed_outbox(outbox(request, info("x"), COMPLETED))
    assert result.violations == []
    pending = e.status().pending_action_requests()
    assert [(r.action.value, r.blocking, r.state) for r in pending] == [
        ("POST_COMMENT", False, "Pending")
    ]


def test_the_operator_records_what_it_finds_itself() -> None:
    e = engine()
    e.feed_outbox(outbox(WAITING))
    violation = e.record_violation("checkpoint_missing", "no chk_1 on the backend")
    assert violation.category is V.CHECKPOINT_MISSING
    assert violation.source == "session"
    assert e.status().violation_counts == {"checkpoint_missing": 1}
    with pytest.raises(ValueError, match="not_a_category"):
        e.record_violation("not_a_category", "x")


def test_missing_terminal_event_names_the_exit_code() -> None:
    e = engine()
    e.feed_outbox(outbox(info("a")))
    (violation,) = e.end_session(137).violations
    assert violation.category is V.MISSING_TERMINAL_EVENT
    assert "137" in violation.reason


def test_error_counts_as_an_end() -> None:
    e = engine()
    e.feed_outbox(outbox(ev("ERROR", {"message": "boom"})))
    assert e.end_session(1).violations == []
    assert e.status().error_count == 1


def test_spoofed_events_are_refused_and_never_folded() -> None:
    e = engine()
    result = e.feed_outbox(outbox(info("mine"), info("evil", sprite_id="sprite-1")))
    assert len(result.committed) == 1
    assert categories(result.violations) == [V.SPOOFED_IDENTITY]
    assert e.status().event_count == 1
    assert e.status().violation_counts == {"spoofed_identity": 1}


def test_violation_records_where_why_and_an_excerpt() -> None:
    e = engine()
    first = info("ok")
    (violation,) = e.feed_outbox(outbox(first, b"garbage \x00\x1b[31m here")).violations
    assert violation.source == "outbox"
    assert violation.line == 1
    assert violation.offset == len(first) + 1
    assert violation.session == 1
    assert violation.reason
    assert violation.excerpt == "garbage   [31m here"  # control characters made printable


def test_stdout_only_events_are_reported_at_the_end_of_the_session() -> None:
    e = engine()
    both, only = info("both", at=1), info("stdout only", at=2)
    e.feed_stdout(PREFIX + both + b"\n" + PREFIX + only + b"\n")
    assert e.outbox_behind
    assert [p.payload.message for p in e.preview()] == ["both", "stdout only"]  # type: ignore[union-attr]
    e.feed_outbox(outbox(both, COMPLETED))
    end = e.end_session(0)
    assert categories(end.violations) == [V.STDOUT_ONLY_EVENT]
    assert end.violations[0].source == "stdout"
    assert end.violations[0].line == 1
    assert e.status().event_count == 2  # never counted


def test_the_last_stdout_line_without_newline_is_taken_at_the_end() -> None:
    e = engine()
    e.feed_stdout(PREFIX + info("no newline"))
    assert e.provisional == []
    e.feed_outbox(outbox(info("no newline"), COMPLETED))
    assert e.end_session(0).violations == []


def test_outbox_reads_are_idempotent_and_gaps_raise() -> None:
    e = engine()
    data = outbox(info("a"), info("b"))
    assert len(e.feed_outbox(data[:10]).committed) == 0
    assert len(e.feed_outbox(data, 0).committed) == 2
    assert e.feed_outbox(data, 0).committed == []  # same bytes again: nothing new
    with pytest.raises(OutboxGapError):
        e.feed_outbox(b"{}\n", len(data) + 5)


def test_the_outbox_is_not_fed_to_a_stdout_engine() -> None:
    with pytest.raises(EngineStateError):
        engine(canonical="stdout").feed_outbox(b"")


def test_stdout_canonical_mode_commits_stdout_in_order() -> None:
    e = engine(canonical="stdout")
    stream = b"log\n" + PREFIX + info("a") + b"\r\n" + PREFIX + b"{oops\n" + PREFIX + COMPLETED
    result = e.feed_stdout(stream[:20])
    result2 = e.feed_stdout(stream[20:])
    end = e.end_session(0)
    committed = result.committed + result2.committed + end.committed
    assert [c.event_type for c in committed] == [EventType.INFO, EventType.COMPLETED]
    assert [c.line for c in committed] == [0, 2]
    violations = result.violations + result2.violations + end.violations
    assert categories(violations) == [V.NOT_JSON]
    assert violations[0].source == "stdout"


def test_over_long_outbox_lines_are_violations_and_keep_their_position() -> None:
    limits = EngineLimits(max_line_bytes=1024)
    e = engine(limits=limits)
    data = outbox(info("a"), b"{" + b"x" * 3000 + b"}", info("b"))
    result = e.feed_outbox(data[:1500])
    assert categories(result.violations) == [V.LINE_TOO_LONG]
    assert e.cursor.skipping
    rest = e.feed_outbox(data[1500:], 1500)
    assert [c.line for c in result.committed + rest.committed] == [0, 2]


def test_restoring_from_the_cursor_continues_exactly() -> None:
    lines = [info(f"e{i}", percent=i, at=i) for i in range(10)]
    data = outbox(*lines)
    first = engine()
    first.feed_outbox(data[: len(data) // 2])
    cursor = StreamCursor.model_validate_json(first.cursor.model_dump_json(by_alias=True))
    assert cursor.last_digest is not None
    assert cursor.last_digest.startswith("sha256:")
    second = engine(cursor=cursor, status=first.status())
    rest = second.feed_outbox(data, 0)
    assert [c.line for c in rest.committed] == list(range(cursor.line_count, 10))
    assert second.status().event_count == 10
    assert second.status().progress is not None
    assert second.status().progress.percent == 9


def _restored(lines: list[bytes], upto: int) -> tuple[RunEventEngine, StreamCursor]:
    first = engine()
    first.feed_outbox(outbox(*lines[:upto]))
    cursor = StreamCursor.model_validate_json(first.cursor.model_dump_json(by_alias=True))
    return engine(cursor=cursor, status=first.status()), cursor


def test_a_restored_engine_checks_the_line_before_its_cursor() -> None:
    lines = [info(f"e{i}", at=i) for i in range(6)]
    same, _ = _restored(lines, 3)
    assert same.feed_outbox(outbox(*lines), 0).violations == []

    # The same number of bytes, other content: the file was replaced behind the operator.
    other = [info(f"x{i}", at=i) for i in range(6)]
    replaced, cursor = _restored(lines, 3)
    result = replaced.feed_outbox(outbox(*other), 0)
    assert categories(result.violations) == [V.OUTBOX_REWRITTEN]
    violation = result.violations[0]
    assert (violation.source, violation.line) == ("outbox", 2)
    assert violation.offset == len(outbox(*other[:2]))
    assert f"byte {cursor.outbox_offset}" in violation.reason
    # Processing carries on at the cursor; the check is made once.
    assert [c.line for c in result.committed] == [3, 4, 5]
    assert replaced.feed_outbox(outbox(*other), 0).violations == []


def test_the_digest_check_needs_the_whole_line_and_a_restored_cursor() -> None:
    lines = [info(f"e{i}", at=i) for i in range(4)]
    other = [info(f"x{i}", at=i) for i in range(4)]
    restored, cursor = _restored(lines, 2)
    # Fed from the cursor: there is nothing before it to compare.
    assert restored.feed_outbox(outbox(*other)[cursor.outbox_offset :]).violations == []
    # Fed from the middle of the last line: it cannot be checked.
    restored, cursor = _restored(lines, 2)
    assert (
        restored.feed_outbox(
            outbox(*other)[cursor.outbox_offset - 5 :], cursor.outbox_offset - 5
        ).violations
        == []
    )
    # An engine that read the lines itself never checks (no restore).
    fresh = engine()
    fresh.feed_outbox(outbox(*lines[:2]))
    assert fresh.feed_outbox(outbox(*other), 0).violations == []


def test_after_a_resume_to_a_shorter_outbox_the_old_digest_is_not_checked() -> None:
    data = outbox(info("a"), BLOCKING_PR, WAITING)
    e = engine()
    e.feed_outbox(data)
    e.end_session(0)
    restored = outbox(info("a"), BLOCKING_PR)
    e.resumed("chk_1", outbox_size=len(restored))
    assert e.cursor.last_digest is None
    cursor = StreamCursor.model_validate_json(e.cursor.model_dump_json(by_alias=True))
    again = engine(cursor=cursor, status=e.status())
    assert again.feed_outbox(restored + outbox(COMPLETED), 0).violations == []


def test_replayed_scrollback_is_never_held_however_long() -> None:
    lines = [info(f"e{i}", at=i) for i in range(50)]
    limits = EngineLimits(committed_window=4)
    e = engine(limits=limits)
    e.feed_outbox(outbox(*lines))
    e.stdout_reattached()
    replay = b"".join(PREFIX + item + b"\n" for item in lines)
    # The replay starts inside a line and its last line is finished by live output.
    assert e.feed_stdout(replay[7:-10], replay=True).provisional == 0
    live = info("live", at=99)
    e.feed_stdout(replay[-10:] + PREFIX + live + b"\n")
    e.feed_outbox(outbox(live, COMPLETED), len(outbox(*lines)))  # read on from the cursor
    assert e.end_session(0).violations == []
    assert e.status().event_count == 52


def test_a_restored_engine_keeps_the_log_tail_and_a_replay_adds_no_fragment() -> None:
    # Found by the node upgrade test: the new leader's log tail began with the end of an event
    # line (the scrollback began inside it) and had lost what the old leader had kept.
    first = engine()
    first.feed_stdout(b"execs=1\n" + PREFIX + info("e0", at=0) + b"\nworking\n")
    kept = first.log_tail()
    assert kept == ["execs=1", "working"]
    restored = engine(cursor=first.cursor, status=first.status(), log_tail=kept)
    restored.stdout_reattached()
    replay = b"working\n" + PREFIX + info("e1", at=1) + b"\n"
    restored.feed_stdout(replay[3:], replay=True)  # the scrollback begins inside a line
    restored.feed_stdout(b"ticks=2\n")
    assert restored.log_tail() == ["execs=1", "working", "ticks=2"]


def test_an_unmarked_replay_beyond_the_window_is_reported() -> None:
    # Why replays must be marked: the merger remembers only a window of committed lines.
    lines = [info(f"e{i}", at=i) for i in range(50)]
    e = engine(limits=EngineLimits(committed_window=4))
    e.feed_outbox(outbox(*lines))
    e.stdout_reattached()
    e.feed_stdout(b"".join(PREFIX + item + b"\n" for item in lines))
    e.feed_outbox(outbox(COMPLETED), len(outbox(*lines)))  # read on from the cursor
    assert V.STDOUT_ONLY_EVENT in categories(e.end_session(0).violations)


def test_cursor_is_small() -> None:
    e = engine()
    e.feed_outbox(outbox(*[info(f"e{i}") for i in range(100)], BLOCKING_PR))
    assert len(e.cursor.model_dump_json(by_alias=True)) < 400


def test_memory_stays_bounded_under_a_hostile_stdout() -> None:
    limits = EngineLimits(max_provisional=16, max_provisional_bytes=4096, max_line_bytes=1024)
    e = engine(limits=limits)
    for i in range(2000):
        e.feed_stdout(PREFIX + info(f"never in the outbox {i}") + b"\n")
        e.feed_stdout(PREFIX + b"x" * 5000)  # an endless line
    assert len(e.provisional) <= 16
    assert sum(len(p.raw) for p in e.provisional) <= 4096
    assert e._splitter.partial_bytes == 0


_chunks = st.lists(
    st.one_of(
        st.binary(max_size=60),
        st.sampled_from([b"\n", b"\r\n", PREFIX, b"{", b"}", b'"payload":', b"LATTICE"]),
        st.sampled_from([info("x"), BLOCKING_PR, WAITING, COMPLETED, ev("ERROR", {"message": 1})]),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(stdout=_chunks, outbox=_chunks, canonical=st.sampled_from(["outbox", "stdout"]))
def test_nothing_a_sprite_writes_raises(
    stdout: list[bytes], outbox: list[bytes], canonical: str
) -> None:
    e = engine(canonical=canonical, limits=EngineLimits(max_line_bytes=1024))
    data = b"".join(outbox)
    for piece in stdout:
        e.feed_stdout(piece)
        if canonical == "outbox":
            e.feed_outbox(data[: len(piece) * 3], 0)
    if canonical == "outbox":
        e.feed_outbox(data, 0, final=True)
    e.preview()
    e.end_session(None)
    status = e.status()
    assert status.event_count == e.cursor.event_count
    assert status.violation_count == sum(status.violation_counts.values())


def test_output_printed_between_two_followers_joins_the_tail_once() -> None:
    # Found by the node test of a helm upgrade: "done" was printed after the old leader had
    # stopped and before the new one attached; the replay that held it added nothing.
    first = engine()
    first.feed_stdout(b"execs=1\n")
    restored = engine(cursor=first.cursor, status=first.status(), log_tail=first.log_tail())
    restored.stdout_reattached()
    restored.feed_stdout(b"execs=1\ndone\n", replay=True)
    assert restored.log_tail() == ["execs=1", "done"]


def test_a_replay_after_the_tail_rolled_on_keeps_its_whole_lines_only() -> None:
    restored = engine(log_tail=["old 1", "old 2"])
    restored.stdout_reattached()
    # The scrollback no longer holds "old 2": all of it is newer, but it begins inside a line.
    restored.feed_stdout(b"ine 7\nline 8\n", replay=True)
    restored.feed_stdout(b"line 9\n")
    assert restored.log_tail() == ["old 1", "old 2", "line 8", "line 9"]


def test_a_replay_of_what_the_tail_holds_adds_nothing() -> None:
    restored = engine(log_tail=["a", "b", "c"])
    restored.stdout_reattached()
    restored.feed_stdout(b"a\nb\n", replay=True)
    restored.feed_stdout(b"c\n", replay=True)
    restored.feed_stdout(b"d\n")
    assert restored.log_tail() == ["a", "b", "c", "d"]


def test_an_event_printed_and_written_is_no_outbox_only_event() -> None:
    e = engine(require_stdout_copies=True)
    lines = [info(f"n{i}") for i in range(3)]
    e.feed_outbox(outbox(lines[0]))  # the outbox first: its stdout copy follows
    e.feed_stdout(b"".join(PREFIX + line + b"\n" for line in lines))
    e.feed_outbox(outbox(*lines), 0, final=True)
    assert V.OUTBOX_ONLY_EVENT not in categories(e.end_session(0).violations)
    e.feed_outbox(outbox(info("written only")), final=True)
    assert V.OUTBOX_ONLY_EVENT in categories(e.end_session(0).violations)


def test_copies_dropped_under_the_cap_are_not_charged_as_outbox_only() -> None:
    """stdout ran further ahead of the outbox than the held copies' cap: the oldest copies
    were dropped, so their outbox lines find none. They were printed: no violation."""
    e = engine(require_stdout_copies=True, limits=EngineLimits(max_provisional=10))
    lines = [info(f"n{i}") for i in range(25)]
    e.feed_stdout(b"".join(PREFIX + line + b"\n" for line in lines))
    assert e.provisional_evicted == 15
    e.feed_outbox(outbox(*lines), final=True)
    assert V.OUTBOX_ONLY_EVENT not in categories(e.end_session(0).violations)
