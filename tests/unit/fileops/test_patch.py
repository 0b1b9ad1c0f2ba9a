"""The apply_patch format: adds, deletes, updates with context, moves; patches that do not
apply are refused whole."""

from __future__ import annotations

import pytest

from lattice_operator.fileops.errors import PatchRefused
from lattice_operator.fileops.patch import apply_update, parse

ORIGINAL = "def greet():\n    return 'hi'\n\n\ndef part():\n    return 'bye'\n"


def test_an_update_with_context_applies() -> None:
    (change,) = parse(
        "*** Begin Patch\n*** Update File: app.py\n@@ def part():\n-    return 'bye'\n"
        "+    return 'goodbye'\n*** End Patch\n"
    )
    assert change.kind == "update"
    out = apply_update("app.py", ORIGINAL, change.hunks)
    assert out == ORIGINAL.replace("'bye'", "'goodbye'")


def test_hunks_apply_in_order_and_trailing_spaces_do_not_matter() -> None:
    text = "a\nb  \nc\nb\nd\n"
    (change,) = parse(
        "*** Begin Patch\n*** Update File: f\n@@\n b\n-c\n+C\n@@\n-b\n+B\n*** End Patch"
    )
    assert apply_update("f", text, change.hunks) == "a\nb  \nC\nB\nd\n"


def test_add_delete_and_move() -> None:
    changes = parse(
        "*** Begin Patch\n*** Add File: new.txt\n+one\n+two\n*** Delete File: old.txt\n"
        "*** Update File: a.txt\n*** Move to: b.txt\n@@\n-x\n+y\n*** End Patch"
    )
    assert [(c.kind, c.path, c.move_to) for c in changes] == [
        ("add", "new.txt", None),
        ("delete", "old.txt", None),
        ("update", "a.txt", "b.txt"),
    ]
    assert changes[0].content == ["one", "two"]
    assert apply_update("a.txt", "x\n", changes[2].hunks) == "y\n"


def test_an_addition_at_the_end_of_file() -> None:
    (change,) = parse(
        "*** Begin Patch\n*** Update File: f\n@@\n+last\n*** End of File\n*** End Patch"
    )
    assert apply_update("f", "first\n", change.hunks) == "first\nlast\n"


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ("*** Update File: f\n@@\n-a\n+b\n*** End Patch", "does not start"),
        ("*** Begin Patch\n*** Update File: f\n@@\n-a\n+b\n", "does not end"),
        ("*** Begin Patch\n*** Add File: f\nno plus\n*** End Patch", "start with '\\+'"),
        ("*** Begin Patch\n*** Update File: f\n*** End Patch", "has no hunk"),
        ("*** Begin Patch\n*** Frobnicate: f\n*** End Patch", "unexpected"),
        ("*** Begin Patch\n*** End Patch", "changes no file"),
    ],
)
def test_malformed_patches_are_refused(patch: str, message: str) -> None:
    with pytest.raises(PatchRefused, match=message):
        parse(patch)


def test_a_hunk_that_does_not_match_is_refused() -> None:
    (change,) = parse("*** Begin Patch\n*** Update File: f\n@@\n-absent\n+x\n*** End Patch")
    with pytest.raises(PatchRefused, match="hunk 1 does not apply"):
        apply_update("f", "present\n", change.hunks)
    (change,) = parse(
        "*** Begin Patch\n*** Update File: f\n@@ def nowhere():\n-a\n+b\n*** End Patch"
    )
    with pytest.raises(PatchRefused, match="not found"):
        apply_update("f", "a\n", change.hunks)
