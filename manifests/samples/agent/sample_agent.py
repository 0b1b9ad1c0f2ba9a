"""A small scripted agent that speaks the Lattice sprite protocol v1.

It emits every v1 event type on stdout (LATTICE_EVENT lines) and in the outbox,
checkpoints itself and waits for approval, and on resume reads resume.json and
completes. manifests/samples/agent-run.yaml carries this file as its command.
"""

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone

LATTICE = "/workspace/.lattice"
SPRITE = os.environ.get("LATTICE_SPRITE_ID", "unknown")
WORK = os.environ.get("LATTICE_WORK_ITEM_ID", "unknown")
PAUSE = float(os.environ.get("AGENT_PAUSE", "0.3"))


def emit(event_type, payload):
    event = {
        "protocol_version": "v1",
        "event_type": event_type,
        "sprite_id": SPRITE,
        "work_item_id": WORK,
        "timestamp": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "payload": payload,
    }
    line = json.dumps(event, separators=(",", ":"))
    with open(f"{LATTICE}/outbox.jsonl", "a") as outbox:  # durable copy first
        outbox.write(line + "\n")
    print("LATTICE_EVENT " + line, flush=True)
    time.sleep(PAUSE)


def checkpoint(comment):
    try:
        out = subprocess.run(
            ["sprite-checkpoint", "--comment", comment], capture_output=True, text=True, timeout=60
        )
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().split()[-1]
    except (OSError, subprocess.SubprocessError):
        pass
    return "no-checkpoint"  # the operator then takes one itself


def first_session():
    emit("INFO", {"message": "sample agent starting", "kind": "note"})
    print("preparing the workspace (an ordinary log line)", flush=True)
    emit("PHASE_STARTED", {"phase": "bootstrap"})
    emit("INFO", {"message": "bootstrap 20%", "kind": "progress", "metadata": {"percent": 20}})
    emit("PHASE_FINISHED", {"phase": "bootstrap", "success": True})
    emit("PHASE_STARTED", {"phase": "implement"})
    emit("INFO", {"message": "implementing 50%", "kind": "progress", "metadata": {"percent": 50}})
    with open("/workspace/change.txt", "w") as f:
        f.write("the sample agent's work product\n")
    emit("ARTIFACT", {"kind": "file", "ref": "/workspace/change.txt", "url": None, "metadata": {}})
    emit("ACTION_REQUEST", {"action": "NOTIFY_USER", "parameters": {"message": "plan ready"},
                            "blocking": False})
    emit("ENVIRONMENT_PROPOSAL", {
        "observed_failure": {"phase": "bootstrap", "exit_code": 127,
                             "stderr_hint": "node: command not found"},
        "suggested_adjustment": {"type": "runtime_install",
                                 "details": {"runtime": "node", "version": "20"}},
        "confidence": 0.8,
        "evidence": ["package.json present"],
        "scope": "repo_specific",
    })
    emit("ERROR", {"message": "lint found 2 problems; asking a human how to proceed",
                   "details": {"phase": "implement", "problems": 2}})
    emit("PHASE_FINISHED", {"phase": "implement", "success": False})
    checkpoint_id = checkpoint("before WAITING for approval")
    emit("WAITING", {"reason": "PLAN_APPROVAL", "checkpoint_id": checkpoint_id,
                     "expected_inputs": {"approved": "boolean", "comments": "array<string>"}})


def resumed_session():
    with open(f"{LATTICE}/resume.json") as f:
        resume = json.load(f)
    marker = f"{LATTICE}/resumed-{resume['checkpoint_id']}"
    if os.path.exists(marker):  # a replayed resume is a no-op
        emit("INFO", {"message": "resume already processed", "kind": "note"})
        return
    open(marker, "w").close()
    inputs = resume.get("inputs", {})
    emit("INFO", {"message": f"resumed: approved={inputs.get('approved')}", "kind": "note",
                  "metadata": {"comments": len(inputs.get("comments", []))}})
    emit("PHASE_STARTED", {"phase": "finish"})
    emit("INFO", {"message": "finishing 90%", "kind": "progress", "metadata": {"percent": 90}})
    emit("PHASE_FINISHED", {"phase": "finish", "success": True})
    status = "success" if inputs.get("approved") else "failure"
    emit("COMPLETED", {"status": status, "summary": f"sample agent done ({status})"})


def main():
    os.makedirs(LATTICE, exist_ok=True)
    if os.path.exists(f"{LATTICE}/resume.json"):
        resumed_session()
    else:
        first_session()
    return 0


if __name__ == "__main__":
    sys.exit(main())
