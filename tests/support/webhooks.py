"""Where the operator's webhook server is registered, and the CA it is verified with."""

from __future__ import annotations

import base64

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.support.cluster import Cluster, wait_for


def published_bundle(cluster: Cluster) -> bytes:
    """The caBundle the API server verifies the webhook with (every webhook carries it)."""
    hooks = k8s.AdmissionregistrationV1Api(cluster.api_client())
    config = hooks.read_validating_webhook_configuration("lattice.dev")
    bundles = {w.client_config.ca_bundle for w in config.webhooks}
    assert len(bundles) == 1, "the webhooks of one configuration disagree"
    return base64.b64decode(bundles.pop())


def webhook_url(cluster: Cluster) -> str:
    """Where the operator registered its webhook server (once it has)."""
    hooks = k8s.AdmissionregistrationV1Api(cluster.api_client())

    def registered() -> str | None:
        try:
            config = hooks.read_validating_webhook_configuration("lattice.dev")
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return str(config.webhooks[0].client_config.url)

    return str(wait_for(registered, timeout=30, what="the webhook configuration"))
