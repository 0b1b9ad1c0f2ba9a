"""A real Prometheus for the tests: Debian's `prometheus` package (hack/prometheus.env,
installed by `make prometheus`), started on 127.0.0.1 with a data directory of its own."""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

from lattice_adapters.localcluster.controlplane import free_port

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "charts" / "lattice-operator" / "files" / "prometheus-rules.yaml"
JOB = "lattice-operator"
"""The job label the chart's ServiceMonitor gives the operator's series (the alerts use it)."""


def tool(name: str) -> str:
    """The path of `prometheus` or `promtool`; a clear failure when not installed."""
    found = shutil.which(name)
    if found is None:
        raise AssertionError(f"{name} is not installed: run `make prometheus` (Debian's package)")
    return found


@dataclass
class Prometheus:
    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def api(self, path: str, **params: Any) -> Any:
        resp = httpx.get(f"{self.url}/api/v1/{path}", params=params, trust_env=False, timeout=10)
        body = resp.json()
        if body.get("status") != "success":
            raise AssertionError(f"Prometheus {path} {params}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector (or a one-element list for a scalar)."""
        data = self.api("query", query=expr)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        result: list[dict[str, Any]] = data["result"]
        return result

    def targets(self) -> list[dict[str, Any]]:
        active: list[dict[str, Any]] = self.api("targets")["activeTargets"]
        return active

    def scrapes_since(self, after: float) -> bool:
        """Every target has been scraped successfully after `after` (Unix time)."""
        targets = self.targets()
        return bool(targets) and all(
            t["health"] == "up" and _parse_time(t["lastScrape"]) > after for t in targets
        )


def _parse_time(stamp: str) -> float:
    """A Go RFC 3339 time (nanoseconds, Z or an offset) as Unix time."""
    m = re.fullmatch(r"(.+T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", stamp)
    if m is None:
        raise AssertionError(f"not a time: {stamp!r}")
    head, frac, zone = m.group(1), (m.group(2) or "0")[:6], m.group(3).replace("Z", "+00:00")
    return datetime.fromisoformat(f"{head}.{frac}{zone}").timestamp()


def _label(name: str) -> str:
    """A Kubernetes label name as Prometheus' service discovery spells it in a meta label."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def service_monitor_scrape_config(monitor: dict[str, Any], kubeconfig: Path) -> dict[str, Any]:
    """The scrape job prometheus-operator generates from a ServiceMonitor (endpoints role,
    its namespaces, its Service label selector, the endpoint's port name, `jobLabel`), for a
    Prometheus that reaches the API server through `kubeconfig`. Only the fields the chart's
    ServiceMonitor uses; anything else is refused rather than silently ignored."""
    spec = monitor["spec"]
    known = {"jobLabel", "namespaceSelector", "selector", "endpoints"}
    if set(spec) - known or set(spec["selector"]) != {"matchLabels"}:
        raise AssertionError(f"a ServiceMonitor field this translation does not know: {spec}")
    (endpoint,) = spec["endpoints"]
    keep = [
        {
            "source_labels": [f"__meta_kubernetes_service_label_{_label(k)}"],
            "regex": v,
            "action": "keep",
        }
        for k, v in spec["selector"]["matchLabels"].items()
    ]
    keep.append(
        {"source_labels": ["__meta_kubernetes_endpoint_port_name"], "regex": endpoint["port"],
         "action": "keep"}
    )  # fmt: skip
    job = f"__meta_kubernetes_service_label_{_label(spec['jobLabel'])}"
    return {
        "job_name": f"serviceMonitor/{monitor['metadata']['name']}",
        "metrics_path": endpoint.get("path", "/metrics"),
        "scrape_interval": "2s",
        "scrape_timeout": "2s",
        "kubernetes_sd_configs": [
            {
                "role": "endpoints",
                "kubeconfig_file": str(kubeconfig),
                "namespaces": {"names": spec["namespaceSelector"]["matchNames"]},
            }
        ],
        "relabel_configs": [
            *keep,
            {"source_labels": [job], "target_label": "job"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        ],
    }


def prometheus_command(workdir: Path, listen: str) -> list[str]:
    return [
        tool("prometheus"),
        f"--config.file={workdir / 'prometheus.yml'}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address={listen}",
        "--web.enable-lifecycle",
        "--log.level=warn",
    ]


@contextlib.contextmanager
def prometheus_server(
    workdir: Path, targets: list[str], *, scrape_interval: float = 1.0, rules: bool = True
) -> Iterator[Prometheus]:
    """Prometheus scraping `targets` (host:port on 127.0.0.1) as job "lattice-operator",
    with the chart's alert rules loaded; stopped (and its data dropped) afterwards."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    interval = f"{int(scrape_interval * 1000)}ms"
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(RULES)] if rules else [],
        "scrape_configs": [
            {
                "job_name": JOB,
                "scrape_timeout": interval,
                "static_configs": [{"targets": targets}],
            }
        ],
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    log_path = workdir / "prometheus.log"
    cmd = prometheus_command(workdir, f"127.0.0.1:{port}")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = Prometheus(f"http://127.0.0.1:{port}", proc, log_path)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"prometheus exited:\n{server.log()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{server.url}/-/ready", trust_env=False, timeout=1).is_success:
                    break
            if time.monotonic() > deadline:
                raise AssertionError(f"prometheus not ready in 30 s:\n{server.log()[-3000:]}")
            time.sleep(0.1)
        yield server
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(workdir / "data", ignore_errors=True)
