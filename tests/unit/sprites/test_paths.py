"""File-API paths stay inside the sprite: `..`, outside paths and symlink escapes refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lattice_devtools.sprites_local import PathRefused, host_path, sprite_path


@pytest.mark.parametrize(
    ("path", "working_dir", "expected"),
    [
        ("/workspace/a.txt", "/", "/workspace/a.txt"),
        ("a.txt", "/workspace", "/workspace/a.txt"),
        ("sub/./b", "/workspace/x", "/workspace/x/sub/b"),
        ("/workspace", "/", "/workspace"),
        ("//workspace//c", "/", "/workspace/c"),
    ],
)
def test_inside(path: str, working_dir: str, expected: str) -> None:
    assert sprite_path(path, working_dir) == expected


@pytest.mark.parametrize(
    ("path", "working_dir"),
    [
        ("/etc/passwd", "/"),
        ("a.txt", "/"),
        ("/workspace/../etc", "/"),
        ("../x", "/workspace"),
        ("/workspace-other/x", "/"),
        ("/.sprite/api.sock", "/"),
        ("x", "/workspace/.."),
    ],
)
def test_outside_is_refused(path: str, working_dir: str) -> None:
    with pytest.raises(PathRefused) as caught:
        sprite_path(path, working_dir)
    assert caught.value.status == 403
    assert caught.value.code == "EACCES"


@pytest.mark.parametrize(
    ("path", "working_dir"), [("", "/"), ("a\x00b", "/workspace"), ("a", "rel")]
)
def test_invalid_is_a_bad_request(path: str, working_dir: str) -> None:
    with pytest.raises(PathRefused) as caught:
        sprite_path(path, working_dir)
    assert caught.value.status == 400


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (root / "d" / "real.txt").write_text("inside")
    os.symlink("/etc", root / "etc-link")
    os.symlink("../../..", root / "d" / "up")
    os.symlink("/workspace/d/real.txt", root / "abs-alias")
    os.symlink("d/real.txt", root / "rel-alias")
    os.symlink("loop-b", root / "loop-a")
    os.symlink("loop-a", root / "loop-b")
    return root


def test_symlinks_inside_resolve_to_the_host_directory(root: Path) -> None:
    assert host_path(root, "/workspace/abs-alias") == root / "d" / "real.txt"
    assert host_path(root, "/workspace/rel-alias") == root / "d" / "real.txt"
    assert host_path(root, "/workspace/new/file") == root / "new" / "file"
    # Without following, the link itself is addressed (delete, rename).
    assert host_path(root, "/workspace/abs-alias", follow=False) == root / "abs-alias"


@pytest.mark.parametrize("path", ["/workspace/etc-link/passwd", "/workspace/d/up/etc/passwd"])
def test_symlink_escapes_are_refused(root: Path, path: str) -> None:
    with pytest.raises(PathRefused) as caught:
        host_path(root, path)
    assert caught.value.code == "EACCES"


def test_symlink_loops_are_refused(root: Path) -> None:
    with pytest.raises(PathRefused) as caught:
        host_path(root, "/workspace/loop-a")
    assert caught.value.code == "ELOOP"
