"""IntentPolicies in the Intent handlers: the index holds each with its version (an invalid
one as invalid), and an Intent applied with its policy, before the index has the policy, is
decided by it (soak round 1: the Intent waited for an approval for good)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import kopf
import pytest

# The context the handlers run an Intent's work in (handlers-private), built as they build it.
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.handlers.intent import compiled_policies, reads_of, work_on_intent
from lattice_operator.reconcilers import intent_loop
from lattice_operator.reconcilers.intent_policies import IndexedPolicy
from lattice_operator.reconcilers.intent_workers import LiveBody, StopFlag, Work
from tests.support.clock import FakeClock
from tests.support.cluster_writer import FakeClusterWriter
from tests.support.intent_world import intent, policy_object


async def _indexed(raw: dict[str, Any]) -> IndexedPolicy:
    index: Any = compiled_policies  # kopf types the decorated function as its IndexingFn
    entries: dict[str, IndexedPolicy] = await index(body=kopf.Body(cast(kopf.RawBody, raw)))
    return entries["ns"]


async def test_the_index_holds_a_policy_with_its_version_and_an_invalid_one_as_invalid() -> None:
    entry = await _indexed(policy_object("allow", version="3"))
    assert (entry.name, entry.version) == ("p", "3")
    assert entry.compiled is not None
    assert entry.compiled.spec.rules[0].outcome == "allow"
    invalid = policy_object("deny", name="bad", version="4", match="intent.nope(")
    entry = await _indexed(invalid)
    assert (entry.name, entry.version, entry.compiled) == ("bad", "4", None)


class UntilWritten(StopFlag):
    """The task's stop flag: set once the Intent's status was written."""

    def __init__(self, writer: FakeClusterWriter) -> None:
        super().__init__()
        self.writer = writer

    def __bool__(self) -> bool:
        return "replace_status_if" in self.writer.verbs()


async def test_an_intent_applied_with_its_policy_is_decided_by_it_before_the_index_has_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The policy allows everything; the Intent's event comes first, the index is empty:
    allowed by the policy, not left awaiting an approval by the default decision."""
    monkeypatch.setattr(intent_loop, "SAFETY_POLL", 0.001)
    raw = intent().model_dump(mode="json", by_alias=True, exclude_none=True)
    writer = FakeClusterWriter()
    writer.put("intents", raw)
    writer.put("intentpolicies", policy_object("allow"))
    ctx = OperatorContext(writer=writer, clock=FakeClock())
    indexes: dict[str, Any] = {
        "compiled_policies": {},  # the index has not caught up with the policy
        "runs_by_name": {},
        "sprite_directory": {},
    }
    work = Work(("ns", "i"), "u", LiveBody(raw), UntilWritten(writer), asyncio.Event())
    await asyncio.wait_for(work_on_intent(ctx, reads_of(ctx, indexes), work), timeout=30)
    status = writer.objects[("intents", "ns", "i")]["status"]
    assert status["classification"]["policy"] == "p"
    assert status["classification"]["outcome"] == "allow"
    assert status["phase"] == "Executing"
