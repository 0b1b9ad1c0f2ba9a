"""`helm template | kubeconform -strict` for the default values and each case of the matrix,
offline: the Kubernetes schemas are made from the pinned kube-apiserver's own OpenAPI
document (`/openapi/v2` of the test cluster), ours from crds/ (tests/support/kubeschemas.py).
kubeconform is built pinned by hack/build-tools.sh. cert-manager's Certificate and Issuer
are skipped by name (no cert-manager CRDs here) and counted, never silently."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from lattice_devtools.localcluster import find_bin_dir
from tests.support.cluster import Cluster
from tests.support.helm import MATRIX, ROOT, template_text
from tests.support.kubeschemas import TEMPLATE, write_crd_schemas, write_kubernetes_schemas

pytestmark = pytest.mark.e2e

CERT_MANAGER_KINDS = ("Certificate", "Issuer")


@pytest.fixture(scope="module")
def schemas(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    openapi = json.loads(cluster.kubectl("get", "--raw", "/openapi/v2").stdout)
    out = tmp_path_factory.mktemp("kubeconform-schemas")
    assert len(write_kubernetes_schemas(openapi, out)) > 100
    crds = [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "crds").glob("*.yaml"))]
    assert len(write_crd_schemas(crds, openapi, out)) == len(crds)
    return out


def kubeconform(schemas: Path, text: str, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [
            str(find_bin_dir(ROOT) / "kubeconform"),
            "-strict",
            "-summary",
            "-output", "json",
            "-schema-location", str(schemas / TEMPLATE),
            *args,
            "-",
        ],
        input=text,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert out.stdout, out.stderr
    report: dict[str, Any] = json.loads(out.stdout)
    report["returncode"] = out.returncode
    return report


@pytest.mark.parametrize("case", sorted(MATRIX))
def test_every_rendered_object_is_valid(case: str, schemas: Path) -> None:
    text = template_text("--include-crds", *MATRIX[case])
    docs = [d for d in yaml.safe_load_all(text) if d]
    skipped = [d for d in docs if d["kind"] in CERT_MANAGER_KINDS]
    report = kubeconform(schemas, text, "-skip", ",".join(CERT_MANAGER_KINDS))
    assert report["returncode"] == 0, report["resources"]
    assert report["summary"] == {
        "valid": len(docs) - len(skipped),
        "invalid": 0,
        "errors": 0,
        "skipped": len(skipped),
    }
    crds = len(list((ROOT / "crds").glob("*.yaml")))
    assert len([d for d in docs if d["kind"] == "CustomResourceDefinition"]) == crds


def test_the_samples_are_valid_against_our_crd_schemas(schemas: Path) -> None:
    samples = sorted((ROOT / "manifests" / "samples").glob("*.yaml"))
    text = "\n---\n".join(p.read_text() for p in samples)
    report = kubeconform(schemas, text)
    assert report["returncode"] == 0, report["resources"]
    assert report["summary"]["valid"] == len(samples)


def test_kubeconform_refuses_what_the_api_server_would(schemas: Path) -> None:
    """The check can fail: a misspelt field of a rendered Deployment, a misspelt field of
    a Run, a string where a port number goes, and a kind nobody has a schema for."""
    deployment = template_text().replace("maxSurge: 1", "maxSurg: 1")
    run = (ROOT / "manifests" / "samples" / "run.yaml").read_text()
    service = "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: '80'}]}\n"
    unknown = "apiVersion: lattice.dev/v1alpha1\nkind: Sprout\nmetadata: {name: x}\n"
    cases = {
        "maxSurg": deployment,
        "spriteRf": run.replace("spriteRef:", "spriteRf:"),
        "got string, want integer": service,
        "could not find schema for Sprout": unknown,
    }
    for message, text in cases.items():
        report = kubeconform(schemas, text)
        assert report["returncode"] != 0, message
        assert message in json.dumps(report["resources"]), (message, report["resources"])
