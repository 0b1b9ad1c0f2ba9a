#!/usr/bin/env python3
"""Run a long set-up step so that a newcomer can watch it.

    python3 hack/progress.py LABEL [--steps N] -- COMMAND...

COMMAND's stdout passes through untouched (the build scripts print their result path
there). Its stderr lines are shown prefixed with LABEL; a line `<script>: building X` (or
`debootstrapping`, `fetching`…) starts a numbered step (`[tools 2/6] building
kube-controller-manager`), and the previous step's time is printed when the next begins.
While nothing is printed for HEARTBEAT seconds a line says what is still running and for how
long, so no step runs silent for more than a minute. A step that finds its cache warm prints
nothing at all. Standard library only: it runs before the virtualenv exists.
"""

from __future__ import annotations

import argparse
import queue
import re
import subprocess
import sys
import threading
import time

HEARTBEAT = 30.0
STEP = re.compile(r"^[\w.-]+: ((?:building|debootstrapping|fetching|installing|pulling)\b.*)$")


def duration(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60} min {whole % 60} s" if whole >= 60 else f"{whole} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("label")
    parser.add_argument("--steps", type=int, default=0, help="how many steps a cold run has")
    parser.add_argument("--heartbeat", type=float, default=HEARTBEAT, help="seconds of silence")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args, command = parser.parse_args(argv[:split]), argv[split + 1 :]
    if not command:
        parser.error("no command after --")
    started = time.monotonic()
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, errors="replace")
    assert proc.stderr is not None
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    step, current, step_started, spoke = 0, "", started, False

    def say(text: str) -> None:
        nonlocal spoke
        spoke = True
        print(text, file=sys.stderr, flush=True)

    def tag() -> str:
        total = f"/{args.steps}" if args.steps and step <= args.steps else ""
        return f"[{args.label} {step}{total}]" if step else f"[{args.label}]"

    while True:
        try:
            line = lines.get(timeout=args.heartbeat)
        except queue.Empty:
            what = current or "working"
            say(f"{tag()} {what}: still running, {duration(time.monotonic() - step_started)}")
            continue
        if line is None:
            break
        found = STEP.match(line)
        if found is None:
            say(f"{tag()} {line}")
            continue
        now = time.monotonic()
        if current:
            say(f"{tag()} {current}: done in {duration(now - step_started)}")
        step, current, step_started = step + 1, found.group(1), now
        say(f"{tag()} {current}")
    code = proc.wait()
    if current:
        say(f"{tag()} {current}: done in {duration(time.monotonic() - step_started)}")
    if spoke or code != 0:
        outcome = "done" if code == 0 else f"FAILED (exit {code})"
        say(f"[{args.label}] {outcome} in {duration(time.monotonic() - started)}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
