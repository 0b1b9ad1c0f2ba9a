"""The previous release, built from git as it shipped: its tree at the commit
hack/previous-release.env names, its image built by that tree's own hack/build-image.sh
(cached under its own key like ours), its chart as it was."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.node_image import OciArchive
from tests.support.node_image import build_image as build_archive

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class PreviousRelease:
    version: str
    commit: str
    tree: Path

    @property
    def chart_dir(self) -> Path:
        return self.tree / "charts" / "lattice-operator"


def pinned() -> tuple[str, str]:
    """(version, commit) from hack/previous-release.env."""
    values = dict(
        line.split("=", 1)
        for line in (ROOT / "hack" / "previous-release.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    return values["PREVIOUS_VERSION"], values["PREVIOUS_COMMIT"]


def checkout(destination: Path) -> PreviousRelease:
    """The previous release's files (`git archive`: no work tree of the clone is touched)."""
    version, commit = pinned()
    known = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"], check=False
    )
    assert known.returncode == 0, (
        f"commit {commit} (hack/previous-release.env) is not in this clone; "
        "a shallow clone needs `git fetch --unshallow`"
    )
    destination.mkdir(parents=True, exist_ok=True)
    archive = destination.with_name(destination.name + ".tar")
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), commit], check=True)
    subprocess.run(["tar", "-xf", str(archive), "-C", str(destination)], check=True)
    archive.unlink()
    return PreviousRelease(version, commit, destination)


def build_image(release: PreviousRelease) -> OciArchive:
    """The previous release's image, by its own build script (a no-op when cached)."""
    return build_archive(("bash", str(release.tree / "hack" / "build-image.sh")), release.tree)
