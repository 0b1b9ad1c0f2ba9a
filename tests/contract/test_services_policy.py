"""Services and network policy through both clients."""

from __future__ import annotations

import pytest
import sprites

from lattice_adapters.sprites import SpritesAdapter
from lattice_operator.api.v1alpha1 import NetworkRule, SpriteService
from tests.support.contract_target import Target

pytestmark = pytest.mark.contract


@pytest.fixture
def sprite(adapter_sprite: str) -> str:
    """One sprite per test, through our adapter (these tests pick their client themselves)."""
    return adapter_sprite


async def test_service_lifecycle_with_the_adapter(adapter: SpritesAdapter, sprite: str) -> None:
    service = SpriteService(name="ticker", cmd="sh", args=["-c", "while true; do sleep 1; done"])
    events = await adapter.put_service(sprite, service)
    assert events[0].type == "started"
    assert events[-1].type == "complete"
    [info] = await adapter.list_services(sprite)
    assert info.spec.name == "ticker"
    assert info.spec.args == ["-c", "while true; do sleep 1; done"]
    assert info.status == "running"
    assert info.pid

    stopped = await adapter.stop_service(sprite, "ticker")
    assert "stopped" in [e.type for e in stopped]
    [info] = await adapter.list_services(sprite)
    assert info.status == "stopped"

    await adapter.start_service(sprite, "ticker")
    [info] = await adapter.list_services(sprite)
    assert info.status == "running"
    await adapter.delete_service(sprite, "ticker")
    assert await adapter.list_services(sprite) == []


async def test_service_through_the_sdk(target: Target, sprite: str) -> None:
    async with sprites.AsyncSpritesClient(
        target.credentials.token.get_secret_value(), base_url=target.credentials.api_url
    ) as client:
        handle = client.sprite(sprite)
        stream = await handle.create_service("web", "sleep", ["600"], env={"A": "1"})
        assert next(iter(stream)).type == "started"
        [listed] = await handle.list_services()
        assert listed.name == "web"
        assert listed.state is not None
        assert listed.state.status == "running"
        await handle.delete_service("web")


async def test_network_policy_round_trip(adapter: SpritesAdapter, sprite: str) -> None:
    assert await adapter.get_network_policy(sprite) == []
    rules = [
        NetworkRule(domain="*.github.com", action="allow"),
        NetworkRule(include="defaults"),
        NetworkRule(domain="*", action="deny"),
    ]
    await adapter.set_network_policy(sprite, rules)
    assert await adapter.get_network_policy(sprite) == rules


async def test_network_policy_through_the_sdk(target: Target, sprite: str) -> None:
    async with sprites.AsyncSpritesClient(
        target.credentials.token.get_secret_value(), base_url=target.credentials.api_url
    ) as client:
        handle = client.sprite(sprite)
        await handle.update_network_policy(
            sprites.NetworkPolicy(rules=[sprites.PolicyRule(domain="pypi.org", action="allow")])
        )
        policy = await handle.get_network_policy()
        assert [(r.domain, r.action) for r in policy.rules] == [("pypi.org", "allow")]
