"""`lattice watch` piped: one line per stream event, saying what changed."""

from __future__ import annotations

# `lattice watch`'s line formatter on its own: the command needs a stream server to drive.
from lattice_operator.cli._watch import _line


def test_a_github_updated_event_says_what_was_done_on_github() -> None:
    item = {
        "event": "github.updated",
        "data": {
            "ts": "2026-01-01T00:00:00Z",
            "payload": {
                "namespace": "team",
                "name": "docs-octo-app-abc",
                "repo": "octo/app",
                "pullRequest": {"number": 7, "url": "https://github.com/octo/app/pull/7"},
                "issues": [3],
                "finished": True,
                "problem": None,
            },
        },
    }
    assert _line(item) == (
        "2026-01-01T00:00:00Z github.updated team/docs-octo-app-abc octo/app"
        " | PR #7 https://github.com/octo/app/pull/7 | issues #3 | finished"
    )
    waiting = {**item, "data": {"ts": "t", "payload": {"repo": "octo/app", "problem": "x"}}}
    assert _line(waiting).endswith("octo/app | problem: x")
