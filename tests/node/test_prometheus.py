"""Prometheus, in the node's network namespace, scrapes what the chart's ServiceMonitor selects
(after tests/node/test_samples.py: the samples' Runs show in the metrics).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from lattice_devtools.localcluster.node import NodeCluster
from tests.support.node_e2e import CHART, NAMESPACE, RELEASE, holder, operator_pods, wait_until
from tests.support.prometheus import RULES, prometheus_command, service_monitor_targets

pytestmark = pytest.mark.node


def prometheus_api(node: NodeCluster, url: str, path: str, *params: str) -> Any:
    """A Prometheus HTTP API answer, from inside the node's network namespace."""
    args = [a for p in params for a in ("--data-urlencode", p)]
    out = node.run("curl", "-sS", "--get", f"{url}/api/v1/{path}", *args)
    body = json.loads(out.stdout)
    assert body["status"] == "success", body
    return body["data"]


def prometheus_query(node: NodeCluster, url: str, expr: str) -> list[dict[str, Any]]:
    return list(prometheus_api(node, url, "query", f"query={expr}")["result"])


def test_prometheus_scrapes_the_pods_the_charts_service_monitor_selects(
    installed: NodeCluster,
) -> None:
    """Prometheus scrapes the operator Pods that the chart's ServiceMonitor selects: the
    metrics Service's EndpointSlices resolved as prometheus-operator's endpoints discovery
    would (Debian's Prometheus has no Kubernetes discovery compiled in, so the harness does
    that one step and hands Prometheus the targets as a file). Both Pods are scraped, exactly
    one reports itself the leader (the Lease holder), the samples' Runs show, the chart's alert
    rules load and none fires."""
    node = installed
    rendered = node.helm(
        "template", RELEASE, str(CHART), "--namespace", NAMESPACE,
        "--set", "metrics.serviceMonitor.enabled=true", "--show-only", "templates/monitoring.yaml",
    )  # fmt: skip
    (monitor,) = [
        d for d in yaml.safe_load_all(rendered.stdout) if d and d["kind"] == "ServiceMonitor"
    ]
    (namespace,) = monitor["spec"]["namespaceSelector"]["matchNames"]
    services = node.kube_json("get", "services", "-n", namespace)["items"]
    slices = node.kube_json("get", "endpointslices.discovery.k8s.io", "-n", namespace)["items"]
    groups = service_monitor_targets(monitor, services, slices)
    workdir = node.state / "prometheus"
    workdir.mkdir(exist_ok=True)
    (workdir / "targets.json").write_text(json.dumps(groups))
    config = {
        "global": {"scrape_interval": "2s", "evaluation_interval": "2s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {
                "job_name": f"serviceMonitor/{namespace}/{monitor['metadata']['name']}",
                "scrape_timeout": "2s",
                "metrics_path": monitor["spec"]["endpoints"][0].get("path", "/metrics"),
                "file_sd_configs": [{"files": [str(workdir / "targets.json")]}],
            }
        ],
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    url = "http://127.0.0.1:19090"  # the namespace's own loopback
    node.spawn("prometheus", prometheus_command(workdir, "127.0.0.1:19090"))
    try:
        wait_until(
            lambda: node.run("curl", "-sf", f"{url}/-/ready", check=False).returncode == 0,
            f"Prometheus ready (log: {node.log('prometheus')[-2000:]})",
            60,
        )
        pods = {p["metadata"]["name"] for p in operator_pods(node)}

        def scraped() -> bool:
            up = prometheus_query(node, url, 'up{job="lattice-operator"} == 1')
            return {s["metric"].get("pod") for s in up} == pods

        wait_until(scraped, f"both operator Pods {sorted(pods)} scraped", 90)
        leaders = prometheus_query(node, url, 'lattice_leader{job="lattice-operator"} == 1')
        assert [s["metric"]["pod"] for s in leaders] == [holder(node)], leaders
        runs = prometheus_query(node, url, 'lattice_runs{job="lattice-operator",phase="Succeeded"}')
        assert sum(float(s["value"][1]) for s in runs) >= 1, runs
        rules = prometheus_api(node, url, "rules")["groups"]
        alerts = [r for g in rules for r in g["rules"] if r["type"] == "alerting"]
        assert len(alerts) >= 9, rules  # the chart's rule file, loaded
        wait_until(lambda: prometheus_query(node, url, "ALERTS") == [], "no alert firing", 30)
    finally:
        node.stop("prometheus")
