"""The webhook certificate rotation plan (lattice_operator.certrotation): each step, and a
simulated cluster where API servers trust what was published a moment ago and replicas
reload the Secret on their own schedule, checked at every tick for a refused handshake."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import pytest

from lattice_operator.certrotation import (
    Action,
    CertState,
    RotationPlanner,
    RotationTimings,
    Step,
)
from tests.support.clock import FakeClock

TIMINGS = RotationTimings(rotate_before=5.0, propagation=1.0, reload_interval=0.5)
NAMES = frozenset({"lattice-webhook.lattice-system.svc"})


def state(clock: FakeClock, **changes: object) -> CertState:
    base = CertState(
        bundle=("ca-1",),
        signing_ca="ca-1",
        serving_issuer="ca-1",
        serving_not_after=clock.now() + timedelta(seconds=60),
        serving_names=NAMES,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_no_secret_creates_one() -> None:
    clock = FakeClock()
    assert RotationPlanner(TIMINGS, clock).plan(None, NAMES, None).action is Action.CREATE


@pytest.mark.parametrize(
    "changes",
    [
        {"serving_not_after": datetime(2025, 1, 1).astimezone()},
        {"signing_ca": None},
        {"signing_ca": "ca-9"},
        {"serving_issuer": None},
    ],
)
def test_an_unusable_secret_is_reissued(changes: dict[str, object]) -> None:
    clock = FakeClock()
    step = RotationPlanner(TIMINGS, clock).plan(state(clock, **changes), NAMES, True)
    assert step.action is Action.REISSUE
    assert step.reason


def test_a_bundle_not_yet_published_is_published_first() -> None:
    clock = FakeClock()
    planner = RotationPlanner(TIMINGS, clock)
    assert planner.plan(state(clock), NAMES, False).action is Action.PUBLISH


def test_a_current_certificate_waits_until_it_is_due() -> None:
    clock = FakeClock()
    step = RotationPlanner(TIMINGS, clock).plan(state(clock), NAMES, True)
    assert step.action is Action.WAIT
    assert step.wait == pytest.approx(55.0)


def test_a_certificate_near_expiry_begins_a_rotation() -> None:
    clock = FakeClock()
    near = state(clock, serving_not_after=clock.now() + timedelta(seconds=4.9))
    assert RotationPlanner(TIMINGS, clock).plan(near, NAMES, True).action is Action.BEGIN


def test_a_certificate_longer_lived_than_the_validity_now_configured_is_rotated() -> None:
    """Shortening the validity takes effect at once, through an ordinary rotation."""
    clock = FakeClock()
    timings = replace(TIMINGS, validity=30.0)
    assert RotationPlanner(timings, clock).plan(state(clock), NAMES, True).action is Action.BEGIN
    fresh = state(clock, serving_not_after=clock.now() + timedelta(seconds=30.5))
    assert RotationPlanner(timings, clock).plan(fresh, NAMES, True).action is Action.WAIT


def test_the_switch_waits_for_the_new_bundle_to_propagate() -> None:
    clock = FakeClock()
    planner = RotationPlanner(TIMINGS, clock)
    begun = state(clock, bundle=("ca-1", "ca-2"), signing_ca="ca-2")
    assert planner.plan(begun, NAMES, True).action is Action.WAIT
    clock.advance(0.9)
    assert planner.plan(begun, NAMES, True).wait == pytest.approx(0.1)
    clock.advance(0.1)
    assert planner.plan(begun, NAMES, True).action is Action.SWITCH


def test_publishing_again_restarts_the_wait() -> None:
    """A configuration overwritten with an old bundle (a helm upgrade, a re-registration):
    the full propagation time counts again from the new publication."""
    clock = FakeClock()
    planner = RotationPlanner(TIMINGS, clock)
    begun = state(clock, bundle=("ca-1", "ca-2"), signing_ca="ca-2")
    planner.plan(begun, NAMES, True)
    clock.advance(0.8)
    assert planner.plan(begun, NAMES, False).action is Action.PUBLISH
    clock.advance(0.5)
    assert planner.plan(begun, NAMES, True).action is Action.WAIT
    clock.advance(1.0)
    assert planner.plan(begun, NAMES, True).action is Action.SWITCH


def test_the_old_ca_is_dropped_once_every_replica_can_have_reloaded() -> None:
    clock = FakeClock()
    planner = RotationPlanner(TIMINGS, clock)
    switched = state(clock, bundle=("ca-1", "ca-2"), signing_ca="ca-2", serving_issuer="ca-2")
    assert planner.plan(switched, NAMES, True).action is Action.WAIT
    clock.advance(1.4)
    assert planner.plan(switched, NAMES, True).action is Action.WAIT
    clock.advance(0.1)
    assert planner.plan(switched, NAMES, True).action is Action.DROP


def test_a_new_leader_waits_the_whole_time_again() -> None:
    """Waits are measured from when this process first saw the state, never from times a
    previous leader (with another clock) wrote down."""
    clock = FakeClock()
    begun = state(clock, bundle=("ca-1", "ca-2"), signing_ca="ca-2")
    first = RotationPlanner(TIMINGS, clock)
    first.plan(begun, NAMES, True)
    clock.advance(0.9)
    second = RotationPlanner(TIMINGS, clock)  # took over just now
    assert second.plan(begun, NAMES, True).action is Action.WAIT
    clock.advance(0.9)
    assert second.plan(begun, NAMES, True).action is Action.WAIT
    clock.advance(0.1)
    assert second.plan(begun, NAMES, True).action is Action.SWITCH


def test_a_certificate_missing_a_name_is_reissued_by_the_trusted_ca() -> None:
    clock = FakeClock()
    other = state(clock, serving_names=frozenset({"old.lattice-system.svc"}))
    assert RotationPlanner(TIMINGS, clock).plan(other, NAMES, True).action is Action.SWITCH


# -- a simulated cluster ------------------------------------------------------------------


@dataclass
class Cert:
    issuer: str
    not_after: datetime


@dataclass
class World:
    """The Secret, what the API servers trust, and what each replica serves."""

    clock: FakeClock
    api_delay: float
    secret: tuple[tuple[str, ...], str, Cert] | None = None
    published: tuple[str, ...] = ()
    trusted: list[tuple[float, tuple[str, ...]]] = field(default_factory=list)
    served: dict[str, Cert] = field(default_factory=dict)
    cas: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    ca_until: dict[str, datetime] = field(default_factory=dict)
    steps: list[Action] = field(default_factory=list)

    def new_ca(self, validity: float) -> str:
        ca = f"ca-{next(self.cas)}"
        self.ca_until[ca] = self.clock.now() + timedelta(seconds=validity)
        return ca

    def api_trusts(self) -> tuple[str, ...]:
        """What the API servers verify with: what was published `api_delay` ago."""
        now = self.clock.monotonic()
        seen = [bundle for at, bundle in self.trusted if at + self.api_delay <= now]
        return seen[-1] if seen else ()

    def observe(self) -> CertState | None:
        if self.secret is None:
            return None
        bundle, signing, serving = self.secret
        return CertState(
            bundle,
            signing,
            serving.issuer if serving.issuer in bundle else None,
            serving.not_after,
            NAMES,
        )

    def carry_out(self, step: Step, validity: float) -> None:
        self.steps.append(step.action)
        if step.action in (Action.CREATE, Action.REISSUE):
            ca = self.new_ca(validity)
            self.secret = ((ca,), ca, Cert(ca, self.ca_until[ca]))
        assert self.secret is not None
        bundle, signing, serving = self.secret
        if step.action is Action.PUBLISH:
            self.published = bundle
            self.trusted.append((self.clock.monotonic(), bundle))
        elif step.action is Action.BEGIN:
            ca = self.new_ca(validity)
            self.secret = ((*bundle, ca), ca, serving)
        elif step.action is Action.SWITCH:  # valid as long as its CA, as the wiring issues it
            self.secret = (bundle, signing, Cert(signing, self.ca_until[signing]))
        elif step.action is Action.DROP:
            self.secret = ((signing,), signing, serving)

    def reload(self, replica: str) -> None:
        if self.secret is not None:
            self.served[replica] = self.secret[2]


@pytest.mark.parametrize("api_delay", [0.0, 0.3, 0.9])
def test_no_handshake_is_refused_across_many_rotations(api_delay: float) -> None:
    validity, tick = 8.0, 0.05
    clock = FakeClock()
    world = World(clock, api_delay)
    planner = RotationPlanner(replace(TIMINGS, validity=validity), clock)
    # Three replicas reload every reload_interval, each at its own phase.
    phases = {"a": 0.0, "b": 0.17, "c": 0.41}
    refused: list[str] = []
    for n in range(int(60 / tick)):  # a minute: several validity periods
        clock.advance(tick)
        now = clock.monotonic()
        step = planner.plan(
            world.observe(), NAMES, world.published == world.secret[0] if world.secret else None
        )
        if step.action is not Action.WAIT:
            world.carry_out(step, validity)
        for replica, phase in phases.items():
            if n == 0 or (now - phase) % TIMINGS.reload_interval < tick:
                world.reload(replica)
        trusted = world.api_trusts()
        if not trusted:
            continue  # not installed yet
        for replica, cert in world.served.items():
            if cert.issuer not in trusted or cert.not_after <= clock.now():
                refused.append(f"t={now:.2f} {replica} serves {cert} trusted {trusted}")
    assert not refused, refused[:5]
    assert world.steps.count(Action.BEGIN) >= 15  # one every validity - rotate_before
    assert Action.REISSUE not in world.steps  # never fell back to starting afresh


def test_the_simulation_notices_a_premature_switch() -> None:
    """The check above can fail: with no wait for propagation, a replica serves a
    certificate the API servers do not trust yet."""
    clock = FakeClock()
    world = World(clock, api_delay=0.9)
    fast = RotationPlanner(RotationTimings(5.0, 0.0001, 0.0001), clock)
    refused = 0
    for _ in range(int(30 / 0.05)):
        clock.advance(0.05)
        published = world.published == world.secret[0] if world.secret else None
        step = fast.plan(world.observe(), NAMES, published)
        if step.action is not Action.WAIT:
            world.carry_out(step, 8.0)
        world.reload("a")
        trusted = world.api_trusts()
        if trusted and world.served["a"].issuer not in trusted:
            refused += 1
    assert refused > 0
