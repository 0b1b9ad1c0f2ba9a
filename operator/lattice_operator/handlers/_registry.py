"""The registry of what every replica runs, leader or not (lattice_operator.boot).

kopf's default registry holds the reconciling handlers, run only by the replica that holds
the leader Lease. This one holds the admission webhooks (and the index they read), the
start-up that serves them, and the webhook certificate's reloading: a standby serves them too,
so it is Ready and the webhook Service may route to it.
"""

from __future__ import annotations

import kopf

SERVING = kopf.OperatorRegistry()

__all__ = ["SERVING"]
