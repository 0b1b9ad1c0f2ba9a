"""`make test`'s runner (tests.support.make_test) on a small project of its own: the node tests
and the checks run beside the suite, their reports come after it, any failure fails the whole,
and failed checks stop the node tests (which still clean up) instead of waiting for them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

NODE_TEST = """
import pathlib, time, pytest

@pytest.fixture
def cluster():
    pathlib.Path("node-started").write_text("up")
    yield
    pathlib.Path("node-teardown").write_text("done")  # what a node cluster's teardown does

@pytest.mark.node
def test_on_the_node(cluster):
    time.sleep({seconds})
    pathlib.Path("node-slept").write_text("all of it")
    assert {node_ok}
"""

SUITE_TEST = """
def test_in_the_suite():
    assert {suite_ok}
"""


def project(
    tmp_path: Path, *, node_ok: bool = True, suite_ok: bool = True, seconds: float = 1
) -> Path:
    (tmp_path / "tests" / "node").mkdir(parents=True)
    (tmp_path / "tests" / "node" / "test_n.py").write_text(
        NODE_TEST.format(seconds=seconds, node_ok=node_ok)
    )
    (tmp_path / "tests" / "test_s.py").write_text(SUITE_TEST.format(suite_ok=suite_ok))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    node: x\n    bench: x\n")
    return tmp_path


def make_test(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.support.make_test", "--workers", "0", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


def test_the_node_report_follows_the_suite_and_both_pass(tmp_path: Path) -> None:
    out = make_test(project(tmp_path), "--checks", "true")
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert "node tests started in the background (log: node-test.log)" in text
    suite = text.index("test_s.py .")
    assert suite < text.index("---- the node tests' report") < text.index("test_n.py .")
    assert "checks exit 0, suite exit 0, node tests exit 0" in text
    assert (tmp_path / "node-test.log").read_text().count("1 passed") == 1
    # Each stream's CPU time is said (pytest itself takes a good part of a CPU-second).
    for stream in ("suite: exit 0 after", "static checks: exit 0", "node tests: exit 0"):
        assert re.search(re.escape(stream) + r".*, \d+ CPU-s\n", text), (stream, text)


def test_a_failing_suite_or_node_test_fails_make_test_and_both_are_reported(
    tmp_path: Path,
) -> None:
    out = make_test(project(tmp_path, node_ok=False, suite_ok=False))
    assert out.returncode == 1
    assert "suite exit 1, node tests exit 1" in out.stdout
    assert "test_s.py F" in out.stdout
    assert "test_n.py F" in out.stdout  # the node tests' report is shown


@pytest.mark.parametrize("when", ["while the suite runs", "after the suite ended"])
def test_failed_checks_stop_the_node_tests_which_clean_up(tmp_path: Path, when: str) -> None:
    # The checks fail once the node test is under way (its fixture is up); the node test
    # would sleep past make_test's timeout if it were waited for instead of stopped. A quick
    # suite on a busy machine ends before that: the second case waits for the suite's test and
    # then a few seconds more, so its process is gone when the checks fail.
    wait = "while [ ! -f node-started ]; do sleep 0.1; done"
    if when == "after the suite ended":
        wait += "; while [ ! -f suite-ran ]; do sleep 0.1; done; sleep 4"
    root = project(tmp_path, seconds=600)
    (root / "tests" / "test_s.py").write_text(
        "import pathlib\n\ndef test_in_the_suite():\n"
        "    pathlib.Path('suite-ran').write_text('yes')\n"
    )
    out = make_test(root, "--checks", f"sh -c '{wait}; false'")
    assert out.returncode == 1
    assert "make test: checks exit 1" in out.stdout
    assert "KeyboardInterrupt" in out.stdout  # in the node tests' report
    assert not (tmp_path / "node-slept").exists()
    assert (tmp_path / "node-teardown").read_text() == "done"  # fixtures ran on the SIGINT


def test_the_suite_writes_bytecode_caches_even_where_the_environment_says_not_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path)
    (root / "tests" / "test_s.py").write_text(
        "import sys\n\ndef test_in_the_suite():\n    assert not sys.dont_write_bytecode\n"
    )
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # as on this machine
    out = make_test(root, "--no-node")
    assert out.returncode == 0, out.stdout + out.stderr
