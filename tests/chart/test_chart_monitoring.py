"""The chart's monitoring objects: the ServiceMonitor finds the metrics Service and names the
job the alerts select, the PrometheusRule is the tested rule file, the dashboard ConfigMap
is the generated dashboard; each can be turned on or off with one value; the
prometheus-operator objects pass a strict server-side dry run against the pinned
prometheus-operator CRDs (tests/data/prometheus-operator)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dashboards.lattice import OUTPUTS
from tests.support.cluster import Cluster
from tests.support.helm import CHART, NAMESPACE, RELEASE, find, helm, render, template_text
from tests.support.prometheus import JOB, RULES

MONITORING = [
    "--set",
    "metrics.serviceMonitor.enabled=true",
    "--set",
    "metrics.prometheusRule.enabled=true",
    "--set",
    "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
]
CRDS = Path(__file__).resolve().parents[1] / "data" / "prometheus-operator"
FULLNAME = f"{RELEASE}-lattice-operator"


def _kinds(docs: list[dict[str, object]]) -> list[object]:
    return sorted(str(d["kind"]) for d in docs)


def test_default_ships_the_dashboard_and_no_prometheus_operator_objects() -> None:
    docs = render()
    assert "ServiceMonitor" not in _kinds(docs)
    assert "PrometheusRule" not in _kinds(docs)
    dashboard = find(docs, "ConfigMap", f"{FULLNAME}-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads(dashboard["data"]["lattice-operator.json"])
    assert shipped == json.loads(OUTPUTS[0].read_text())
    assert shipped["uid"] == "lattice-operator"


def test_one_value_turns_each_off_or_on() -> None:
    off = render("--set", "metrics.grafanaDashboard.enabled=false")
    assert [d for d in off if d["metadata"]["name"] == f"{FULLNAME}-dashboard"] == []
    no_metrics = render("--set", "metrics.enabled=false", *MONITORING)
    assert {"ServiceMonitor", "PrometheusRule"} & set(map(str, _kinds(no_metrics))) == set()
    assert [d for d in no_metrics if d["metadata"]["name"] == f"{FULLNAME}-dashboard"] == []
    on = render(*MONITORING)
    assert find(on, "ServiceMonitor")["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    find(on, "PrometheusRule")


def test_service_monitor_selects_the_metrics_service_and_names_the_job() -> None:
    docs = render(*MONITORING)
    monitor = find(docs, "ServiceMonitor")["spec"]
    services = [d for d in docs if d["kind"] == "Service"]
    selected = [
        s
        for s in services
        if monitor["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()
    ]
    assert [s["metadata"]["name"] for s in selected] == [f"{FULLNAME}-metrics"]
    (service,) = selected
    assert [e["port"] for e in monitor["endpoints"]] == [
        p["name"] for p in service["spec"]["ports"]
    ]
    # The job label comes from the Service's label: the job the alerts and dashboard select.
    assert service["metadata"]["labels"][monitor["jobLabel"]] == JOB
    assert monitor["namespaceSelector"]["matchNames"] == [NAMESPACE]


def test_prometheus_rule_is_the_tested_rule_file() -> None:
    rule = find(render(*MONITORING), "PrometheusRule")
    assert rule["spec"] == yaml.safe_load(RULES.read_text())


def test_monitoring_values_are_checked_by_the_schema() -> None:
    out = helm("template", RELEASE, str(CHART), "--set", "metrics.serviceMonitor.interval=often")
    assert out.returncode != 0
    assert "/metrics/serviceMonitor/interval" in out.stderr, out.stderr
    out = helm("lint", "--strict", str(CHART), *MONITORING)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.fixture(scope="module")
def prometheus_operator_crds(cluster: Cluster) -> Iterator[None]:
    cluster.ensure_namespace(NAMESPACE)
    for crd in sorted(CRDS.glob("*.yaml")):
        cluster.kubectl("apply", "--server-side", "-f", str(crd))
    for name in ("servicemonitors", "prometheusrules"):
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{name}.monitoring.coreos.com")
    yield
    for crd in sorted(CRDS.glob("*.yaml")):
        cluster.kubectl("delete", "-f", str(crd), "--ignore-not-found", check=False)


def _dry_run(cluster: Cluster, docs: list[dict[str, object]]) -> tuple[int, str, str]:
    out = cluster.kubectl(
        "apply",
        "--dry-run=server",
        "--validate=strict",
        "-f",
        "-",
        input=yaml.safe_dump_all(docs),
        check=False,
    )
    return out.returncode, out.stdout, out.stderr


@pytest.mark.e2e
def test_api_server_accepts_the_monitoring_objects_under_their_crds(
    cluster: Cluster, prometheus_operator_crds: None
) -> None:
    docs = [d for d in yaml.safe_load_all(template_text(*MONITORING)) if d]
    chosen = [d for d in docs if d["kind"] in ("ServiceMonitor", "PrometheusRule")]
    assert len(chosen) == 2
    code, out, err = _dry_run(cluster, chosen)
    assert code == 0, err
    assert out.count("(server dry run)") == 2


@pytest.mark.e2e
def test_the_crds_really_check_the_objects(
    cluster: Cluster, prometheus_operator_crds: None
) -> None:
    # The same objects, each spoilt in a way their schema forbids: refused with the field.
    docs = [d for d in yaml.safe_load_all(template_text(*MONITORING)) if d]
    monitor = find(docs, "ServiceMonitor")
    monitor["spec"]["endpoints"][0]["scheme"] = "gopher"
    code, _, err = _dry_run(cluster, [monitor])
    assert code != 0
    assert "spec.endpoints[0].scheme" in err, err
    rule = find(docs, "PrometheusRule")
    rule["spec"]["groups"][0]["rules"][0]["for"] = "five minutes"
    code, _, err = _dry_run(cluster, [rule])
    assert code != 0
    assert "spec.groups[0].rules[0].for" in err, err
