"""The Sprite reconciler against an in-memory backend: partial failures keep ownership."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

import aiohttp
import pytest

from lattice_operator.api.v1alpha1 import Sprite
from lattice_operator.api.v1alpha1.sprite import NetworkRule, SpriteService, UrlAuth
from lattice_operator.ports.errors import AdapterError, NotFound, TransportError
from lattice_operator.ports.sprites import ServiceInfo, SpriteBackend, SpriteInfo, SpritePage
from lattice_operator.reconcilers.fleet import FleetObserver
from lattice_operator.reconcilers.sprite import (
    SpriteBackendError,
    SpriteReconcileError,
    delete_backend_sprite,
    error_status,
    owner_label,
    reconcile_sprite,
)
from lattice_operator.reconcilers.sprite_writers import SpriteWriters
from lattice_operator.settings import BackendSettings
from tests.support.admission_cases import sample
from tests.support.clock import FakeClock

NOW = datetime(2026, 1, 1, tzinfo=UTC)
UID = "0b6f3a52-3c1e-4d8e-9a43-5f2d7f0c9e11"


class FakeBackend:
    """The sprite, policy and service calls the Sprite reconciler makes, kept in memory."""

    def __init__(self) -> None:
        self.sprites: dict[str, SpriteInfo] = {}
        self.policies: dict[str, list[NetworkRule]] = {}
        self.services: dict[str, dict[str, SpriteService]] = {}
        self.calls: list[tuple[str, str]] = []
        self.fail_next: dict[str, AdapterError] = {}
        """Method name → the error its next call raises (once)."""
        self.hidden_from_list: set[str] = set()
        """Names LIST leaves out (a page that shifted under concurrent writes)."""
        self._ids = 0

    def _call(self, method: str, name: str) -> None:
        self.calls.append((method, name))
        error = self.fail_next.pop(method, None)
        if error is not None:
            raise error

    def _info(self, name: str) -> SpriteInfo:
        try:
            return self.sprites[name]
        except KeyError:
            raise NotFound(f"sprite {name!r} not found", status=404) from None

    async def create_sprite(
        self, name: str, *, url_auth: UrlAuth = "sprite", labels: Sequence[str] = ()
    ) -> SpriteInfo:
        self._call("create_sprite", name)
        self._ids += 1
        info = SpriteInfo(
            id=f"sprite-{self._ids}",
            name=name,
            url=f"https://{name}.example",
            url_auth=url_auth,
            status="cold",
            labels=tuple(labels),
        )
        self.sprites[name] = info
        return info

    async def get_sprite(self, name: str) -> SpriteInfo:
        self._call("get_sprite", name)
        return self._info(name)

    async def list_sprites(
        self,
        *,
        prefix: str | None = None,
        page_size: int = 50,
        continuation_token: str | None = None,
    ) -> SpritePage:
        self._call("list_sprites", prefix or "")
        listed = [s for n, s in self.sprites.items() if n not in self.hidden_from_list]
        start = int(continuation_token or 0)
        end = start + page_size
        more = end < len(listed)
        return SpritePage(
            sprites=listed[start:end], has_more=more, next_token=str(end) if more else None
        )

    async def update_sprite(
        self,
        name: str,
        *,
        url_auth: UrlAuth | None = None,
        labels: Sequence[str] | None = None,
    ) -> SpriteInfo:
        self._call("update_sprite", name)
        info = self._info(name)
        update: dict[str, Any] = {}
        if url_auth is not None:
            update["url_auth"] = url_auth
        if labels is not None:
            update["labels"] = tuple(labels)
        self.sprites[name] = info.model_copy(update=update)
        return self.sprites[name]

    async def delete_sprite(self, name: str) -> None:
        self._call("delete_sprite", name)
        self._info(name)
        del self.sprites[name]

    async def get_network_policy(self, name: str) -> list[NetworkRule]:
        self._call("get_network_policy", name)
        self._info(name)
        return list(self.policies.get(name, []))

    async def set_network_policy(self, name: str, rules: Sequence[NetworkRule]) -> None:
        self._call("set_network_policy", name)
        self._info(name)
        self.policies[name] = list(rules)

    async def list_services(self, name: str) -> list[ServiceInfo]:
        self._call("list_services", name)
        return [ServiceInfo(spec=s, status="running") for s in self.services.get(name, {}).values()]

    async def put_service(self, name: str, service: SpriteService) -> list[Any]:
        self._call("put_service", name)
        self.services.setdefault(name, {})[service.name] = service
        return []

    async def delete_service(self, name: str, service_name: str) -> None:
        self._call("delete_service", name)
        self.services.get(name, {}).pop(service_name, None)

    async def list_sessions(self, name: str) -> list[Any]:
        """A call forwarded to the sprite: it wakes it, as at the service."""
        self._call("list_sessions", name)
        self.sprites[name] = self._info(name).model_copy(update={"status": "running"})
        return []


def _sprite(name: str = "box", uid: str = UID, **spec: Any) -> Sprite:
    doc = sample("sprite.yaml")
    doc["metadata"] = {"name": name, "namespace": "team-a", "uid": uid, "generation": 1}
    doc["spec"] |= spec
    doc["spec"]["services"] = [{"name": "web", "cmd": "python", "args": ["-m", "http.server"]}]
    return Sprite.model_validate(doc)


def _backend(fake: FakeBackend) -> SpriteBackend:
    return cast(SpriteBackend, fake)


async def _reconcile(sprite: Sprite, fake: FakeBackend) -> tuple[Sprite, Exception | None]:
    """What the kopf handler does: reconcile, write the resulting status (success or not)."""
    try:
        result = await reconcile_sprite(sprite, _backend(fake), NOW)
    except (SpriteReconcileError, SpriteBackendError) as exc:
        status = error_status(sprite, exc, NOW)
        return sprite.model_copy(update={"status": status}), exc
    return sprite.model_copy(update={"status": result.status}), None


def _condition(sprite: Sprite, type_: str) -> tuple[str, str]:
    c = next(c for c in sprite.status.conditions if c.type == type_)
    return c.status, c.reason


async def test_policy_failure_after_create_is_retried_to_ready_and_deleted() -> None:
    fake = FakeBackend()
    fake.fail_next["set_network_policy"] = TransportError("connection reset")
    sprite = _sprite()

    sprite, error = await _reconcile(sprite, fake)
    assert isinstance(error, SpriteBackendError)
    assert "team-a-box" in fake.sprites  # created before the policy call failed
    created = fake.sprites["team-a-box"]
    assert sprite.status.sprite_id == created.id  # the failure status records it as ours
    assert _condition(sprite, "Synced")[0] == "False"

    sprite, error = await _reconcile(sprite, fake)
    assert error is None, error
    assert sprite.status.phase == "Ready"
    assert sprite.status.sprite_id == created.id
    assert _condition(sprite, "Ready") == ("True", "Ready")
    assert fake.policies["team-a-box"] == sprite.spec.network_policy.rules  # type: ignore[union-attr]
    assert set(fake.services["team-a-box"]) == {"web"}
    assert [c for c in fake.calls if c[0] == "create_sprite"] == [("create_sprite", "team-a-box")]

    assert await delete_backend_sprite(sprite, _backend(fake))
    assert ("delete_sprite", "team-a-box") in fake.calls
    assert "team-a-box" not in fake.sprites


async def test_owner_label_recognises_a_sprite_whose_status_was_never_written() -> None:
    # The operator stopped between the create and the status patch: status has no spriteId.
    fake = FakeBackend()
    fake.fail_next["set_network_policy"] = TransportError("connection reset")
    sprite = _sprite()
    _, error = await _reconcile(sprite, fake)
    assert isinstance(error, SpriteBackendError)
    assert owner_label(sprite) in fake.sprites["team-a-box"].labels
    assert sprite.status.sprite_id is None

    converged, error = await _reconcile(sprite, fake)
    assert error is None, error
    assert converged.status.phase == "Ready"
    # The owner label is not drift from spec.labels: a converged sprite costs reads only.
    assert (await reconcile_sprite(converged, _backend(fake), NOW)).writes == 0

    # Deleting the object without spriteId in its status still deletes the backend sprite.
    assert await delete_backend_sprite(sprite, _backend(fake))
    assert "team-a-box" not in fake.sprites


async def test_a_foreign_sprite_is_neither_adopted_nor_deleted() -> None:
    fake = FakeBackend()
    await fake.create_sprite("team-a-box", labels=["someone-else"])
    sprite, error = await _reconcile(_sprite(), fake)
    assert isinstance(error, SpriteReconcileError)
    assert error.reason == "AlreadyExists"
    assert sprite.status.sprite_id is None
    assert not await delete_backend_sprite(sprite, _backend(fake))
    assert "team-a-box" in fake.sprites

    # Another object's owner label is not ours either.
    other = _sprite()
    other.metadata.uid = "11111111-2222-3333-4444-555555555555"
    await fake.update_sprite("team-a-box", labels=[owner_label(other) or ""])
    _, error = await _reconcile(_sprite(), fake)
    assert isinstance(error, SpriteReconcileError)


async def test_orphan_policy_keeps_the_backend_sprite() -> None:
    fake = FakeBackend()
    sprite, error = await _reconcile(_sprite(deletionPolicy="Orphan"), fake)
    assert error is None
    assert not await delete_backend_sprite(sprite, _backend(fake))
    assert "team-a-box" in fake.sprites


@pytest.mark.parametrize("listed", [True, False])
async def test_fleet_confirms_with_get_before_marking_missing(listed: bool) -> None:
    fake = FakeBackend()
    sprite, _ = await _reconcile(_sprite(recreate=False), fake)
    assert sprite.status.phase == "Ready"
    if listed:
        fake.hidden_from_list.add("team-a-box")  # LIST misses it, GET still finds it
    else:
        del fake.sprites["team-a-box"]
    patches: list[dict[str, Any]] = []

    async def patch(_: Sprite, status: dict[str, Any]) -> None:
        patches.append(status)

    observer = FleetObserver(
        backend=_backend(fake),
        sprites=lambda: [sprite],
        patch_status=patch,
        clock=FakeClock(NOW),
        settings=BackendSettings(),
    )
    result = await observer.observe_once()
    if listed:
        assert result.missing == 0
        assert patches == []
    else:
        assert result.missing == 1
        assert patches[0]["phase"] == "Missing"


async def test_a_fleet_pass_costs_one_list_page_per_hundred_sprites_and_nothing_else() -> None:
    fake = FakeBackend()
    sprites = []
    for i in range(250):
        sprite, error = await _reconcile(_sprite(f"box-{i}", uid=f"uid-{i}"), fake)
        assert error is None
        sprites.append(sprite)
    fake.calls.clear()
    patches: list[dict[str, Any]] = []

    async def patch(_: Sprite, status: dict[str, Any]) -> None:
        patches.append(status)

    observer = FleetObserver(
        backend=_backend(fake),
        sprites=lambda: sprites,
        patch_status=patch,
        clock=FakeClock(NOW),
        settings=BackendSettings(page_size=100, resync_per_pass=0),
    )
    result = await observer.observe_once()
    assert (result.list_calls, result.listed) == (3, 250)
    assert [method for method, _ in fake.calls] == ["list_sprites"] * 3
    assert patches == []  # nothing changed, nothing written

    # A status change at the backend is one patch, still without further calls.
    fake.sprites["team-a-box-7"] = fake.sprites["team-a-box-7"].model_copy(
        update={"status": "running"}
    )
    fake.calls.clear()
    result = await observer.observe_once()
    assert [method for method, _ in fake.calls] == ["list_sprites"] * 3
    assert [p["backendStatus"] for p in patches] == ["running"]


async def test_last_seen_time_is_refreshed_by_the_fleet_pass_at_a_bounded_rate() -> None:
    fake = FakeBackend()
    sprites = []
    for i in range(3):
        sprite, _ = await _reconcile(_sprite(f"box-{i}", uid=f"uid-{i}"), fake)
        sprites.append(sprite)
    patches: list[dict[str, Any]] = []

    async def patch(sprite: Sprite, status: dict[str, Any]) -> None:
        patches.append(status)
        sprites[sprites.index(sprite)] = sprite.model_copy(
            update={"status": sprite.status.model_validate(status)}
        )

    clock = FakeClock(NOW)
    observer = FleetObserver(
        backend=_backend(fake),
        sprites=lambda: list(sprites),
        patch_status=patch,
        clock=clock,
        settings=BackendSettings(last_seen_interval=300),
    )
    clock.advance(299)
    await observer.observe_once()
    assert patches == []  # seen at reconcile time, 299 s ago: not yet due
    clock.advance(1)
    result = await observer.observe_once()
    assert result.patched == 3
    assert {p["lastSeenTime"] for p in patches} == {clock.now().isoformat().replace("+00:00", "Z")}
    patches.clear()
    clock.advance(60)
    await observer.observe_once()
    assert patches == []  # refreshed a minute ago


async def test_a_sprite_without_a_policy_is_kept_off_the_forges_by_default() -> None:
    from lattice_operator.api.v1alpha1.sprite import FORGE_DOMAINS, forge_deny_policy
    from lattice_operator.settings import SpriteTimings

    default = SpriteTimings().default_network_policy
    assert default == forge_deny_policy()
    fake = FakeBackend()
    sprite = _sprite(networkPolicy=None)
    await reconcile_sprite(sprite, _backend(fake), NOW, default_policy=default)
    rules = {(r.domain, r.action) for r in fake.policies["team-a-box"]}
    assert ("*", "allow") in rules
    assert {("github.com", "deny"), ("*.github.com", "deny")} <= rules
    assert {d for d, a in rules if a == "deny"} == set(FORGE_DOMAINS)
    # An unchanged default costs no further write.
    assert (await reconcile_sprite(sprite, _backend(fake), NOW, default_policy=default)).writes == 0

    # A Sprite's own policy overrides the default, rules: [] included (unrestricted).
    open_sprite = _sprite("open", uid="uid-open", networkPolicy={"rules": []})
    fake.policies["team-a-open"] = [NetworkRule(domain="x.example", action="deny")]
    await reconcile_sprite(open_sprite, _backend(fake), NOW, default_policy=default)
    assert fake.policies["team-a-open"] == []


async def test_drift_behind_the_operator_is_repaired_by_the_rotating_resync() -> None:
    fake = FakeBackend()
    sprites = []
    for i in range(25):
        sprite, error = await _reconcile(_sprite(f"box-{i:02d}", uid=f"uid-{i}"), fake)
        assert error is None
        sprites.append(sprite)
    # Someone changes one sprite's network policy and drops its services at the backend.
    victim = "team-a-box-17"
    wanted_policy = list(fake.policies[victim])
    fake.policies[victim] = [NetworkRule(domain="*", action="allow")]
    fake.services[victim] = {}
    patches: list[dict[str, Any]] = []

    async def patch(_: Sprite, status: dict[str, Any]) -> None:
        patches.append(status)

    observer = FleetObserver(
        backend=_backend(fake),
        sprites=lambda: sprites,
        patch_status=patch,
        clock=FakeClock(NOW),
        settings=BackendSettings(page_size=100, resync_per_pass=10),
    )
    seen: list[str] = []
    repaired = 0
    for _ in range(3):  # 25 sprites, 10 a pass: every one is re-read within three passes
        fake.calls.clear()
        result = await observer.observe_once()
        assert result.list_calls == 1
        assert result.resynced == 10
        reads = [name for method, name in fake.calls if method == "get_sprite"]
        seen += reads
        assert len(fake.calls) <= 1 + 3 * 10 + 4  # LIST, three reads a sprite, the repair
        repaired += result.repaired
    assert sorted(set(seen)) == sorted(s.backend_name() for s in sprites)
    assert repaired == 1
    assert fake.policies[victim] == wanted_policy
    assert fake.services[victim]  # put back


async def test_fleet_records_a_recreated_sprite_s_new_id_not_the_view_s_old_one() -> None:
    fake = FakeBackend()
    stale, _ = await _reconcile(_sprite(recreate=False), fake)
    old = stale.status.sprite_id
    # Recreated (a health_remediate): same name, a new id; the view still has the old one.
    labels = list(fake.sprites["team-a-box"].labels)
    del fake.sprites["team-a-box"]
    await fake.create_sprite("team-a-box", labels=labels)
    new = fake.sprites["team-a-box"].id
    assert new != old
    patches: list[dict[str, Any]] = []

    async def patch(_: Sprite, status: dict[str, Any]) -> None:
        patches.append(status)

    observer = FleetObserver(
        backend=_backend(fake),
        sprites=lambda: [stale],
        patch_status=patch,
        clock=FakeClock(NOW),
        settings=BackendSettings(resync_per_pass=0),
    )
    await observer.observe_once()
    assert [p["spriteId"] for p in patches] == [new]
    # Someone else's sprite under that name is never recorded as ours.
    foreign = stale.model_copy(deep=True)
    foreign.metadata.uid = "11111111-2222-3333-4444-555555555555"
    patches.clear()
    observer = FleetObserver(
        backend=_backend(fake),
        sprites=lambda: [foreign],
        patch_status=patch,
        clock=FakeClock(NOW),
        settings=BackendSettings(resync_per_pass=0),
    )
    await observer.observe_once()
    assert all(p["spriteId"] == old for p in patches)


def _next_generation(sprite: Sprite, **spec: Any) -> Sprite:
    """The Sprite after `kubectl patch` of its spec: a new generation, the status unchanged."""
    changed = sprite.model_copy(deep=True)
    changed.spec = changed.spec.model_copy(update=spec)
    changed.metadata.generation = (sprite.metadata.generation or 0) + 1
    return changed


def _stale_pass_observer(
    fake: FakeBackend,
    view: Sprite,
    index: dict[tuple[str, str], Sprite],
    patches: list[dict[str, Any]],
    *,
    resync: int = 10,
    writers: SpriteWriters | None = None,
) -> FleetObserver:
    """An observer whose passes begin from `view` while the index holds `index`."""

    async def patch(_: Sprite, status: dict[str, Any]) -> None:
        patches.append(status)

    return FleetObserver(
        backend=_backend(fake),
        sprites=lambda: [view],
        patch_status=patch,
        clock=FakeClock(NOW),
        settings=BackendSettings(resync_per_pass=resync),
        current=index.get,
        writers=writers,
    )


async def test_a_resync_from_a_view_older_than_a_spec_change_does_not_undo_it() -> None:
    """What failed end to end: a fleet pass took its view, the user changed urlAuth, the
    handler set it at the backend, and the pass's resync put the old value back."""
    fake = FakeBackend()
    old, _ = await _reconcile(_sprite(), fake)
    assert fake.sprites["team-a-box"].url_auth == "sprite"
    new, error = await _reconcile(_next_generation(old, url_auth="public"), fake)
    assert error is None
    assert fake.sprites["team-a-box"].url_auth == "public"
    patches: list[dict[str, Any]] = []
    # The pass's view was taken before the change.
    observer = _stale_pass_observer(fake, old, {("team-a", "box"): new}, patches)
    fake.calls.clear()
    result = await observer.observe_once()
    assert result.resynced == 1
    assert fake.sprites["team-a-box"].url_auth == "public"
    assert not [m for m, _ in fake.calls if m.startswith(("update", "set", "put", "delete"))]
    assert patches == []


async def test_a_resync_waits_for_the_handler_writing_the_sprite_and_reads_after_it() -> None:
    fake = FakeBackend()
    old, _ = await _reconcile(_sprite(), fake)
    key = ("team-a", "box")
    index = {key: old}
    writers = SpriteWriters()
    observer = _stale_pass_observer(fake, old, index, [], writers=writers)
    async with writers.hold(key):  # the handler, converging a new generation
        pass_task = asyncio.create_task(observer.observe_once())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not pass_task.done()  # the resync waits for the handler
        changed = _next_generation(old, url_auth="public", labels=["changed"])
        index[key] = changed  # kopf indexes the event before its handler runs
        converged, _ = await _reconcile(changed, fake)
    # The handler returned; its status write has not reached the index yet.
    result = await pass_task
    assert result.deferred == 1
    assert result.resynced == 0
    assert fake.sprites["team-a-box"].url_auth == "public"
    # Once the handler's status is in, the next pass resyncs from that view: nothing to do.
    index[key] = converged
    fake.calls.clear()
    result = await observer.observe_once()
    assert result.resynced == 1
    assert result.repaired == 0
    assert fake.sprites["team-a-box"].url_auth == "public"
    assert len(writers) == 0  # no lock kept once nobody holds it


async def test_a_vanished_sprite_is_recreated_from_the_newest_view_and_not_when_deleted() -> None:
    fake = FakeBackend()
    old, _ = await _reconcile(_sprite(), fake)
    key = ("team-a", "box")
    newer = _next_generation(old, url_auth="public")
    index: dict[tuple[str, str], Sprite] = {key: newer}
    observer = _stale_pass_observer(fake, old, index, [], resync=0)
    del fake.sprites["team-a-box"]
    result = await observer.observe_once()
    assert result.recreated == 1
    assert fake.sprites["team-a-box"].url_auth == "public"
    # Deleted since the pass began: the finalizer's handler owns it, nothing is recreated.
    del fake.sprites["team-a-box"]
    del index[key]
    fake.calls.clear()
    result = await observer.observe_once()
    assert (result.recreated, result.deferred) == (0, 1)
    assert "create_sprite" not in [m for m, _ in fake.calls]


async def test_a_kept_warm_sprite_is_woken_once_per_interval_and_one_left_cold_never() -> None:
    fake = FakeBackend()
    sprites = [
        (await _reconcile(_sprite(name, uid=f"uid-{name}", keepWarm=keep), fake))[0]
        for name, keep in (("hot", True), ("cool", False), ("plain", None))
    ]
    patches: list[dict[str, Any]] = []

    async def patch(sprite: Sprite, status: dict[str, Any]) -> None:
        patches.append(status)
        sprites[sprites.index(sprite)] = sprite.model_copy(
            update={"status": sprite.status.model_validate(status)}
        )

    def warm(name: str) -> tuple[str, str] | None:
        sprite = next(s for s in sprites if s.metadata.name == name)
        found = [c for c in sprite.status.conditions if c.type == "Warm"]
        return (found[0].status, found[0].reason) if found else None

    # Created cold: the kept-warm one is not yet as asked; the other says it is left to cool.
    assert warm("hot") == ("False", "Cold")
    assert warm("cool") == ("True", "NotKeptWarm")
    assert warm("plain") is None  # nothing asked: today's status
    clock = FakeClock(NOW)
    observer = FleetObserver(
        backend=_backend(fake),
        sprites=lambda: list(sprites),
        patch_status=patch,
        clock=clock,
        settings=BackendSettings(keep_warm_interval=100, resync_per_pass=0),
    )

    def wakes() -> list[str]:
        return [n for m, n in fake.calls if m == "list_sessions"]

    result = await observer.observe_once()
    assert (result.woken, wakes()) == (1, [sprites[0].backend_name()])
    clock.advance(10)
    await observer.observe_once()  # sees it running: no wake, the condition is met
    assert warm("hot") == ("True", "KeptWarm")
    assert sprites[0].status.backend_status == "running"
    assert len(wakes()) == 1
    # It idles to warm. Within the interval of when it was last seen running: left alone.
    hot = sprites[0].backend_name()
    fake.sprites[hot] = fake.sprites[hot].model_copy(update={"status": "warm"})
    clock.advance(50)
    result = await observer.observe_once()
    assert (result.woken, len(wakes())) == (0, 1)
    assert warm("hot") == ("True", "KeptWarm")
    clock.advance(60)  # 110 s since it was last seen running
    result = await observer.observe_once()
    assert (result.woken, len(wakes())) == (1, 2)
    # The others are never woken, whatever their state.
    assert set(wakes()) == {hot}
    assert warm("cool") == ("True", "NotKeptWarm")
    assert warm("plain") is None
    # A pass that finds nothing new writes nothing.
    patches.clear()
    clock.advance(1)
    fake.sprites[hot] = fake.sprites[hot].model_copy(update={"status": "running"})
    await observer.observe_once()
    patches.clear()
    clock.advance(1)
    await observer.observe_once()
    assert patches == []


async def test_the_status_carries_when_the_backend_says_the_sprite_last_ran_and_went_warm() -> None:
    fake = FakeBackend()
    sprite, _ = await _reconcile(_sprite(keepWarm=True), fake)
    ran, warmed = datetime(2026, 1, 1, 0, 5, tzinfo=UTC), datetime(2026, 1, 1, 0, 6, tzinfo=UTC)
    name = sprite.backend_name()
    fake.sprites[name] = fake.sprites[name].model_copy(
        update={"status": "warm", "last_running_at": ran, "last_warming_at": warmed}
    )
    patches: list[dict[str, Any]] = []

    async def patch(seen: Sprite, status: dict[str, Any]) -> None:
        patches.append(status)

    observer = FleetObserver(
        backend=_backend(fake),
        sprites=lambda: [sprite],
        patch_status=patch,
        clock=FakeClock(NOW),
        settings=BackendSettings(),
    )
    await observer.observe_once()
    [written] = patches
    assert (written["backendStatus"], written["lastRunningTime"], written["lastWarmingTime"]) == (
        "warm",
        "2026-01-01T00:05:00Z",
        "2026-01-01T00:06:00Z",
    )
    [cond] = [c for c in written["conditions"] if c["type"] == "Warm"]
    assert (cond["status"], cond["reason"], cond["observedGeneration"]) == ("True", "KeptWarm", 1)


async def test_the_resync_wakes_no_sprite_left_to_go_cold() -> None:
    """The resync's reads are forwarded to the sprite (they wake it): a Sprite with
    keepWarm: false is re-read only while the backend reports it running."""
    fake = FakeBackend()
    cool, _ = await _reconcile(_sprite("cool", uid="uid-cool", keepWarm=False), fake)
    plain, _ = await _reconcile(_sprite("plain", uid="uid-plain"), fake)
    observer = FleetObserver(
        backend=_backend(fake),
        sprites=lambda: [cool, plain],
        patch_status=lambda sprite, status: asyncio.sleep(0),
        clock=FakeClock(NOW),
        settings=BackendSettings(resync_per_pass=10),
    )

    def reread() -> set[str]:
        return {n for m, n in fake.calls if m == "get_network_policy"}

    for state in ("cold", "warm"):
        for sprite in (cool, plain):
            name = sprite.backend_name()
            fake.sprites[name] = fake.sprites[name].model_copy(update={"status": state})
        fake.calls.clear()
        await observer.observe_once()
        assert reread() == {plain.backend_name()}
    name = cool.backend_name()
    fake.sprites[name] = fake.sprites[name].model_copy(update={"status": "running"})
    fake.calls.clear()
    await observer.observe_once()
    assert reread() == {cool.backend_name(), plain.backend_name()}


async def test_a_fleet_pass_that_fails_outside_the_backend_does_not_end_the_observer() -> None:
    # An API server gone mid-write (a restart, a proxy): the status patch raises a transport
    # error of the Kubernetes client, not an AdapterError. The next pass must still come.
    fake = FakeBackend()
    sprite, error = await _reconcile(_sprite(), fake)
    assert error is None
    name = next(iter(fake.sprites))
    fake.sprites[name] = fake.sprites[name].model_copy(update={"status": "running"})
    patches: list[dict[str, Any]] = []
    second = asyncio.Event()

    async def patch(_: Sprite, status: dict[str, Any]) -> None:
        if not patches:
            patches.append({})
            raise aiohttp.ServerDisconnectedError()
        patches.append(status)
        second.set()

    observer = FleetObserver(
        backend=_backend(fake),
        sprites=lambda: [sprite],
        patch_status=patch,
        clock=FakeClock(NOW),
        settings=BackendSettings(observe_interval=0.001, resync_per_pass=0),
    )
    task = asyncio.create_task(observer.run_forever())
    try:
        async with asyncio.timeout(10):
            await second.wait()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert patches[1]["backendStatus"] == "running"
