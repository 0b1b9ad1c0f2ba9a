"""Small sprite programs for tests: a protocol prelude plus a body, run with `python3 -c`."""

from __future__ import annotations

import textwrap

PRELUDE = r'''
import hashlib, json, os, stat, subprocess, sys, time
sprite, work = os.environ["LATTICE_SPRITE_ID"], os.environ["LATTICE_WORK_ITEM_ID"]
os.makedirs("/workspace/.lattice", exist_ok=True)
_outbox = open("/workspace/.lattice/outbox.jsonl", "a", buffering=1)

def envelope(event_type, payload, **override):
    event = {"protocol_version": "v1", "event_type": event_type, "sprite_id": sprite,
             "work_item_id": work, "timestamp": "2026-01-15T10:30:00Z", "payload": payload}
    event.update(override)
    return json.dumps(event)

def emit_raw(line):
    """The outbox first (durable), then stdout: what the protocol asks of a sprite."""
    _outbox.write(line + "\n")
    print("LATTICE_EVENT " + line, flush=True)

def emit(event_type, payload, **override):
    emit_raw(envelope(event_type, payload, **override))

def checkpoint(comment):
    out = subprocess.run(["sprite-checkpoint", "--comment", comment], capture_output=True,
                         text=True)
    return out.stdout.strip().split()[-1]
'''


def agent(body: str) -> str:
    """A `python3 -c` program: the prelude (emit, envelope, emit_raw, checkpoint) and `body`."""
    return PRELUDE + textwrap.dedent(body)
