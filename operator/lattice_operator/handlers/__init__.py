"""kopf wiring only: each handler is a decorator and a few lines calling a reconciler.

Importing this package registers every handler with kopf's default registry.
"""

from lattice_operator.handlers import (
    _startup,
    admission,
    github,
    healthcheck,
    intent,
    leader,
    run,
    sprite,
    stream,
)

__all__ = [
    "_startup",
    "admission",
    "github",
    "healthcheck",
    "intent",
    "leader",
    "run",
    "sprite",
    "stream",
]
