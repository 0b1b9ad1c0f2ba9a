"""A daemon whose own object was deleted under it ends quietly; any other 404 is an error.

Deleting a namespace with thousands of open Intents and Runs made every daemon's next write
fail with 404 and kopf retry each a minute later, for objects no longer there.
"""

from __future__ import annotations

from typing import Any

import kopf
import pytest

from lattice_adapters.kube import Conflict, KubeApiError, NotFound

# not_found_in (handlers/_writes) decides a daemon's quiet end; OperatorContext is its ctx.
from lattice_operator.handlers._context import OperatorContext
from lattice_operator.handlers._writes import not_found_in
from lattice_operator.handlers.intent import intent_daemon
from tests.support.cluster_writer import FakeClusterWriter
from tests.support.intent_world import intent, policy


def _not_found(what: str) -> KubeApiError:
    return NotFound(404, "NotFound", f"{what} not found", None)


def _gone(stored: dict[str, Any] | None) -> FakeClusterWriter:
    """The Intent's write is refused with 404; a read finds `stored` (None: nothing)."""
    writer = FakeClusterWriter()
    writer.fail("patch_status", _not_found("intents/i"))
    writer.fail("replace_status_if", _not_found("intents/i"))
    if stored is not None:
        writer.put("intents", stored)
    return writer


class Flag:
    def __bool__(self) -> bool:
        return False


async def _daemon(writer: FakeClusterWriter) -> None:
    it = intent()
    memo = kopf.Memo()
    memo.lattice = OperatorContext(writer=writer)
    body = kopf.Body(it.model_dump(mode="json", by_alias=True, exclude_none=True))  # type: ignore[arg-type]
    await intent_daemon(
        body=body,
        memo=memo,
        stopped=Flag(),  # type: ignore[arg-type]
        compiled_policies={"ns": [("p", policy("allow"))]},
        runs_by_name={},
        sprite_directory={},
    )


def _reads(writer: FakeClusterWriter) -> list[tuple[str, str]]:
    return [(c.plural, c.name) for c in writer.calls if c.verb == "read"]


async def test_an_intent_deleted_under_its_daemon_ends_it() -> None:
    writer = _gone(stored=None)
    await _daemon(writer)  # returns: no exception for kopf to retry
    assert _reads(writer) == [("intents", "i")]


async def test_a_recreated_intent_of_the_same_name_is_not_taken_for_gone() -> None:
    # A 404 while another object of that name exists now: also gone (another uid).
    writer = _gone(stored={"metadata": {"name": "i", "namespace": "ns", "uid": "another"}})
    await _daemon(writer)
    assert _reads(writer) == [("intents", "i")]


async def test_a_404_of_something_else_is_still_an_error() -> None:
    stored = {"metadata": {"name": "i", "namespace": "ns", "uid": "u"}}  # the Intent is there
    with pytest.raises(KubeApiError, match="404"):
        await _daemon(_gone(stored=stored))


def test_a_404_is_found_behind_the_errors_that_wrap_it() -> None:
    wrapped = kopf.TemporaryError("cannot create Run")
    wrapped.__cause__ = _not_found("/x")
    assert not_found_in(wrapped)
    assert not not_found_in(Conflict(409, "Conflict", "", None))
    assert not not_found_in(RuntimeError("x"))
