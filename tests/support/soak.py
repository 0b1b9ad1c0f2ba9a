"""`make soak`: the contract and e2e suites, N rounds, while a bounded CPU hog loads the machine.

A race that shows only when the machine is busy is found here on purpose instead of by CI by
chance. Each round starts `--hogs` busy-looping processes (each stops by itself after the
round's time limit, and is ended by its pid when the round ends), runs pytest with a JUnit
report, samples the load average, and stops the hogs. Failures are reported per test across
rounds, with each failure's text, in `soak-results/summary.json` and on stdout; the JUnit
files and pytest's output of each round are kept beside it, and a round with failures keeps
its temporary files (the operators' and control planes' logs) in `round-N-tmp/`.

    python -m tests.support.soak --rounds 5 --hogs 4 [pytest paths and options...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.support.make_test import children_environment

DEFAULT_PATHS = ("tests/contract", "tests/e2e")
HOG = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


@dataclass
class Round:
    number: int
    seconds: float
    exit_code: int
    passed: int = 0
    failed: list[str] = field(default_factory=list)
    load: list[float] = field(default_factory=list)
    """The 1-minute load average, sampled every 10 s while the round ran."""


def start_hogs(count: int, seconds: float) -> list[subprocess.Popen[bytes]]:
    """`count` busy processes, each ending by itself after `seconds`."""
    code = HOG.format(seconds=seconds)
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for proc in processes:
        if proc.poll() is None:
            proc.kill()
    for proc in processes:
        proc.wait()


def sample_load(into: list[float], done: threading.Event) -> None:
    while not done.wait(10.0):
        into.append(float(Path("/proc/loadavg").read_text().split()[0]))


def failures(junit: Path) -> tuple[int, dict[str, str]]:
    """Passed count and {test id: failure text} of a JUnit report (empty if it is missing)."""
    if not junit.exists():
        return 0, {}
    passed, failed = 0, {}
    for case in ET.parse(junit).iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            text = (problem.get("message") or "") + "\n" + (problem.text or "")
            failed[name] = text[-6000:]
        elif case.find("skipped") is None:
            passed += 1
    return passed, failed


def end_suite(proc: subprocess.Popen[bytes], first: signal.Signals) -> int:
    """Stop the suite's process group: `first`, then SIGKILL after a minute."""
    os.killpg(proc.pid, first)
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()


def run_round(number: int, args: argparse.Namespace, out: Path) -> tuple[Round, dict[str, str]]:
    junit = out / f"round-{number}.xml"
    log = out / f"round-{number}.log"
    hogs = start_hogs(args.hogs, args.round_timeout + 60)
    loads: list[float] = []
    done = threading.Event()
    sampler = threading.Thread(target=sample_load, args=(loads, done), daemon=True)
    sampler.start()
    # The round's temporary files (operator and control-plane logs) in a place of its own:
    # pytest keeps only its last three, and other runs on the machine rotate them away.
    basetemp = (out / f"round-{number}-tmp").resolve()
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "not bench and not node",
        "-p",
        "no:cacheprovider",
        f"--junitxml={junit}",
        f"--basetemp={basetemp}",
        *args.pytest,
        *(() if any(Path(a).exists() for a in args.pytest) else DEFAULT_PATHS),
    ]
    started = time.monotonic()
    print(f"soak: round {number}/{args.rounds}: {' '.join(command[3:])}", flush=True)
    try:
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                command,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=children_environment(),  # bytecode cached, as in make test
            )
            try:
                code = proc.wait(timeout=args.round_timeout)
            except subprocess.TimeoutExpired:
                code = end_suite(proc, signal.SIGTERM)
                print(f"soak: round {number} hit its time limit ({args.round_timeout:.0f} s)")
            except KeyboardInterrupt:
                # The suite has a session of its own: Ctrl-C reached only this process. Its
                # fixtures stop what they started once it gets the SIGINT too.
                end_suite(proc, signal.SIGINT)
                raise
    finally:
        done.set()
        stop(hogs)  # never left spinning after an interrupted round
    passed, failed = failures(junit)
    if failed:
        print(f"soak: round {number}: its logs are kept in {basetemp}", flush=True)
    else:  # bounded disk: a clean round's files are of no use
        shutil.rmtree(basetemp, ignore_errors=True)
    result = Round(
        number, round(time.monotonic() - started, 1), code, passed, sorted(failed), loads
    )
    mean = sum(loads) / len(loads) if loads else 0.0
    print(
        f"soak: round {number}: {passed} passed, {len(failed)} failed in {result.seconds:.0f} s,"
        f" load average mean {mean:.1f} (min {min(loads, default=0.0):.1f})",
        flush=True,
    )
    return result, failed


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    # Stopped by Ctrl-C or `kill`, a round ends its suite and hogs the same way; also when it
    # was started in the background by a shell, which leaves SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hogs", type=int, default=4, help="busy processes during each round")
    parser.add_argument("--round-timeout", type=float, default=3600.0, help="seconds per round")
    parser.add_argument("--out", type=Path, default=Path("soak-results"))
    # Everything else goes to pytest (default: the contract and e2e suites).
    args, rest = parser.parse_known_args(argv)
    args.pytest = rest
    args.out.mkdir(parents=True, exist_ok=True)
    rounds: list[Round] = []
    by_test: dict[str, list[dict[str, object]]] = defaultdict(list)
    for number in range(1, args.rounds + 1):
        result, failed = run_round(number, args, args.out)
        rounds.append(result)
        for test, text in failed.items():
            by_test[test].append({"round": number, "text": text})
        summary = {"rounds": [asdict(r) for r in rounds], "failures": by_test}
        (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"soak: {len(rounds)} rounds; {len(by_test)} tests failed at least once")
    for test, seen in sorted(by_test.items()):
        print(f"  {len(seen)}/{len(rounds)}  {test}")
    print(f"soak: details in {args.out / 'summary.json'}")
    broken = any(r.exit_code not in (0,) for r in rounds)
    return 1 if by_test or broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
