"""Every object the chart renders, for each case of the values matrix, is accepted by a real
API server with strict field validation (server-side dry run, our CRDs installed).

Beside kubeconform (test_kubeconform.py, schemas only), the API server also runs what no
schema says: defaulting, cross-field validation, admission. cert-manager's Certificate and
Issuer are checked for their names only (test_chart.py): no cert-manager CRDs exist here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from tests.support.cluster import Cluster
from tests.support.helm import MATRIX, NAMESPACE, template_text

CERT_MANAGER_KINDS = {"Certificate", "Issuer"}


@pytest.fixture(scope="module")
def chart_namespaces(cluster: Cluster) -> Iterator[None]:
    names = [NAMESPACE, "team-a", "team-b"]
    for name in names:
        cluster.ensure_namespace(name)
    yield
    for name in names:
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.mark.e2e
@pytest.mark.parametrize("case", sorted(MATRIX))
def test_api_server_accepts_every_rendered_object(
    case: str, cluster: Cluster, chart_namespaces: None
) -> None:
    docs = [d for d in yaml.safe_load_all(template_text(*MATRIX[case])) if d]
    checked = [d for d in docs if d["kind"] not in CERT_MANAGER_KINDS]
    assert len(checked) >= 10
    out = cluster.kubectl(
        "apply",
        "--dry-run=server",
        "--validate=strict",
        "-f",
        "-",
        input=yaml.safe_dump_all(checked),
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("(server dry run)") == len(checked)
