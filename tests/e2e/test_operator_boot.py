"""`lattice run` boots against the cluster and its first handler acts on a Sprite."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes.client import AdmissionregistrationV1Api

from tests.support.admission_cases import build
from tests.support.cluster import Cluster, wait_for
from tests.support.operator import OperatorProcess, operator_process
from tests.support.sprites_server import LocalSprites

pytestmark = pytest.mark.e2e


def _ready_condition(cluster: Cluster, namespace: str, name: str) -> dict[str, object] | None:
    obj = cluster.custom.get_namespaced_custom_object(
        "lattice.dev", "v1alpha1", namespace, "sprites", name
    )
    for cond in obj.get("status", {}).get("conditions", []):
        if cond["type"] == "Ready":
            return {**cond, "generation": obj["metadata"]["generation"]}
    return None


@pytest.fixture(scope="module")
def bare(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[OperatorProcess, str]]:
    """`lattice run` with no configuration and no Sprites backend, in a namespace of its own:
    one start for the two tests below (an operator start is seconds of CPU), the second of
    which stops it."""
    namespace = cluster.create_namespace("operator-boot-bare")
    no_backend = {"SPRITES_TOKEN": "", "SPRITE_TOKEN": ""}
    with operator_process(
        cluster,
        tmp_path_factory.mktemp("bare"),
        "--namespace",
        namespace,
        "--metrics-port",
        "0",
        env=no_backend,
    ) as op:
        yield op, namespace
    cluster.delete_namespace(namespace)


def test_new_sprite_without_backend_is_reported_unknown(
    cluster: Cluster, bare: tuple[OperatorProcess, str]
) -> None:
    op, namespace = bare
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", input=json.dumps(build("sprite.yaml", "boot", {}))
    )
    cond = wait_for(
        lambda: _ready_condition(cluster, namespace, "boot"),
        timeout=60,
        what="the Ready condition",
    )
    assert op.alive()
    # No Sprites backend is configured for this operator: it says so instead of guessing.
    assert cond["status"] == "Unknown"
    assert cond["reason"] == "BackendNotConfigured"
    assert cond["observedGeneration"] == cond["generation"]


def test_the_throwaway_webhook_key_is_removed_when_the_operator_stops(
    bare: tuple[OperatorProcess, str],
) -> None:
    # The last test of `bare`'s operator: it stops it.
    op, _ = bare
    assert op.tmpdir is not None
    keys = list(op.tmpdir.glob("lattice-webhook-*/tls.key"))
    assert len(keys) == 1  # a self-signed serving key, made at start-up
    assert op.stop() == 0
    assert list(op.tmpdir.glob("lattice-webhook-*")) == []


def test_the_backend_token_comes_from_a_secret(
    cluster: Cluster, namespace: str, local_sprites: LocalSprites, tmp_path: Path
) -> None:
    cluster.kubectl(
        "create",
        "secret",
        "generic",
        "sprites-token",
        "-n",
        namespace,
        f"--from-literal=token={local_sprites.token}",
    )
    config = tmp_path / "operator.yaml"
    settings = {
        "backend": {
            "api_url": local_sprites.base_url,
            "token_secret": f"{namespace}/sprites-token",
            "observe_interval": 1.0,
        },
        "webhook": {"port": 0, "managed": None},
        "metrics_port": 0,
    }
    config.write_text(yaml.safe_dump(settings))
    no_environment = {"SPRITES_TOKEN": "", "SPRITES_API_URL": ""}
    with operator_process(
        cluster,
        tmp_path,
        "--config",
        str(config),
        "--namespace",
        namespace,
        env=no_environment,
    ):
        cluster.kubectl(
            "apply", "-n", namespace, "-f", "-", input=json.dumps(build("sprite.yaml", "tok", {}))
        )

        def ready() -> dict[str, object] | None:
            cond = _ready_condition(cluster, namespace, "tok")
            return cond if cond and cond["status"] == "True" else None

        cond = wait_for(ready, timeout=60, what="the Sprite to be Ready with the Secret's token")
    assert cond["observedGeneration"] == cond["generation"]


def test_a_missing_token_secret_leaves_the_operator_running_and_says_so(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text(yaml.safe_dump({"backend": {"token_secret": f"{namespace}/no-such-secret"}}))
    with operator_process(
        cluster,
        tmp_path,
        "--config",
        str(config),
        "--namespace",
        namespace,
        "--metrics-port",
        "0",
    ) as op:
        cluster.kubectl(
            "apply", "-n", namespace, "-f", "-", input=json.dumps(build("sprite.yaml", "nt", {}))
        )
        cond = wait_for(
            lambda: _ready_condition(cluster, namespace, "nt"), timeout=60, what="Ready"
        )
        assert op.alive()  # started, serving: not a crash loop on a missing Secret
        wait_for(lambda: _webhook_configurations(cluster), timeout=60, what="webhooks registered")
    assert (cond["status"], cond["reason"]) == ("Unknown", "BackendNotConfigured")
    assert "no-such-secret" in str(cond["message"])
    # Stopped, it leaves no webhook configuration pointing at it: a later module's writes
    # without an operator would be refused (failurePolicy Fail, connection refused).
    assert _webhook_configurations(cluster) == []


def _webhook_configurations(cluster: Cluster) -> list[str]:
    hooks = AdmissionregistrationV1Api(cluster.api_client())
    return [
        f"{kind}/{config.metadata.name}"
        for kind, listed in (
            ("mutating", hooks.list_mutating_webhook_configuration()),
            ("validating", hooks.list_validating_webhook_configuration()),
        )
        for config in listed.items
        if config.metadata.name == "lattice.dev"
    ]
