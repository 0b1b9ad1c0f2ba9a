"""Rotating the admission webhook's CA and serving certificate without refusing a request.

Pure: no I/O, no cryptography. The wiring (handlers/webhook_cert.py) reads the Secret and the
webhook configurations, describes them as a `CertState`, asks `RotationPlanner.plan` for one
step, carries it out, and asks again.

The API servers verify the serving certificate against the configurations' `caBundle`, and
every replica serves the certificate it last read from the Secret. A rotation therefore
goes in three steps, each waiting until the previous one has reached everyone:

1. **begin**: a new CA is added to the bundle (the Secret's `ca.crt` and every `caBundle`);
   the serving certificate, signed by the old CA, stays.
2. **switch** (once the new bundle has been published for `propagation` seconds): the serving
   certificate is re-issued by the new CA; replicas load it within `reload_interval`.
3. **drop** (after `propagation + reload_interval` more): the old CA leaves the bundle.

At every moment each certificate a replica may serve chains to a CA in the published bundle.
Waits are measured on this process's own monotonic clock from when it first saw the current
state, so a new leader (or clock skew between replicas) can only make a wait longer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from lattice_operator.clock import Clock


@dataclass(frozen=True)
class CertState:
    """What the Secret holds, by fingerprint (SHA-256 of the DER certificate)."""

    bundle: tuple[str, ...]
    """The CAs of `ca.crt`, oldest first."""
    signing_ca: str | None
    """The CA whose key is in `ca.key` (None: the key matches none of them)."""
    serving_issuer: str | None
    """The bundle CA that signed `tls.crt` (None: none did)."""
    serving_not_after: datetime
    serving_names: frozenset[str]
    """The DNS names and addresses the serving certificate is valid for."""


@dataclass(frozen=True)
class RotationTimings:
    rotate_before: float
    propagation: float
    reload_interval: float
    validity: float = float("inf")
    """A certificate with more time left than this (and `propagation`) was made under a
    longer validity than the one configured now: it is rotated too."""


class Action(Enum):
    CREATE = "create"
    """No Secret: make a CA and a serving certificate."""
    REISSUE = "reissue"
    """The Secret is unusable (expired, or its parts do not belong together): start afresh."""
    PUBLISH = "publish"
    """The webhook configurations' caBundle differs from the Secret's: write it."""
    BEGIN = "begin"
    """Add a new CA to the bundle (and make it the signing CA)."""
    SWITCH = "switch"
    """Issue the serving certificate from the signing CA."""
    DROP = "drop"
    """Keep only the signing CA in the bundle."""
    WAIT = "wait"


@dataclass(frozen=True)
class Step:
    action: Action
    wait: float = 0.0
    """For WAIT: seconds until something is due."""
    reason: str = ""


class RotationPlanner:
    """Decides the next step for one Secret; remembers when it first saw each state."""

    def __init__(self, timings: RotationTimings, clock: Clock) -> None:
        self._timings = timings
        self._clock = clock
        self._seen: tuple[tuple[str, ...], str | None] | None = None
        self._seen_at = 0.0

    def plan(self, state: CertState | None, names: frozenset[str], published: bool | None) -> Step:
        """`names`: what the serving certificate must be valid for. `published`: whether
        every webhook of the configurations carries the Secret's bundle (None: there are no
        configurations to keep, as when the installation has not made them yet)."""
        t = self._timings
        if state is None:
            return Step(Action.CREATE, reason="no certificate yet")
        now = self._clock.now()
        broken = _broken(state, now)
        if broken:
            self._seen = None
            return Step(Action.REISSUE, reason=broken)
        if published is False:
            self._seen = None  # every wait starts again from a bundle everyone has
            return Step(Action.PUBLISH, reason="the webhook configurations carry another bundle")
        key = (state.bundle, state.serving_issuer)
        if key != self._seen:
            self._seen, self._seen_at = key, self._clock.monotonic()
        waited = self._clock.monotonic() - self._seen_at
        if state.serving_issuer != state.signing_ca:
            if waited < t.propagation:
                return Step(Action.WAIT, t.propagation - waited, "the new CA is propagating")
            return Step(Action.SWITCH, reason="the new CA is trusted everywhere")
        if not names <= state.serving_names:
            return Step(Action.SWITCH, reason="the serving certificate lacks a name")
        if len(state.bundle) > 1:
            due = t.propagation + t.reload_interval
            if waited < due:
                return Step(Action.WAIT, due - waited, "replicas are loading the new certificate")
            return Step(Action.DROP, reason="every replica serves the new certificate")
        left = (state.serving_not_after - now).total_seconds()
        if left <= t.rotate_before:
            return Step(Action.BEGIN, reason=f"the serving certificate expires in {left:.0f} s")
        if left > t.validity + t.propagation:
            return Step(Action.BEGIN, reason=f"valid {left:.0f} s more than the validity allows")
        return Step(Action.WAIT, left - t.rotate_before, "nothing due")


def _broken(state: CertState, now: datetime) -> str:
    if state.serving_not_after <= now:
        return "the serving certificate has expired"
    if state.signing_ca is None or state.signing_ca not in state.bundle:
        return "the CA key belongs to no CA of the bundle"
    if state.serving_issuer is None:
        return "the serving certificate was signed by no CA of the bundle"
    return ""


__all__ = ["Action", "CertState", "RotationPlanner", "RotationTimings", "Step"]
