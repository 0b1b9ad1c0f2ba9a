"""The image `make image` builds: labels, user, entrypoint, and that it runs non-root on a
read-only root filesystem (unpacked with umoci, run with runc, as the node would)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.node_image import OciArchive

# With the node tests: they need this image anyway, and build it once for both.
pytestmark = pytest.mark.node

REQUIRED_LABELS = (
    "org.opencontainers.image.source",
    "org.opencontainers.image.version",
    "org.opencontainers.image.licenses",
)


def test_archive_names_the_image_for_containerd(image: OciArchive) -> None:
    (entry,) = image.index()["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == "lattice-operator:0.2.0"


def test_config_is_non_root_with_the_lattice_entrypoint(image: OciArchive) -> None:
    config = image.config()["config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["/opt/lattice/bin/lattice", "run"]
    assert "HOME=/tmp" in config["Env"]
    for label in REQUIRED_LABELS:
        assert config["Labels"].get(label), f"label {label} missing"
    assert config["Labels"]["org.opencontainers.image.licenses"] == "Apache-2.0"


def test_image_runs_as_non_root_with_a_read_only_root(image: OciArchive, tmp_path: Path) -> None:
    layout = tmp_path / "layout"
    layout.mkdir()
    subprocess.run(["tar", "-xf", str(image.path), "-C", str(layout)], check=True)
    bundle = tmp_path / "bundle"
    subprocess.run(
        ["umoci", "unpack", "--image", f"{layout}:0.2.0", str(bundle)],
        check=True,
        capture_output=True,
    )
    spec_path = bundle / "config.json"
    spec = json.loads(spec_path.read_text())
    assert spec["process"]["user"]["uid"] == 65532
    spec["root"]["readonly"] = True
    spec["process"]["terminal"] = False
    # The entrypoint with `--help`, then checks that nothing can be written outside /tmp and
    # that pip is gone.
    spec["process"]["args"] = [
        "/bin/sh",
        "-c",
        "/opt/lattice/bin/lattice run --help >/dev/null && id -u && "
        "if touch /opt/lattice/x 2>/dev/null; then echo writable; fi; "
        # pip was removed in the top layer: nothing can install into the venv at run time.
        "if [ -e /opt/lattice/bin/pip ] || /opt/lattice/bin/python -m pip --version 2>/dev/null;"
        " then echo pip; fi",
    ]
    spec_path.write_text(json.dumps(spec))
    name = f"lattice-image-test-{tmp_path.name}"
    try:
        out = subprocess.run(
            ["runc", "run", "--bundle", str(bundle), name],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        subprocess.run(["runc", "delete", "--force", name], capture_output=True)
        shutil.rmtree(bundle, ignore_errors=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["65532"]
