"""What `make test` runs once the tools are built: the node tests in the background from the
start, the static checks beside the suite, the suite in the foreground; then the checks' and the
node tests' reports.

The node tests spend most of their time waiting on a real node (Pods starting, images
pulled, rollouts), so they overlap the rest instead of following it. They share nothing with
the suite: their cluster lives in a network namespace of its own, with its own API server,
registry and Sprites server. Their output goes to a log file (two pytest reports interleaved
would be unreadable), which is printed whole when they end; a line says where it is while they
run. Failed checks stop the suite and the node tests (red already). Ctrl-C stops the foreground
and lets the node tests tear their cluster down.

    python -m tests.support.make_test --workers 2 [--checks "make lint"] [pytest args...]
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

SUITE_MARKS = "not bench and not node"


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"


class Reaped:
    """Exit codes and CPU time of the children, reaped with wait4: each stream's CPU (its process
    and the descendants it waited for) is printed, so a run shows where the cores went."""

    def __init__(self) -> None:
        self.cpu: dict[int, float] = {}

    def poll(self, proc: subprocess.Popen[bytes]) -> int | None:
        return self._reap(proc, os.WNOHANG)

    def wait(self, proc: subprocess.Popen[bytes]) -> int:
        code = self._reap(proc, 0)
        assert code is not None
        return code

    def _reap(self, proc: subprocess.Popen[bytes], options: int) -> int | None:
        if proc.returncode is None:
            pid, status, usage = os.wait4(proc.pid, options)
            if pid == 0:
                return None
            proc.returncode = os.waitstatus_to_exitcode(status)
            self.cpu[proc.pid] = usage.ru_utime + usage.ru_stime
        return proc.returncode

    def said(self, proc: subprocess.Popen[bytes]) -> str:
        return f", {self.cpu[proc.pid]:.0f} CPU-s" if proc.pid in self.cpu else ""


def pytest_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", *args]


def children_environment() -> dict[str, str]:
    """The environment of the suite, the node tests and the checks: this one, except that Python
    writes bytecode caches (in the clone's ignored __pycache__ folders) even where
    PYTHONDONTWRITEBYTECODE is set, as it is on this machine: otherwise every operator started,
    every `lattice` call and every worker's collection compiles the same sources again (a
    collection took 12.5 CPU-s without the caches, 6.1 with them)."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--workers", type=int, default=2, help="the suite's xdist workers (0: one)")
    parser.add_argument("--checks", default="", help="a command run beside the suite (lint...)")
    parser.add_argument("--checks-log", type=Path, default=Path("checks.log"))
    parser.add_argument("--node-log", type=Path, default=Path("node-test.log"))
    parser.add_argument("--no-node", action="store_true", help="skip the node tests")
    args, pytest_args = parser.parse_known_args(argv)
    started = time.monotonic()
    reaped = Reaped()
    environment = children_environment()

    node: subprocess.Popen[bytes] | None = None
    if not args.no_node:
        command = pytest_command("-m", "node", "tests/node", *pytest_args)
        sink = args.node_log.open("wb")
        # A session of its own: Ctrl-C at the terminal reaches the foreground only; the node
        # tests get one SIGINT from here, so their fixtures stop the node cluster.
        node = subprocess.Popen(
            command,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=environment,
            # SIGINT as at a terminal even if `make test` was started with it ignored (a
            # background job of a script): pytest must turn the one sent here into its
            # teardown.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        sink.close()
        print(
            f"make test: node tests started in the background (log: {args.node_log});"
            " their report follows the suite's",
            flush=True,
        )
    codes: dict[str, int] = {}
    checks: subprocess.Popen[bytes] | None = None
    checks_started = time.monotonic()
    if args.checks:
        sink = args.checks_log.open("wb")
        checks = subprocess.Popen(
            shlex.split(args.checks), stdout=sink, stderr=subprocess.STDOUT, env=environment
        )
        sink.close()
        print(f"make test: static checks started beside the suite (log: {args.checks_log})")
    # Files handed out longest first (tests/support/file_costs.py), not most tests first.
    workers = (
        ["-n", str(args.workers), "--dist", "loadfile", "--no-loadscope-reorder"]
        if args.workers
        else []
    )
    command = pytest_command("-m", SUITE_MARKS, *workers, *pytest_args)
    print(f"make test: suite: {shlex.join(command)}", flush=True)
    suite_started = time.monotonic()
    suite = subprocess.Popen(command, env=environment)
    stopped = False
    try:
        while reaped.poll(suite) is None:
            if checks is not None and reaped.poll(checks) and not stopped:
                # Red already: stop the suite and the node tests (which clean up).
                stopped = True
                suite.send_signal(signal.SIGINT)
                if node is not None:
                    node.send_signal(signal.SIGINT)
            time.sleep(0.2)
    except KeyboardInterrupt:  # Ctrl-C reached the suite and the checks too (same group)
        codes["interrupted"] = 130
        if node is not None:
            node.send_signal(signal.SIGINT)
    codes["suite"] = reaped.wait(suite)
    print(
        f"make test: suite: exit {codes['suite']} after"
        f" {minutes(time.monotonic() - suite_started)}{reaped.said(suite)}",
        flush=True,
    )
    if checks is not None:
        codes["checks"] = reaped.wait(checks)
        if codes["checks"] and node is not None and not stopped:
            # The suite ended before the checks did (a quick suite, a busy machine): their
            # failure still stops the node tests instead of waiting them out.
            stopped = True
            node.send_signal(signal.SIGINT)
        print(f"make test: ---- static checks ({args.checks_log}) ----", flush=True)
        sys.stdout.buffer.write(args.checks_log.read_bytes())
        print(
            f"make test: static checks: exit {codes['checks']}"
            f" (started {minutes(time.monotonic() - checks_started)} ago){reaped.said(checks)}",
            flush=True,
        )
    if node is not None:
        if reaped.poll(node) is None:
            print("make test: waiting for the node tests", flush=True)
        while True:
            try:
                codes["node tests"] = reaped.wait(node)
                break
            except KeyboardInterrupt:  # a second Ctrl-C: pass it on, still wait for teardown
                node.send_signal(signal.SIGINT)
        print(f"make test: ---- the node tests' report ({args.node_log}) ----", flush=True)
        sys.stdout.buffer.write(args.node_log.read_bytes())
        print(f"make test: node tests: exit {codes['node tests']}{reaped.said(node)}", flush=True)
    failed = {what: code for what, code in codes.items() if code}
    order = ("checks", "suite", "node tests", "interrupted")
    summary = ", ".join(f"{what} exit {codes[what]}" for what in order if what in codes)
    print(f"make test: {summary}; {minutes(time.monotonic() - started)} in all", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
