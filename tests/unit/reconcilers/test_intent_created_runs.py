"""An Intent daemon's created Runs stand in for the Run index until it shows them."""

from __future__ import annotations

from lattice_operator.api.v1alpha1 import Run
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
