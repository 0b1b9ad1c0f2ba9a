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

from lattice_devtools.localcluster.controlplane import free_port

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


def service_monitor_targets(
    monitor: dict[str, Any], services: list[dict[str, Any]], slices: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The scrape targets prometheus-operator's endpoints discovery finds for a ServiceMonitor,
    as file_sd target groups: the Services its selector matches, their EndpointSlices' ready
    addresses on the endpoint's named port; `job` from the Service's `jobLabel` label, `pod`
    from the address's target. Only the fields the chart's ServiceMonitor uses; any other is
    refused rather than silently ignored."""
    spec = monitor["spec"]
    known = {"jobLabel", "namespaceSelector", "selector", "endpoints"}
    if set(spec) - known or set(spec["selector"]) != {"matchLabels"}:
        raise AssertionError(f"a ServiceMonitor field this translation does not know: {spec}")
    (endpoint,) = spec["endpoints"]
    wanted = spec["selector"]["matchLabels"]
    groups: list[dict[str, Any]] = []
    for service in services:
        labels = service["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in wanted.items()):
            continue
        name = service["metadata"]["name"]
        owned = [
            s for s in slices
            if (s["metadata"].get("labels") or {}).get("kubernetes.io/service-name") == name
        ]  # fmt: skip
        for piece in owned:
            ports = [
                p["port"] for p in piece.get("ports") or [] if p.get("name") == endpoint["port"]
            ]
            for address in piece.get("endpoints") or []:
                if not (address.get("conditions") or {}).get("ready", False):
                    continue
                for port in ports:
                    groups.append(
                        {
                            "targets": [f"{address['addresses'][0]}:{port}"],
                            "labels": {
                                "job": labels.get(spec["jobLabel"], name),
                                "namespace": service["metadata"]["namespace"],
                                "service": name,
                                "pod": (address.get("targetRef") or {}).get("name", ""),
                            },
                        }
                    )
    if not groups:
        raise AssertionError(f"the ServiceMonitor selects no ready endpoint: {wanted}")
    return groups


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
