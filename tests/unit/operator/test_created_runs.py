"""An Intent daemon's created Runs stand in for the Run index until it shows them."""

from __future__ import annotations

from typing import Any

from lattice_adapters.kube import AlreadyExists, NotFound
from lattice_operator.api.v1alpha1 import Run
from lattice_operator.handlers._writes import create_or_read
from lattice_operator.reconcilers.intent_created_runs import CreatedRuns


def _run(name: str, uid: str) -> Run:
    return Run.model_validate(
        {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "Run",
            "metadata": {"name": name, "namespace": "ns", "uid": uid},
            "spec": {"spriteRef": {"name": "s"}, "command": ["true"]},
        }
    )


def test_the_index_wins_once_it_shows_the_run_and_the_notes_go() -> None:
    created = CreatedRuns(patience=60.0)
    created.note(_run("r", "created"), now=0.0)
    assert created.view("r", None, now=1.0) == _run("r", "created")
    assert created.view("other", None, now=1.0) is None  # only under its own name
    indexed = _run("r", "indexed")
    assert created.view("r", indexed, now=2.0) is indexed
    assert len(created) == 0
    # Deleted later: the index no longer shows it, and no note brings it back.
    assert created.view("r", None, now=3.0) is None


def test_a_note_lapses_after_its_patience() -> None:
    created = CreatedRuns(patience=60.0)
    created.note(_run("r", "created"), now=0.0)
    assert created.view("r", None, now=59.9) is not None
    assert created.view("r", None, now=60.0) is None
    assert len(created) == 0


class Kube:
    def __init__(self, stored: dict[str, Any] | None) -> None:
        self.stored = stored
        self.calls: list[str] = []

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(f"POST {path}")
        raise AlreadyExists(409, "AlreadyExists", "already exists", {})

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        self.calls.append(f"GET {path}")
        if self.stored is None:
            raise NotFound(404, "NotFound", "not found", {})
        return self.stored


async def test_a_create_refused_as_already_there_reads_the_object() -> None:
    kube = Kube({"metadata": {"name": "r", "uid": "theirs"}})
    stored, created = await create_or_read(kube, "/c", {"metadata": {"name": "r"}})  # type: ignore[arg-type]
    assert (stored, created) == ({"metadata": {"name": "r", "uid": "theirs"}}, False)
    assert kube.calls == ["POST /c", "GET /c/r"]


async def test_one_deleted_before_the_read_is_none() -> None:
    kube = Kube(None)
    assert await create_or_read(kube, "/c", {"metadata": {"name": "r"}}) == (None, False)  # type: ignore[arg-type]
