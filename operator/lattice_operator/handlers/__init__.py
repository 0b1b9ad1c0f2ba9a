"""kopf wiring only: each handler is a decorator and a few lines calling a reconciler.

Importing this package registers every handler: the reconciling ones with kopf's default
registry (run by the leader), the admission ones with `_registry.SERVING` (every replica).
"""

from lattice_operator.handlers import (
    _startup,
    _wakeups,
    admission,
    environment,
    fly,
    github,
    healthcheck,
    intent,
    run,
    sprite,
    sprite_checkpoint,
    stream,
    webhook_cert,
)

__all__ = [
    "_startup",
    "_wakeups",
    "admission",
    "environment",
    "fly",
    "github",
    "healthcheck",
    "intent",
    "run",
    "sprite",
    "sprite_checkpoint",
    "stream",
    "webhook_cert",
]
