"""The engine's batch paths give exactly what feeding one line at a time gives.

The engine validates an outbox read as a batch and folds runs of rule-free
events (INFO, ARTIFACT, non-blocking requests) together; only the lines that
change the sequence state go through the rules one by one. These properties
draw streams rich in exactly those lines (blocking requests, WAITING,
COMPLETED, ERROR, spoofed identities, invalid JSON, over-long lines) and check
that one big read, random pieces, and one read per line all commit the same
events, report the same violations and fold the same status.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lattice_operator.protocol import EngineLimits, RunEventEngine
from lattice_operator.protocol.engine import FeedResult
from tests.support.streams import SPRITE, WORK, ev, info

LIMITS = EngineLimits(max_line_bytes=1024)


@st.composite
def eventful_lines(draw: st.DrawFn) -> list[bytes]:
    lines: list[bytes] = []
    for i in range(draw(st.integers(0, 40))):
        kind = draw(
            st.sampled_from(
                [
                    "info",
                    "info",
                    "artifact",
                    "phase",
                    "finish",
                    "request",
                    "blocking",
                    "waiting",
                    "bad_waiting",
                    "completed",
                    "error",
                    "spoofed",
                    "not_json",
                    "long",
                ]
            )
        )
        if kind == "info":
            lines.append(info(f"{i}", at=i))
        elif kind == "artifact":
            lines.append(ev("ARTIFACT", {"kind": "file", "ref": f"out/{i}"}, at=i))
        elif kind == "phase":
            lines.append(ev("PHASE_STARTED", {"phase": f"p{i % 3}"}, at=i))
        elif kind == "finish":
            lines.append(ev("PHASE_FINISHED", {"phase": f"p{i % 3}", "success": i % 2 == 0}, at=i))
        elif kind in ("request", "blocking"):
            payload = {"action": "OPEN_PR", "parameters": {"n": i}, "blocking": kind == "blocking"}
            lines.append(ev("ACTION_REQUEST", payload, at=i))
        elif kind == "waiting":
            payload = {
                "reason": "PR_REVIEW",
                "checkpoint_id": f"chk_{i}",
                "expected_inputs": {"approved": "boolean"},
            }
            lines.append(ev("WAITING", payload, at=i))
        elif kind == "bad_waiting":
            lines.append(ev("WAITING", {"reason": "PR_REVIEW"}, at=i))
        elif kind == "completed":
            lines.append(ev("COMPLETED", {"status": "success", "summary": f"{i}"}, at=i))
        elif kind == "error":
            lines.append(ev("ERROR", {"message": f"failed {i}"}, at=i))
        elif kind == "spoofed":
            lines.append(info(f"{i}", at=i, sprite_id="someone-else"))
        elif kind == "not_json":
            lines.append(b"{oops %d" % i)
        else:
            lines.append(info("x" * 1200, at=i))
    return lines


def _drive(
    outbox: bytes, cuts: list[int]
) -> tuple[list[tuple[int, int, bytes]], list[tuple[str, int | None, int | None]], str]:
    engine = RunEventEngine(SPRITE, WORK, limits=LIMITS)
    results: list[FeedResult] = []
    for cut in [*cuts, len(outbox)]:
        results.append(engine.feed_outbox(outbox[:cut], 0, final=cut == len(outbox)))
    results.append(engine.end_session(0))
    committed = [(c.line, c.offset, c.raw) for r in results for c in r.committed]
    violations = [(v.category, v.line, v.offset) for r in results for v in r.violations]
    return committed, violations, engine.status().model_dump_json()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=eventful_lines(), data=st.data())
def test_batches_and_single_lines_agree(lines: list[bytes], data: st.DataObject) -> None:
    outbox = b"".join(item + b"\n" for item in lines)
    whole = _drive(outbox, [])
    ends = [i for i, byte in enumerate(outbox, start=1) if byte == ord("\n")]
    assert _drive(outbox, ends) == whole
    cuts = sorted(data.draw(st.lists(st.integers(0, len(outbox)), max_size=10)))
    assert _drive(outbox, cuts) == whole
    # Something happened: every line was either committed or reported.
    committed, violations, _ = whole
    assert len(committed) + len(violations) >= len(lines)


def test_the_property_sees_the_sequence_rules() -> None:
    # A guard on the strategy above: the rules it is meant to exercise do fire.
    blocking = ev("ACTION_REQUEST", {"action": "OPEN_PR", "parameters": {}, "blocking": True})
    outbox = b"".join(
        item + b"\n"
        for item in [
            info("a"),
            blocking,
            info("b"),
            ev("COMPLETED", {"status": "success", "summary": "s"}),
            info("late"),
        ]
    )
    committed, violations, _ = _drive(outbox, [])
    categories = {str(v[0]) for v in violations}
    assert any("blocking" in c for c in categories), categories
    assert any("after_completed" in c for c in categories), categories
    assert len(committed) == 4
