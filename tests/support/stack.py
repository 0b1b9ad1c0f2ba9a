"""The operator stack for end-to-end tests: a local Sprites server and `lattice run`."""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import yaml
from kubernetes.client.exceptions import ApiException

from lattice_devtools.localcluster.controlplane import free_port
from tests.support.cluster import Cluster, create_or_replace, wait_for
from tests.support.operator import (
    OperatorProcess,
    remove_webhook_configurations,
    spawn_operator,
)
from tests.support.sprites_server import LocalSprites

# The API server must reach the operator's admission webhook. On this machine that is
# 127.0.0.1; a kind cluster's API server runs in a container and needs the host's address on
# the container network (for example LATTICE_TEST_WEBHOOK_HOST=172.18.0.1).
WEBHOOK_HOST = os.environ.get("LATTICE_TEST_WEBHOOK_HOST", "127.0.0.1")

FAST_SETTINGS: dict[str, Any] = {
    "webhook": {"host": WEBHOOK_HOST, "port": 0},
    "backend": {"observe_interval": 1.0, "page_size": 100},
    "sprites": {"delete_attempts": 3, "delete_backoff": 0.5, "blocked_recheck": 2.0},
    "runs": {
        "outbox_interval": 0.2,
        "patch_interval": 0.5,
        "sprite_wait": 0.3,
        "reattach_deadline": 30.0,
        "events_per_second": 50.0,
        "events_burst": 500,
        "retention_interval": 0.5,
        "waiting_exit_grace": 3.0,
        # An exec this (loaded) machine confirms within 5 s is stored by one status write,
        # Running, as the product's 0.25 s does on a quiet one: the writes the tests count
        # do not depend on the load (the unit tests drive the slower start).
        "starting_write_after": 5.0,
    },
}


def lattice_plural(kind: str) -> str:
    """The CRDs' plural of a lattice.dev kind (IntentPolicy -> intentpolicies)."""
    lower = kind.lower()
    return lower[:-1] + "ies" if lower.endswith("y") else lower + "s"


@dataclass
class Stack:
    cluster: Cluster
    sprites: LocalSprites
    operator: OperatorProcess
    config: Path
    log_dir: Path
    metrics_port: int
    args: tuple[str, ...]
    env: dict[str, str]

    def apply(self, namespace: str, doc: dict[str, Any]) -> None:
        self.cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))

    def create(self, namespace: str, doc: dict[str, Any]) -> None:
        """Write a lattice.dev object through the API client (create, or replace if it exists).

        For set-up objects no test re-applies nor reads through kubectl: `apply` runs a kubectl
        process (~136 ms of CPU against ~1 ms for the API create) and keeps client-side apply's
        merge for the tests that need it. Unknown fields fail, as they do for kubectl."""
        group, version = doc["apiVersion"].split("/")
        if group != "lattice.dev":
            raise ValueError(f"Stack.create writes lattice.dev objects, not {doc['apiVersion']}")
        plural = lattice_plural(doc["kind"])
        name = doc["metadata"]["name"]
        custom = self.cluster.custom
        create_or_replace(
            lambda body: custom.create_namespaced_custom_object(
                group, version, namespace, plural, body, field_validation="Strict"
            ),
            lambda: custom.get_namespaced_custom_object(group, version, namespace, plural, name),
            lambda body: custom.replace_namespaced_custom_object(
                group, version, namespace, plural, name, body, field_validation="Strict"
            ),
            doc,
        )

    def get(self, namespace: str, plural: str, name: str) -> dict[str, Any]:
        obj = self.cluster.custom.get_namespaced_custom_object(
            "lattice.dev", "v1alpha1", namespace, plural, name
        )
        return cast(dict[str, Any], obj)

    def find(self, namespace: str, plural: str, name: str) -> dict[str, Any] | None:
        """The object, or None while it does not exist (an Intent creates its Run later)."""
        try:
            return self.get(namespace, plural, name)
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    def wait_phase(
        self, namespace: str, plural: str, name: str, phases: set[str], timeout: float = 120.0
    ) -> dict[str, Any]:
        last: list[dict[str, Any] | None] = [None]

        def reached() -> dict[str, Any] | None:
            obj = last[0] = self.find(namespace, plural, name)
            return (
                obj
                if obj is not None and (obj.get("status") or {}).get("phase") in phases
                else None
            )

        try:
            found: dict[str, Any] = wait_for(
                reached, timeout=timeout, what=f"{plural}/{name} to reach {sorted(phases)}"
            )
        except AssertionError as exc:
            # Where it stood instead: a soak failure is read from this text alone.
            raise AssertionError(f"{exc}; its status then: {seen_status(last[0])}") from None
        return found

    def wait_sprite_ready(self, namespace: str, name: str, timeout: float = 60.0) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            obj = self.find(namespace, "sprites", name)
            if obj is None:
                return None
            conditions = (obj.get("status") or {}).get("conditions") or []
            ok = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
            return obj if ok else None

        found: dict[str, Any] = wait_for(ready, timeout=timeout, what=f"Sprite {name} Ready")
        return found

    def start(self) -> OperatorProcess:
        """Start a new operator with the same arguments (after `operator.stop()` or a crash)."""
        self.operator = spawn_operator(
            self.cluster.kubeconfig, self.log_dir, *self.args, env=self.env
        )
        wait_webhooks_served(self.cluster)
        return self.operator

    def crash_and_restart(self) -> OperatorProcess:
        """Kill the operator (no graceful shutdown) and start a new one with the same arguments."""
        self.operator.kill()
        return self.start()


def seen_status(obj: dict[str, Any] | None) -> str:
    """An object's phase and conditions in one line (absent: "no such object")."""
    if obj is None:
        return "no such object"
    status = obj.get("status") or {}
    conditions = [
        f"{c.get('type')}={c.get('status')}/{c.get('reason')}: {str(c.get('message'))[:160]}"
        for c in status.get("conditions") or []
    ]
    return f"phase {status.get('phase')!r}, conditions {conditions}"


def wait_webhooks_served(cluster: Cluster, timeout: float = 60.0) -> None:
    """Until the webhook configurations the operator registers point at a server that accepts
    connections: its own, once it has registered. Ready (healthz) comes first; until then a
    write would meet no webhook at all, or one left by an operator stopped earlier (a test
    that ran `lattice run` with the default settings), refused with a connection error."""

    # Read in process: a kubectl per 0.1 s poll was CPU taken from the operator starting.
    api = cluster.custom

    def served() -> bool:
        try:
            config = cast(
                dict[str, Any],
                api.get_cluster_custom_object(
                    "admissionregistration.k8s.io",
                    "v1",
                    "validatingwebhookconfigurations",
                    "lattice.dev",
                ),
            )
        except ApiException as err:
            if err.status == 404:
                return False
            raise
        urls = {w["clientConfig"].get("url", "") for w in config.get("webhooks") or []}
        for url in urls:
            address = urlsplit(url)
            try:
                socket.create_connection((address.hostname, address.port or 443), 2).close()
            except OSError:
                return False
        return bool(urls)

    wait_for(served, timeout=timeout, what="the operator's webhooks registered and served")


def write_config(path: Path, metrics_port: int, **overrides: Any) -> Path:
    settings = {**FAST_SETTINGS, "metrics_port": metrics_port, **overrides}
    path.write_text(yaml.safe_dump(settings))
    return path


@contextlib.contextmanager
def operator_stack(
    cluster: Cluster, sprites: LocalSprites, log_dir: Path, *args: str, **overrides: Any
) -> Iterator[Stack]:
    """The operator against `sprites`; stopped (whichever process is current) afterwards.

    The worker's shared operator (tests/support/operator_slot.py) is stopped first: two
    operators must never reconcile one cluster at once."""
    # Imported here: the slot builds its operator with this module's start_stack.
    from tests.support.operator_slot import release_shared

    release_shared()
    stack = start_stack(cluster, sprites, log_dir, *args, **overrides)
    try:
        yield stack
    finally:
        stop_stack(stack)


def start_stack(
    cluster: Cluster, sprites: LocalSprites, log_dir: Path, *args: str, **overrides: Any
) -> Stack:
    """The operator started, its webhooks served (unless it manages none); stopped again if
    they never are."""
    port = free_port()
    config = write_config(log_dir / f"operator-{port}.yaml", port, **overrides)
    env = {"SPRITES_TOKEN": sprites.token, "SPRITES_API_URL": sprites.base_url}
    full_args = ("--config", str(config), *args)
    op = spawn_operator(cluster.kubeconfig, log_dir, *full_args, env=env)
    stack = Stack(cluster, sprites, op, config, log_dir, port, full_args, env)
    try:
        if overrides.get("webhook", {}).get("managed", True) is not None:
            wait_webhooks_served(cluster)
    except BaseException:
        stop_stack(stack)
        raise
    return stack


def stop_stack(stack: Stack) -> None:
    """Its current operator stopped and the cluster-wide webhook configurations removed."""
    stack.operator.stop()
    # The webhook configurations point at this operator: an Intent written after it is
    # gone would otherwise be refused (failurePolicy Fail) until another one starts.
    remove_webhook_configurations(stack.cluster)
