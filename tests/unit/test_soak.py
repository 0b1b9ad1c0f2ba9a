"""`make soak`'s pieces: the JUnit reading that reports failures per test, hogs that stop, and
an interrupted round that leaves nothing running."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.soak import failures, start_hogs, stop

ROOT = Path(__file__).resolve().parents[2]

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


def _children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


@pytest.mark.parametrize("stop_with", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_round_stops_its_suite_and_its_hogs(
    tmp_path: Path, stop_with: signal.Signals
) -> None:
    # Found when a soak was stopped by a SIGINT to its runner: the suite (a session of its
    # own) and the hogs kept running, the hogs for up to an hour. A `kill` (SIGTERM) and a
    # runner started with SIGINT ignored (a shell's background job) left them too.
    slow = tmp_path / "test_slow.py"
    slow.write_text("import time\n\n\ndef test_slow():\n    time.sleep(120)\n")
    runner = subprocess.Popen(
        [
            *(sys.executable, "-m", "tests.support.soak", "--rounds", "1", "--hogs", "2"),
            *("--out", str(tmp_path / "out"), "-p", "no:cacheprovider", str(slow)),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        # As a shell starts a background job: SIGINT ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert runner.stdout is not None
        assert runner.stdout.readline().startswith("soak: round 1/1")
        deadline = time.monotonic() + 60
        children: set[int] = set()
        while len(children) < 3 and time.monotonic() < deadline:  # two hogs and the suite
            children = _children(runner.pid)
            time.sleep(0.1)
        assert len(children) == 3, children
        runner.send_signal(stop_with)
        assert runner.wait(timeout=90) != 0
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in children if _alive(pid)]
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        if runner.stdout is not None:
            runner.stdout.close()


@pytest.mark.parametrize(("body", "kept"), [("assert False", True), ("pass", False)])
def test_a_round_with_failures_keeps_its_temporary_files(
    tmp_path: Path, body: str, kept: bool
) -> None:
    # The operators' logs of a failed e2e test live there; pytest's own rotation (three
    # sessions) lost them while other runs shared the machine.
    case = tmp_path / "test_case.py"
    case.write_text(
        f"def test_case(tmp_path):\n    (tmp_path / 'operator.log').write_text('x')\n    {body}\n"
    )
    out = tmp_path / "out"
    subprocess.run(
        [
            *(sys.executable, "-m", "tests.support.soak", "--rounds", "1", "--hogs", "0"),
            *("--out", str(out), "-p", "no:cacheprovider", str(case)),
        ],
        cwd=ROOT,
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert (out / "round-1.xml").exists()
    assert bool(list((out / "round-1-tmp").glob("**/operator.log"))) is kept
