"""The local server's snapshot copy: a file gone under it is left out, any other failure fails."""

from __future__ import annotations

from pathlib import Path

import pytest

# The local server's snapshot copy (its private _checkpoints) is the unit under test.
from lattice_devtools.sprites_local._checkpoints import CheckpointError, copy_tree, only_vanished


def test_only_a_source_file_gone_before_cp_read_it_counts_as_vanished() -> None:
    assert only_vanished("cp: cannot stat '/w/tmp3': No such file or directory\n")
    assert only_vanished(
        "cp: cannot stat '/w/a': No such file or directory\n"
        "cp: cannot open '/w/b' for reading: No such file or directory\n"
    )
    assert not only_vanished("")
    assert not only_vanished("cp: cannot create directory '/x/y': No such file or directory")
    assert not only_vanished(
        "cp: cannot stat '/w/a': No such file or directory\n"
        "cp: error writing '/d/b': No space left on device\n"
    )


async def test_a_live_copy_still_fails_when_its_destination_cannot_be_made(
    tmp_path: Path,
) -> None:
    source = tmp_path / "root"
    source.mkdir()
    (source / "f").write_text("x")
    with pytest.raises(CheckpointError, match="cannot create"):
        await copy_tree(source, tmp_path / "missing" / "dest", live=True)
    await copy_tree(source, tmp_path / "dest", live=True)
    assert (tmp_path / "dest" / "f").read_text() == "x"
