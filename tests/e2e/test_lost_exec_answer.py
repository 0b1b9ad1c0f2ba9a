"""An exec whose answer never came back, against the local Sprites server: the command the
server started anyway is followed (run once, not failed), and a start the server makes only
after the operator gave up runs nothing (the wrapper's marker), so that no command of a Run
is left running unseen. The operator waits 3 s for an answer here (`backend.request_timeout`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cluster import Cluster, wait_for
from tests.support.e2e_runs import apply_run, ready_sprite
from tests.support.sprites_server import LocalSprites
from tests.support.stack import FAST_SETTINGS, operator_stack

pytestmark = pytest.mark.e2e

# Each run of the command adds a line: how many times it ran, read from the sprite's disk.
COUNTED = "echo ran >> /workspace/{name}.count; sleep 1; echo done"


def _count(local_sprites: LocalSprites, sprite: str, name: str) -> int:
    path = local_sprites.host_root(sprite) / f"{name}.count"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_an_exec_answered_late_runs_once_and_a_start_made_after_giving_up_runs_nothing(
    cluster: Cluster, namespace: str, local_sprites: LocalSprites, tmp_path: Path
) -> None:
    backend = {**FAST_SETTINGS["backend"], "request_timeout": 3.0}
    args = ("--namespace", namespace)
    with operator_stack(cluster, local_sprites, tmp_path, *args, backend=backend) as s:
        sprite = ready_sprite(s, namespace)
        try:
            # The server starts the command, then holds the handshake's answer past the
            # operator's 3 s: the operator finds the session by its exit file and follows it.
            local_sprites.set_faults(exec_answer_delay=5.0, sprites=[sprite])
            apply_run(s, namespace, "answered-late", ["sh", "-c", COUNTED.format(name="late")])
            done = s.wait_phase(namespace, "runs", "answered-late", {"Succeeded", "Failed"})
            status = done["status"]
            assert status["phase"] == "Succeeded", status
            [attempt] = status["attempts"]
            assert attempt["exitCode"] == 0
            assert _count(local_sprites, sprite, "late") == 1

            # The server holds the request 9 s before it starts anything: the operator times
            # out, finds nothing, marks the session begun and fails the attempt (no retries);
            # the start that then reaches the sprite runs nothing.
            local_sprites.set_faults(exec_answer_delay=0.0, exec_start_delay=9.0, sprites=[sprite])
            started = local_sprites.describe(sprite)["execs_started"]
            apply_run(s, namespace, "never-answered", ["sh", "-c", COUNTED.format(name="never")])
            failed = s.wait_phase(namespace, "runs", "never-answered", {"Succeeded", "Failed"})
            status = failed["status"]
            assert (status["phase"], status["conditions"][0]["reason"]) == ("Failed", "StartFailed")
            assert "timed out" in status["conditions"][0]["message"], status["conditions"]
            assert "it did not begin" in status["conditions"][0]["message"]
            # The held start reaches the sprite after all; its wrapper finds the marker.
            wait_for(
                lambda: local_sprites.describe(sprite)["execs_started"] > started,
                timeout=30,
                what="the held start to reach the sprite",
            )
            wait_for(
                lambda: not local_sprites.describe(sprite)["sessions"],
                timeout=30,
                what="the late start's session to end",
            )
        finally:
            local_sprites.reset_faults()
        assert _count(local_sprites, sprite, "never") == 0
        marker = local_sprites.host_root(sprite) / ".lattice" / "exit"
        assert [p.name for p in marker.glob(f"{failed['metadata']['uid']}-*")] == [
            f"{failed['metadata']['uid']}-a1-s1.began"
        ]  # the marker only: no exit file, the command never ran
