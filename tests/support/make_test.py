"""What `make test` runs once the tools are built: the node tests in the background from the
start, the static checks and then the suite in the foreground, the node tests' report last.

The node tests spend most of their time waiting on a real node (Pods starting, images
pulled, rollouts), so they overlap the rest instead of following it. They share nothing with
the suite: their cluster lives in a network namespace of its own, with its own API server,
registry and Sprites server. Their output goes to a log file (two pytest reports interleaved
would be unreadable), which is printed whole when they end; a line says where it is while they
run. Ctrl-C stops the foreground and lets the node tests tear their cluster down.

    python -m tests.support.make_test --workers 2 [--checks "make lint"] [pytest args...]
"""

from __future__ import annotations

import argparse
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

SUITE_MARKS = "not bench and not node"


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"


def pytest_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", *args]


def run(command: list[str], what: str) -> int:
    started = time.monotonic()
    print(f"make test: {what}: {shlex.join(command)}", flush=True)
    code = subprocess.run(command, check=False).returncode
    print(f"make test: {what}: exit {code} after {minutes(time.monotonic() - started)}", flush=True)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--workers", type=int, default=2, help="the suite's xdist workers (0: one)")
    parser.add_argument("--checks", default="", help="a command run before the suite (lint...)")
    parser.add_argument("--node-log", type=Path, default=Path("node-test.log"))
    parser.add_argument("--no-node", action="store_true", help="skip the node tests")
    args, pytest_args = parser.parse_known_args(argv)
    started = time.monotonic()

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
    try:
        if args.checks:
            codes["checks"] = run(shlex.split(args.checks), "static checks")
        if codes.get("checks") and node is not None:
            node.send_signal(signal.SIGINT)  # red already: stop the node tests (they clean up)
        elif not codes.get("checks"):
            workers = ["-n", str(args.workers), "--dist", "loadfile"] if args.workers else []
            suite = pytest_command("-m", SUITE_MARKS, *workers, *pytest_args)
            codes["suite"] = run(suite, "suite")
    except KeyboardInterrupt:
        codes["interrupted"] = 130
        if node is not None:
            node.send_signal(signal.SIGINT)
    if node is not None:
        if node.poll() is None:
            print("make test: waiting for the node tests", flush=True)
        while True:
            try:
                codes["node tests"] = node.wait()
                break
            except KeyboardInterrupt:  # a second Ctrl-C: pass it on, still wait for teardown
                node.send_signal(signal.SIGINT)
        print(f"make test: ---- the node tests' report ({args.node_log}) ----", flush=True)
        sys.stdout.buffer.write(args.node_log.read_bytes())
        sys.stdout.flush()
    failed = {what: code for what, code in codes.items() if code}
    summary = ", ".join(f"{what} exit {code}" for what, code in codes.items())
    print(f"make test: {summary}; {minutes(time.monotonic() - started)} in all", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
