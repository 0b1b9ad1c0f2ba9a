"""The registry of what every replica runs, leader or not (lattice_operator.boot).

kopf's default registry holds the reconciling handlers, run only by the replica that holds
the leader Lease. This one holds the admission webhooks (and the index they read), the
start-up that serves them, and the webhook certificate's reloading: a standby serves them too,
so it is Ready and the webhook Service may route to it.
"""

from __future__ import annotations

from typing import Any

import kopf

SERVING = kopf.OperatorRegistry()


def connection_info() -> kopf.ConnectionInfo:
    """kopf's credentials from the same kubeconfig reading as the rest of the operator
    (kubectl's merging of $KUBECONFIG, exec credential plugins), not from the `kubernetes`
    package's own: both would otherwise pick different contexts from a merged list, and a
    failing exec plugin would leave kopf unauthenticated. kopf logs in again at the plugin's
    expirationTimestamp and after a 401."""
    from lattice_adapters.kube import KubeConfig

    config = KubeConfig.load()
    credentials = config.credentials()
    return kopf.ConnectionInfo(
        server=config.server,
        ca_data=config.ca_pem,
        insecure=config.insecure or None,
        scheme="Bearer" if credentials.token else None,
        token=credentials.token,
        certificate_data=credentials.cert_pem,
        private_key_data=credentials.key_pem,
        default_namespace=config.namespace,
        proxy_url=config.proxy_url,
        expiration=config.exec_plugin.expires if config.exec_plugin is not None else None,
    )


@kopf.on.login(registry=SERVING)
def login(**_: Any) -> kopf.ConnectionInfo:
    return connection_info()


@kopf.on.login()
def login_reconciling(**_: Any) -> kopf.ConnectionInfo:
    return connection_info()


__all__ = ["SERVING"]
