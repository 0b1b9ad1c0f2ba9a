"""The operator image as `make image` builds it: where the archive is, and what is inside."""

from __future__ import annotations

import json
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class OciArchive:
    """An OCI image layout in a tar file (one image)."""

    path: Path

    def member(self, name: str) -> bytes:
        with tarfile.open(self.path) as tar:
            handle = tar.extractfile(f"./{name}")
            assert handle is not None, f"{name} is not a file in {self.path}"
            return handle.read()

    def blob(self, digest: str) -> Any:
        algorithm, value = digest.split(":", 1)
        return json.loads(self.member(f"blobs/{algorithm}/{value}"))

    def index(self) -> Any:
        return json.loads(self.member("index.json"))

    def manifest(self) -> Any:
        (entry,) = self.index()["manifests"]
        return self.blob(entry["digest"])

    def config(self) -> Any:
        return self.blob(self.manifest()["config"]["digest"])


def build_image(
    command: tuple[str, ...] = ("make", "--no-print-directory", "image"), cwd: Path = ROOT
) -> OciArchive:
    """Run `make image` (cached: a no-op when nothing changed), or another build that prints
    its archive's path on its last line, and return that archive."""
    out = subprocess.run(list(command), cwd=cwd, capture_output=True, text=True)
    assert out.returncode == 0, f"{' '.join(command)} failed:\n{out.stderr[-4000:]}"
    path = Path(out.stdout.strip().splitlines()[-1])
    assert path.is_file(), f"{' '.join(command)} printed {path}, which is not a file"
    return OciArchive(path)
