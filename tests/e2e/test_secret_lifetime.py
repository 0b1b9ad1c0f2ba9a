"""A credential does not outlive its Run, even when the operator restarts during the Run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.agents import agent
from tests.support.cluster import Cluster, wait_for
from tests.support.e2e_intents import SECRET, apply_secret, intent_doc, setup_namespace
from tests.support.sprites_server import LocalSprites
from tests.support.stack import operator_stack

pytestmark = pytest.mark.e2e

FETCHES_WORKS_FINISHES = agent(
    r"""
emit("ACTION_REQUEST", {"action": "FETCH_CREDENTIAL", "parameters": {"name": "gh"},
                        "blocking": False})
for _ in range(300):
    if os.path.exists("/dev/shm/lattice/credentials/gh"):
        break
    time.sleep(0.1)
emit("INFO", {"message": "got it, working"})
while not os.path.exists("/workspace/go-on"):  # the test says when (bounded by the Run)
    time.sleep(0.1)
emit("COMPLETED", {"status": "success", "summary": "done"})
"""
)


def test_a_credential_is_removed_by_the_operator_that_finishes_the_run(
    cluster: Cluster, namespace: str, local_sprites: LocalSprites, tmp_path: Path
) -> None:
    with operator_stack(cluster, local_sprites, tmp_path, "--namespace", namespace) as stack:
        setup_namespace(stack, namespace)
        apply_secret(stack, namespace)
        sprite = str(stack.wait_sprite_ready(namespace, "box")["status"]["spriteName"])
        root = stack.sprites.host_root(sprite)
        intent = intent_doc(
            "restarted",
            ["python3", "-c", FETCHES_WORKS_FINISHES],
            trusted=True,
            allowedActions=["FETCH_CREDENTIAL"],
            credentials=[{"name": "gh", "secretKeyRef": {"name": "tokens", "key": "gh"}}],
        )
        intent["spec"]["params"]["spriteTaskExec"]["timeoutSeconds"] = 120
        stack.create(namespace, intent)
        delivered = stack.sprites.host_shm(sprite) / "lattice" / "credentials" / "gh"
        wait_for(delivered.exists, timeout=60, what="the credential delivered")
        assert delivered.read_text() == SECRET

        stack.crash_and_restart()  # the operator that delivered it is gone
        (root / "go-on").touch()
        run = stack.wait_phase(namespace, "runs", "restarted-run", {"Succeeded", "Failed"})
        assert run["status"]["phase"] == "Succeeded", run["status"]
        assert not delivered.exists()
