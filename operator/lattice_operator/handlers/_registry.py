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


@kopf.on.login(registry=SERVING)
def login(**kwargs: Any) -> Any:
    """The same credentials as kopf's default registry finds (a plain registry has none)."""
    return kopf.login_via_client(**kwargs)


__all__ = ["SERVING"]
