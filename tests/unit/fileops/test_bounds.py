"""Hostile requests against FileOps' CPU bounds: a hunk that matches nowhere in a huge file is
searched in linear work and stops at MATCH_WORK, diffs stop being quadratic at DIFF_WORK,
and the CPU-heavy parts run while the event loop keeps serving (issue 27)."""

from __future__ import annotations

import asyncio
import difflib
import random
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from lattice_operator.api.v1alpha1.fileops import FileOpsRequest
from lattice_operator.fileops import executor, patch
from lattice_operator.fileops.errors import PatchRefused
from lattice_operator.fileops.patch import Work, apply_update, parse
from lattice_operator.ports.sprites import SpriteBackend
from tests.support.fake_backend import FakeBackend
from tests.support.fileops_requests import fileops_request

NOW = datetime(2026, 1, 1, tzinfo=UTC)
BIG = "".join(f"line {i}\n" for i in range(100_000))
"""A 100,000-line file, as in the report."""


def hostile_patch(lines: int = 2_000) -> str:
    """A ~19 KiB hunk that matches nowhere: its lines are the file's, its last one is not."""
    body = "".join(f" line {i}\n" for i in range(lines)) + "-no such line\n+x\n"
    return f"*** Begin Patch\n*** Update File: big.txt\n@@\n{body}*** End Patch\n"


def test_a_hunk_that_matches_nowhere_costs_linear_work() -> None:
    text = hostile_patch()
    assert len(text) > 19 * 1024
    (change,) = parse(text)
    (hunk,) = change.hunks
    work = Work()
    with pytest.raises(PatchRefused, match="does not apply"):
        apply_update("big.txt", BIG, change.hunks, work)
    file_lines = BIG.count("\n")
    # Three passes (exact, trailing spaces, surrounding spaces), each line looked at once a
    # pass: not hunk lines x file lines (10^8 here).
    assert work.used <= 3 * (file_lines + 2 * len(hunk.old) + patch._CHUNK)
    assert work.used < len(hunk.old) * file_lines // 100


def test_a_patch_over_its_work_limit_is_refused_naming_it() -> None:
    # Many hunks that each need the last pass: each scans the rest of the file three times.
    hunks = "".join(f"@@\n- line {i} \n+x\n" for i in range(0, 100_000, 1_000))
    (change,) = parse(f"*** Begin Patch\n*** Update File: big.txt\n{hunks}*** End Patch")
    work = Work(limit=300_000)
    with pytest.raises(PatchRefused) as refused:
        apply_update("big.txt", BIG, change.hunks, work)
    assert "300,000 line comparisons (MATCH_WORK)" in refused.value.reason
    assert refused.value.hint
    assert work.used <= work.limit


def test_a_patch_within_the_limit_still_applies_every_hunk() -> None:
    every = range(0, 100_000, 997)
    hunks = "".join(f"@@\n line {i}\n-line {i + 1}\n+LINE {i + 1}\n" for i in every)
    (change,) = parse(f"*** Begin Patch\n*** Update File: big.txt\n{hunks}*** End Patch")
    work = Work()
    out = apply_update("big.txt", BIG, change.hunks, work).split("\n")
    assert [out[1], out[2], out[998]] == ["LINE 1", "line 2", "LINE 998"]
    assert work.used < 4 * BIG.count("\n")  # the hunks in order: the file read about once


def _naive(lines: list[str], wanted: list[str], start: int, at_end: bool) -> int | None:
    """The former placing: every offset tried, for every normalisation."""
    norms: tuple[Callable[[str], str], ...] = (lambda s: s, str.rstrip, str.strip)
    for norm in norms:
        target = [norm(w) for w in wanted]
        last = len(lines) - len(wanted)
        for i in [last] if at_end else range(start, last + 1):
            if i >= 0 and [norm(x) for x in lines[i : i + len(wanted)]] == target:
                return i
    return None


def test_the_rolling_search_places_hunks_where_trying_every_offset_did() -> None:
    rng = random.Random(27)
    alphabet = ["a", "a ", " a", "b", "", " "]
    for _ in range(5_000):
        lines = [rng.choice(alphabet) for _ in range(rng.randint(0, 12))]
        wanted = [rng.choice(alphabet) for _ in range(rng.randint(1, 4))]
        start, at_end = rng.randint(0, len(lines)), rng.random() < 0.2
        found = patch._find(lines, wanted, start, Work(), "f", at_end=at_end)
        assert found == _naive(lines, wanted, start, at_end), (lines, wanted, start, at_end)


def test_a_diff_of_a_whole_rewrite_is_counted_without_a_quadratic_comparison(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compared: list[int] = []
    real = difflib.SequenceMatcher

    def measured(junk: Any, a: list[str], b: list[str]) -> Any:
        compared.append(len(a) * len(b))
        return real(junk, a, b)

    monkeypatch.setattr(difflib, "SequenceMatcher", measured)
    rewritten = BIG.replace("line", "LINE")
    diff = executor._diff("big.txt", BIG, rewritten)
    assert (diff.added, diff.removed) == (100_000, 100_000)
    head_kept = "head\n" + BIG + "tail\n"
    edited = head_kept.replace("line 500\n", "line five hundred\n")
    small = executor._diff("big.txt", head_kept, edited)
    assert (small.added, small.removed) == (1, 1)
    assert all(size <= executor.DIFF_WORK for size in compared)


def request(ops: list[dict[str, Any]]) -> FileOpsRequest:
    never = {"changedFiles": True, "diffSummary": True, "commandOutputs": "never"}
    return fileops_request(ops, report=never)


async def test_patching_and_diffing_leave_the_event_loop_serving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each CPU-heavy step waits, where it runs, for a callback it schedules on the loop: on
    the loop's own thread that callback could not run until the step returned."""
    loop = asyncio.get_running_loop()
    served: dict[str, bool] = {}

    def probed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            ran = threading.Event()
            loop.call_soon_threadsafe(ran.set)
            served[name] = ran.wait(timeout=10)
            return fn(*args)

        return call

    monkeypatch.setattr(patch, "apply_update", probed("patch", patch.apply_update))
    monkeypatch.setattr(executor, "_diffs", probed("diff", executor._diffs))
    backend = FakeBackend()
    backend.files[("box", "/workspace/big.txt")] = BIG.encode()
    text = "*** Begin Patch\n*** Update File: big.txt\n@@\n line 5\n-line 6\n+six\n*** End Patch"
    res = await executor.execute(
        cast(SpriteBackend, backend),
        "box",
        request([{"op": "apply_patch", "patch": text}]),
        now=NOW,
    )
    assert res.status == "ok", res.wire()
    assert served == {"patch": True, "diff": True}
