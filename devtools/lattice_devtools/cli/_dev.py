"""`lattice dev`: the whole stack on this machine, with a sample driven to completion."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml

from lattice_operator.cli._format import progress_line

if TYPE_CHECKING:
    from lattice_devtools.devstack import DevStack


def dev(
    exit_after_demo: Annotated[
        bool, typer.Option("--exit", help="Stop the stack after the demo instead of staying up.")
    ] = False,
    state_dir: Annotated[Path, typer.Option(help="Where the stack keeps its state.")] = Path(
        ".lattice/dev"
    ),
) -> None:
    """Start the control plane, the CRDs, the local Sprites server and the operator, then
    drive the sample agent through WAITING and resume to completion; stay up until Ctrl-C."""
    from lattice_devtools.devstack import DevStackError, dev_stack
    from lattice_devtools.localcluster import ControlPlaneError

    repo = Path.cwd()

    def say(text: str) -> None:
        typer.secho(f"▸ {text}", fg=typer.colors.CYAN)

    try:
        with dev_stack(repo, state_dir.resolve(), say) as stack:
            stack.start_cluster()
            stack.apply_crds()
            stack.start_sprites()
            stack.start_operator()
            _demo(stack, repo / "manifests" / "samples", say)
            typer.echo(stack.kubectl("get", "lattice", "-A"))
            if exit_after_demo:
                return
            token = stack.viewer_token()
            stream = f"http://127.0.0.1:{stack.stream_port}"
            typer.secho(
                f"stack is up. In another terminal:\n  export KUBECONFIG={stack.kubeconfig}\n"
                "  kubectl get lattice -A\n  .venv/bin/lattice logs sample-agent --receipts\n"
                f"  .venv/bin/lattice watch --stream {stream} --token {token}\n"
                f"Live page: {stream}/#token={token}\n"
                "Press Ctrl-C to stop.",
                fg=typer.colors.GREEN,
            )
            stopped = threading.Event()
            signal.signal(signal.SIGTERM, lambda *_: stopped.set())
            with contextlib.suppress(KeyboardInterrupt):
                stopped.wait()
            say("stopping")
    except (DevStackError, ControlPlaneError) as exc:
        typer.secho(f"lattice dev failed: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from exc


def _get(stack: DevStack, kind: str, name: str) -> dict[str, Any]:
    out = stack.kubectl("get", kind, name, "-o", "json", check=False)
    doc: dict[str, Any] = json.loads(out) if out.strip() else {}
    return doc


def _demo(stack: DevStack, samples: Path, say: Any) -> None:
    stack.apply(yaml.safe_load((samples / "sprite.yaml").read_text()))
    say("applied manifests/samples/sprite.yaml")

    def sprite_ready() -> bool:
        conditions = _get(stack, "sprite", "sample").get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    stack.wait_for("the sample Sprite to be Ready", sprite_ready)
    say("Sprite sample is Ready at the local Sprites server")
    stack.apply(yaml.safe_load((samples / "agent-run.yaml").read_text()))
    say("applied manifests/samples/agent-run.yaml: following the Run")
    _follow(stack, "sample-agent", until={"Waiting"})
    waiting = _get(stack, "run", "sample-agent")["status"]["events"]["waiting"]
    say(
        f"the agent waits ({waiting['reason']}, checkpoint {waiting['checkpointId']}, expects "
        f"{waiting['expectedInputs']}): resuming it, as "
        "`lattice resume sample-agent -i approved=true -i 'comments=[\"ship it\"]'` would"
    )
    patch = {
        "spec": {
            "resume": {
                "checkpointId": waiting["checkpointId"],
                "inputs": {"approved": True, "comments": ["ship it"]},
            }
        }
    }
    stack.kubectl("patch", "run", "sample-agent", "--type", "merge", "-p", json.dumps(patch))
    phase = _follow(stack, "sample-agent", until={"Succeeded", "Failed", "Canceled"})
    run = _get(stack, "run", "sample-agent")
    cond = next(c for c in run["status"]["conditions"] if c["type"] == "Succeeded")
    say(f"Run sample-agent {phase}: {cond['reason']}: {cond['message']}")
    receipts = run["status"].get("receipts", {}).get("state", {}).get("ledger", {})
    say(f"{receipts.get('sequence', 0)} Lifeloop receipts, posted as Events on the Run")
    if phase != "Succeeded":
        from lattice_devtools.devstack import DevStackError

        raise DevStackError(f"the sample agent ended {phase}")
    _intent_demo(stack, samples, say)


def _intent_demo(stack: DevStack, samples: Path, say: Any) -> None:
    stack.apply(yaml.safe_load((samples / "intentpolicy.yaml").read_text()))
    stack.kubectl("apply", "-f", str(samples.parent / "rbac" / "lattice-approver.yaml"))
    stack.apply(yaml.safe_load((samples / "intent-gated-task.yaml").read_text()))
    say("applied the sample IntentPolicy and manifests/samples/intent-gated-task.yaml")
    phase = _follow(stack, "gated-task", kind="intent", until={"AwaitingApproval", "Rejected"})
    intent = _get(stack, "intent", "gated-task")
    classification = intent["status"]["classification"]
    say(
        f"Intent gated-task is {phase}: risk {classification['risk']}, rule "
        f"{classification['rule']}, {classification['approversRequired']} approval(s) needed"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "lattice_operator",
            "approve",
            "gated-task",
            "--reason",
            "reviewed in lattice dev",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(stack.kubeconfig)},
        check=False,
    )
    say(f"$ lattice approve gated-task → {(out.stdout or out.stderr).strip()}")
    phase = _follow(stack, "gated-task", kind="intent", until={"Succeeded", "Failed", "Canceled"})
    intent = _get(stack, "intent", "gated-task")
    say(f"Intent gated-task {phase}: {intent['status'].get('result', {}).get('summary', '')}")
    for entry in intent["status"]["auditLog"]:
        typer.echo(f"  audit: {entry['from']:>16} → {entry['to']:<16} by {entry['actor']}")
    if phase != "Succeeded":
        from lattice_devtools.devstack import DevStackError

        raise DevStackError(f"the sample Intent ended {phase}")


def _follow(
    stack: DevStack, name: str, *, until: set[str], kind: str = "run", timeout: float = 300
) -> str:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        status = _get(stack, kind, name).get("status") or {}
        line = progress_line(status) if kind == "run" else str(status.get("phase") or "Proposed")
        if line != last:
            typer.echo(f"  {name}: {line}")
            last = line
        phase = str(status.get("phase") or "Pending")
        if phase in until:
            return phase
        time.sleep(0.5)
    from lattice_devtools.devstack import DevStackError

    raise DevStackError(f"timed out following {name}")
