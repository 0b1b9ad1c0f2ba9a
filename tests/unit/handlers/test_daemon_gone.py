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
from tests.support.intent_world import intent, policy


def _not_found(path: str) -> KubeApiError:
    return NotFound(404, "NotFound", f"{path} not found", None)


class GoneKube:
    """Every write is refused with 404; a GET finds the object only if `stored` says so."""

    def __init__(self, stored: dict[str, Any] | None) -> None:
        self.stored = stored
        self.gets: list[str] = []

    async def json_patch(self, path: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        raise _not_found(path)

    async def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        raise _not_found(path)

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        raise _not_found(path)

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        self.gets.append(path)
        if self.stored is None:
            raise _not_found(path)
        return self.stored


class Flag:
    def __bool__(self) -> bool:
        return False


async def _daemon(kube: GoneKube) -> None:
    it = intent()
    memo = kopf.Memo()
    memo.lattice = OperatorContext(kube=kube)  # type: ignore[arg-type]
    body = kopf.Body(it.model_dump(mode="json", by_alias=True, exclude_none=True))  # type: ignore[arg-type]
    await intent_daemon(
        body=body,
        memo=memo,
        stopped=Flag(),  # type: ignore[arg-type]
        compiled_policies={"ns": [("p", policy("allow"))]},
        runs_by_name={},
        sprite_directory={},
    )


async def test_an_intent_deleted_under_its_daemon_ends_it() -> None:
    kube = GoneKube(stored=None)
    await _daemon(kube)  # returns: no exception for kopf to retry
    assert kube.gets == ["/apis/lattice.dev/v1alpha1/namespaces/ns/intents/i"]


async def test_a_recreated_intent_of_the_same_name_is_not_taken_for_gone() -> None:
    # A 404 while another object of that name exists now: also gone (another uid).
    kube = GoneKube(stored={"metadata": {"name": "i", "uid": "another"}})
    await _daemon(kube)
    assert len(kube.gets) == 1


async def test_a_404_of_something_else_is_still_an_error() -> None:
    kube = GoneKube(stored={"metadata": {"name": "i", "uid": "u"}})  # the Intent is there
    with pytest.raises(KubeApiError, match="404"):
        await _daemon(kube)


def test_a_404_is_found_behind_the_errors_that_wrap_it() -> None:
    wrapped = kopf.TemporaryError("cannot create Run")
    wrapped.__cause__ = _not_found("/x")
    assert not_found_in(wrapped)
    assert not not_found_in(Conflict(409, "Conflict", "", None))
    assert not not_found_in(RuntimeError("x"))
