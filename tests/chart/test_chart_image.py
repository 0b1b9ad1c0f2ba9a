"""The operator's image in the chart: repository:tag by default, repository@digest once a
digest is pinned, and the release packaging (hack/package-chart.sh) that pins it."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from lattice_devtools.localcluster import find_bin_dir
from tests.support.helm import CHART, RELEASE, ROOT, find, helm, render

DIGEST = "sha256:" + "ab" * 32
REPOSITORY = "registry.example:5000/lattice/lattice-operator"
PACKAGE = ROOT / "hack" / "package-chart.sh"


def _pods(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The operator's Pod spec and the `helm test` Pod's, by kind."""
    deployment = find(docs, "Deployment", f"{RELEASE}-lattice-operator")["spec"]["template"]
    test = find(docs, "Pod", f"{RELEASE}-lattice-operator-test-health")
    return {"Deployment": deployment["spec"], "Pod": test["spec"]}


def test_the_image_is_repository_and_tag_without_a_digest() -> None:
    for kind, spec in _pods(render()).items():
        assert spec["containers"][0]["image"] == "lattice-operator:0.2.0", kind
        assert "imagePullSecrets" not in spec, kind


def test_a_digest_pins_the_image_and_both_pods_get_the_pull_secret() -> None:
    docs = render(
        "--set", f"image.repository={REPOSITORY}",
        "--set", "image.tag=0.2.0",
        "--set", f"image.digest={DIGEST}",
        "--set", "imagePullSecrets[0].name=regcred",
    )  # fmt: skip
    for kind, spec in _pods(docs).items():
        assert spec["containers"][0]["image"] == f"{REPOSITORY}@{DIGEST}", kind
        assert spec["imagePullSecrets"] == [{"name": "regcred"}], kind


@pytest.mark.parametrize(
    "digest", ["sha256:abc", "latest", "sha512:" + "ab" * 64, "SHA256:" + "ab" * 32]
)
def test_a_digest_that_is_not_sha256_is_refused_naming_the_value(digest: str) -> None:
    out = helm("template", RELEASE, str(CHART), "--set", f"image.digest={digest}")
    assert out.returncode != 0
    assert "/image/digest" in out.stderr, out.stderr


def _package(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HELM": str(find_bin_dir(ROOT) / "helm")}
    return subprocess.run(
        ["bash", str(PACKAGE), *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_the_packaged_chart_defaults_to_the_released_digest(tmp_path: Path) -> None:
    """What a release publishes: `helm install` of the package with no --set runs the pushed
    image by digest; the clone's chart keeps an empty digest."""
    out = _package(REPOSITORY, DIGEST, str(tmp_path))
    assert out.returncode == 0, out.stderr
    package = Path(out.stdout.strip().splitlines()[-1])
    assert package == tmp_path / "lattice-operator-0.2.0.tgz"
    with tarfile.open(package) as tar:
        handle = tar.extractfile("lattice-operator/values.yaml")
        assert handle is not None
        values = yaml.safe_load(handle.read())
    assert values["image"] == {
        "repository": REPOSITORY,
        "tag": "0.2.0",
        "digest": DIGEST,
        "pullPolicy": "IfNotPresent",
    }
    rendered = helm("template", RELEASE, str(package), "--namespace", "lattice-system")
    assert rendered.returncode == 0, rendered.stderr
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    for kind, spec in _pods(docs).items():
        assert spec["containers"][0]["image"] == f"{REPOSITORY}@{DIGEST}", kind
    source = yaml.safe_load((CHART / "values.yaml").read_text())
    assert source["image"]["digest"] == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((REPOSITORY, "sha256:abc"), "DIGEST 'sha256:abc' is not sha256:<64 hex digits>"),
        ((f"{REPOSITORY}:0.2.0@{DIGEST}", DIGEST), "is not an image repository"),
        ((f"{REPOSITORY}:0.2.0", DIGEST), "is not an image repository"),
        ((REPOSITORY,), "usage: hack/package-chart.sh REPOSITORY DIGEST"),
    ],
)
def test_packaging_refuses_a_bad_repository_or_digest(
    args: tuple[str, ...], message: str, tmp_path: Path
) -> None:
    out = _package(*args, *([str(tmp_path)] if len(args) == 2 else []))
    assert out.returncode == 2
    assert message in out.stderr, out.stderr
    assert not list(tmp_path.iterdir())
