"""The IntentPolicies a classification reads: as the API server lists them, the index's
compiled policy reused where it holds the listed version, any other version compiled once
(shared by the Intents waiting for it), an invalid one skipped and never waited for."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from lattice_operator.api.v1alpha1.intentpolicy import IntentPolicySpec
from lattice_operator.policy import CompiledPolicy, compile_policy_off_loop
from lattice_operator.reconcilers import intent_policies
from lattice_operator.reconcilers.intent_policies import IndexedPolicy
from tests.support.cluster_writer import FakeClusterWriter
from tests.support.intent_world import policies_in, policy, policy_object


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The policies compiled from a listing (by name), each in a worker thread as before."""
    made: list[str] = []
    original = compile_policy_off_loop

    async def counted(name: str, spec: IntentPolicySpec) -> CompiledPolicy:
        made.append(name)
        return await original(name, spec)

    monkeypatch.setattr(intent_policies, "compile_policy_off_loop", counted)
    return made


def _outcomes(policies: list[CompiledPolicy]) -> list[tuple[str, str]]:
    return [(p.name, p.spec.rules[0].outcome) for p in policies]


async def test_the_index_holding_the_listed_version_is_used_as_it_is(compiles: list[str]) -> None:
    writer = FakeClusterWriter()
    writer.put("intentpolicies", policy_object("allow", version="4"))
    indexed = policy("allow")
    source = policies_in(writer, [IndexedPolicy("p", "4", indexed)])
    assert [p is indexed for p in await source.listed("ns")] == [True]
    assert compiles == []
    assert writer.verbs() == ["list"]


async def test_a_version_the_index_does_not_hold_yet_is_compiled_from_the_listing(
    compiles: list[str],
) -> None:
    """The policy edited from allow to deny, the index still on the old version: the
    listed (newer) one decides; one the index does not have at all too, in name order."""
    writer = FakeClusterWriter()
    writer.put("intentpolicies", policy_object("deny", name="p", version="5"))
    writer.put("intentpolicies", policy_object("allow", name="a", version="6"))
    source = policies_in(writer, [IndexedPolicy("p", "4", policy("allow"))])
    assert _outcomes(await source.listed("ns")) == [("a", "allow"), ("p", "deny")]
    assert sorted(compiles) == ["a", "p"]


async def test_many_intents_classified_at_once_compile_a_new_policy_once(
    compiles: list[str],
) -> None:
    writer = FakeClusterWriter()
    writer.put("intentpolicies", policy_object("allow", version="8"))
    source = policies_in(writer, [])
    answers = await asyncio.gather(*(source.listed("ns") for _ in range(20)))
    assert compiles == ["p"]
    assert all(_outcomes(a) == [("p", "allow")] for a in answers)
    assert writer.verbs() == ["list"] * 20  # one read per classification


async def test_an_invalid_policy_is_skipped_and_compiled_once(compiles: list[str]) -> None:
    writer = FakeClusterWriter()
    writer.put("intentpolicies", policy_object("deny", name="bad", match="intent.nope("))
    source = policies_in(writer, [])
    assert await source.listed("ns") == []
    assert await source.listed("ns") == []
    assert compiles == ["bad"]
    # Once the index has it, held as invalid at that version: not compiled again.
    indexed = policies_in(writer, [IndexedPolicy("bad", "1", None)])
    assert await indexed.listed("ns") == []
    assert compiles == ["bad"]


async def test_a_compile_that_failed_is_not_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = compile_policy_off_loop

    async def flaky(name: str, spec: IntentPolicySpec) -> Any:
        calls.append(name)
        if len(calls) == 1:
            raise RuntimeError("no worker thread")
        return await original(name, spec)

    monkeypatch.setattr(intent_policies, "compile_policy_off_loop", flaky)
    writer = FakeClusterWriter()
    writer.put("intentpolicies", policy_object("allow"))
    source = policies_in(writer, [])
    with pytest.raises(RuntimeError):
        await source.listed("ns")  # the pass fails, to be tried again
    assert _outcomes(await source.listed("ns")) == [("p", "allow")]
    assert calls == ["p", "p"]


async def test_a_listing_that_fails_fails_the_classification() -> None:
    """No decision on a partial view: the pass fails and is tried again."""
    writer = FakeClusterWriter()
    writer.fail("list", ConnectionError("API server away"))
    with pytest.raises(ConnectionError):
        await policies_in(writer, [IndexedPolicy("p", "1", policy("allow"))]).listed("ns")
