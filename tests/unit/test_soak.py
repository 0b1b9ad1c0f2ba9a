"""`make soak`'s pieces: the JUnit reading that reports failures per test, and hogs that stop."""

from __future__ import annotations

from pathlib import Path

from tests.support.soak import failures, start_hogs, stop

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.e2e.test_a" name="test_ok" time="1.0"/>
<testcase classname="tests.e2e.test_a" name="test_bad" time="2.0">
  <failure message="assert 1 == 2">long traceback</failure></testcase>
<testcase classname="tests.e2e.test_b" name="test_setup" time="0.1">
  <error message="fixture failed">boom</error></testcase>
<testcase classname="tests.e2e.test_b" name="test_skip" time="0.0">
  <skipped message="no node"/></testcase>
</testsuite></testsuites>
"""


def test_failures_and_errors_are_reported_per_test_with_their_text(tmp_path: Path) -> None:
    report = tmp_path / "round.xml"
    report.write_text(JUNIT)
    passed, failed = failures(report)
    assert passed == 1
    assert set(failed) == {"tests.e2e.test_a::test_bad", "tests.e2e.test_b::test_setup"}
    assert "assert 1 == 2" in failed["tests.e2e.test_a::test_bad"]
    assert "long traceback" in failed["tests.e2e.test_a::test_bad"]


def test_a_round_without_a_report_counts_nothing(tmp_path: Path) -> None:
    assert failures(tmp_path / "missing.xml") == (0, {})


def test_hogs_stop_by_themselves() -> None:
    hogs = start_hogs(2, 0.2)
    try:
        for hog in hogs:
            assert hog.wait(timeout=30) == 0
    finally:
        stop(hogs)
