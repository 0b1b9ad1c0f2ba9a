"""Deleting a Sprite while its backend is down is bounded, explained, and releasable.

In a module of its own: no other operator may run while this one's backend is down.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiException

from tests.support.admission_cases import build
from tests.support.cluster import Cluster, wait_for
from tests.support.sprites_server import sprites_server
from tests.support.stack import operator_stack

pytestmark = pytest.mark.e2e


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions", [])}


def test_deletion_with_the_backend_down_is_bounded_and_explained(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    with (
        sprites_server(tmp_path / "doomed-backend") as sprites,
        operator_stack(cluster, sprites, tmp_path, "--namespace", namespace) as own,
    ):
        own.apply(namespace, build("sprite.yaml", "stuck", {}))
        own.wait_sprite_ready(namespace, "stuck")
        sprites.process.terminate()  # the backend goes down for good
        sprites.process.wait(timeout=30)
        cluster.kubectl("delete", "sprite", "stuck", "-n", namespace, "--wait=false")

        def blocked() -> dict[str, Any] | None:
            cond = _conditions(own.get(namespace, "sprites", "stuck")).get("Ready")
            return cond if cond and cond["reason"] == "DeletionBlocked" else None

        cond = wait_for(blocked, timeout=90, what="Ready=False reason=DeletionBlocked")
        assert "deletionPolicy: Orphan" in cond["message"]
        assert "could not be deleted after 3 attempts" in cond["message"]
        events = cluster.kubectl(
            "get",
            "events",
            "-n",
            namespace,
            "--field-selector",
            "involvedObject.name=stuck,reason=DeletionBlocked",
            "-o",
            "json",
        ).stdout
        assert json.loads(events)["items"], "a DeletionBlocked Event explains what is stuck"

        # Releasing it as the message says lets the object go, leaving the backend sprite.
        cluster.kubectl(
            "patch",
            "sprite",
            "stuck",
            "-n",
            namespace,
            "--type",
            "merge",
            "-p",
            '{"spec":{"deletionPolicy":"Orphan"}}',
        )

        def gone() -> bool:
            try:
                own.get(namespace, "sprites", "stuck")
            except ApiException as exc:
                return exc.status == 404
            return False

        wait_for(gone, timeout=60, what="the Sprite object to be released")
