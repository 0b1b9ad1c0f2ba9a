"""The Lattice Operator dashboard, built with the Grafana Foundation SDK.

`python -m dashboards.lattice` (or `make dashboards`) writes `dashboards/lattice-operator.json`
and the Helm chart's copy; a test regenerates it and fails on drift, and runs every panel's
query against a real Prometheus that scraped the operator (every panel must return data).
Queries select `job="$job"` (default `lattice-operator`, what the chart's ServiceMonitor
sets) through the `$datasource` Prometheus data source.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DataSourceRef,
    VariableOption,
)

ROOT = Path(__file__).resolve().parents[1]
OUTPUTS = (
    ROOT / "dashboards" / "lattice-operator.json",
    ROOT / "charts" / "lattice-operator" / "dashboards" / "lattice-operator.json",
)
UID = "lattice-operator"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
SEL = 'job="$job"'
RATE = "$__rate_interval"


def _query(expr: str, legend: str, ref: str) -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref)


def _series(
    title: str, description: str, unit: str, queries: list[tuple[str, str]], *, width: int = 8
) -> timeseries.Panel:
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .span(width)
        .height(8)
        .legend(
            common_builders.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM)
            .show_legend(True)
        )
    )
    for i, (expr, legend) in enumerate(queries):
        panel = panel.with_target(_query(expr, legend, chr(ord("A") + i)))
    return panel


def _stat(title: str, description: str, expr: str, legend: str, *, width: int = 6) -> stat.Panel:
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .span(width)
        .height(4)
        .with_target(_query(expr, legend, "A"))
    )


def _quantiles(metric: str, by: str = "") -> list[tuple[str, str]]:
    group = f"le, {by}" if by else "le"
    prefix = f"{{{{{by}}}}} " if by else ""
    return [
        (
            f"histogram_quantile({q}, sum by ({group}) (rate({metric}_bucket{{{SEL}}}[{RATE}])))",
            f"{prefix}p{round(q * 100)}",
        )
        for q in (0.5, 0.9, 0.99)
    ]


def build() -> dict[str, Any]:
    """The dashboard as Grafana's JSON model."""
    board = (
        dash.Dashboard("Lattice Operator")
        .uid(UID)
        .description("Sprites, Runs and Intents as the operator sees them; see docs/monitoring.md")
        .tags(["lattice", "kubernetes", "operator"])
        .refresh("30s")
        .time("now-1h", "now")
        .timezone("browser")
        .tooltip(DashboardCursorSync.CROSSHAIR)
        .with_variable(
            dash.DatasourceVariable("datasource").label("Data source").type("prometheus")
        )
        .with_variable(
            dash.CustomVariable("job")
            .label("Job")
            .values("lattice-operator")
            .current(_option("lattice-operator"))
        )
    )
    for row, panels in _rows():
        board = board.with_row(dash.Row(row))
        for panel in panels:
            board = board.with_panel(panel)
    encoded: dict[str, Any] = json.loads(json.dumps(board.build(), cls=JSONEncoder))
    return encoded


def _option(value: str) -> VariableOption:
    return VariableOption(text=value, value=value, selected=True)


def _rows() -> Iterator[tuple[str, list[Any]]]:
    yield (
        "Overview",
        [
            _stat(
                "Active replicas",
                "Replicas reporting themselves active (lattice_leader): 1 is right.",
                f"sum(lattice_leader{{{SEL}}})",
                "active",
            ),
            _stat(
                "Sprites",
                "Sprites known to the operator.",
                f"sum(lattice_sprites{{{SEL}}})",
                "sprites",
            ),
            _stat("Runs", "Runs known to the operator.", f"sum(lattice_runs{{{SEL}}})", "runs"),
            _stat(
                "Intents",
                "Intents known to the operator.",
                f"sum(lattice_intents{{{SEL}}})",
                "intents",
            ),
            _series(
                "Sprites by state",
                "Sprites by phase and the backend's last report (cold, warm, running).",
                "short",
                [
                    (
                        f"sum by (phase, backend_status) (lattice_sprites{{{SEL}}})",
                        "{{phase}} / {{backend_status}}",
                    )
                ],
            ),
            _series(
                "Runs by phase",
                "Runs by phase.",
                "short",
                [(f"sum by (phase) (lattice_runs{{{SEL}}})", "{{phase}}")],
            ),
            _series(
                "Intents by phase",
                "Intents by phase.",
                "short",
                [(f"sum by (phase) (lattice_intents{{{SEL}}})", "{{phase}}")],
            ),
        ],
    )
    yield (
        "Throughput",
        [
            _series(
                "Events ingested",
                "Sprite protocol events committed per second, by type.",
                "ops",
                [
                    (
                        f"sum by (type) (rate(lattice_events_ingested_total{{{SEL}}}[{RATE}]))",
                        "{{type}}",
                    )
                ],
            ),
            _series(
                "Receipts",
                "Lifeloop receipts per second, by lifecycle event.",
                "ops",
                [
                    (
                        f"sum by (event) (rate(lattice_receipts_total{{{SEL}}}[{RATE}]))",
                        "{{event}}",
                    )
                ],
            ),
            _series(
                "Status writes",
                "Status patches per second, by kind.",
                "ops",
                [
                    (
                        f"sum by (kind) (rate(lattice_status_patches_total{{{SEL}}}[{RATE}]))",
                        "{{kind}}",
                    )
                ],
            ),
            _series(
                "Reconciles",
                "Reconciliations per second, by kind and outcome.",
                "ops",
                [
                    (
                        f"sum by (kind, outcome) (rate(lattice_reconcile_total{{{SEL}}}[{RATE}]))",
                        "{{kind}} {{outcome}}",
                    )
                ],
            ),
            _series(
                "Sprites API calls",
                "Sprites API calls per second, by operation.",
                "ops",
                [
                    (
                        "sum by (operation) "
                        f"(rate(lattice_backend_call_duration_seconds_count{{{SEL}}}[{RATE}]))",
                        "{{operation}}",
                    )
                ],
            ),
            _series(
                "Outbox lag",
                "Outbox bytes written by sprites and not read yet (all Runs).",
                "bytes",
                [(f"sum(lattice_outbox_lag_bytes{{{SEL}}})", "lag")],
            ),
        ],
    )
    yield (
        "Latency",
        [
            _series(
                "Apply → exec started",
                "From a Run's creation to its first session started.",
                "s",
                _quantiles("lattice_run_apply_to_exec_seconds"),
            ),
            _series(
                "Intent decision",
                "From an Intent's creation to its policy decision.",
                "s",
                _quantiles("lattice_intent_decision_seconds"),
            ),
            _series(
                "Reconcile duration (p99)",
                "99th percentile reconcile duration by kind (a Run's is its whole drive).",
                "s",
                [
                    (
                        "histogram_quantile(0.99, sum by (le, kind) "
                        f"(rate(lattice_reconcile_duration_seconds_bucket{{{SEL}}}[{RATE}])))",
                        "{{kind}}",
                    )
                ],
            ),
            _series(
                "Sprites API latency (p99)",
                "99th percentile Sprites API call latency by operation.",
                "s",
                [
                    (
                        "histogram_quantile(0.99, sum by (le, operation) "
                        f"(rate(lattice_backend_call_duration_seconds_bucket{{{SEL}}}[{RATE}])))",
                        "{{operation}}",
                    )
                ],
            ),
            _series(
                "Webhook latency (p99)",
                "99th percentile admission webhook handling time.",
                "s",
                [
                    (
                        "histogram_quantile(0.99, sum by (le, webhook) "
                        f"(rate(lattice_admission_duration_seconds_bucket{{{SEL}}}[{RATE}])))",
                        "{{webhook}}",
                    )
                ],
            ),
        ],
    )
    yield (
        "Errors",
        [
            _series(
                "Protocol violations",
                "Sprite protocol violations per second, by category.",
                "ops",
                [
                    (
                        "sum by (category) "
                        f"(rate(lattice_protocol_violations_total{{{SEL}}}[{RATE}]))",
                        "{{category}}",
                    )
                ],
            ),
            _series(
                "Sprites API errors",
                "Sprites API errors per second by failure class; 429 answers.",
                "ops",
                [
                    (
                        "sum by (failure_class) "
                        f"(rate(lattice_backend_errors_total{{{SEL}}}[{RATE}]))",
                        "{{failure_class}}",
                    ),
                    (f"sum(rate(lattice_backend_throttled_total{{{SEL}}}[{RATE}]))", "429"),
                ],
            ),
            _series(
                "Refused actions",
                "ACTION_REQUESTs refused per second, by reason.",
                "ops",
                [
                    (
                        f"sum by (reason) (rate(lattice_refused_actions_total{{{SEL}}}[{RATE}]))",
                        "{{reason}}",
                    )
                ],
            ),
            _series(
                "Webhook requests",
                "Admission requests per second by outcome (a refusal is the webhook working).",
                "ops",
                [
                    (
                        "sum by (outcome) "
                        f"(rate(lattice_admission_requests_total{{{SEL}}}[{RATE}]))",
                        "{{outcome}}",
                    )
                ],
            ),
            _series(
                "Receipt gaps",
                "Receipts that are not Events: missing after a restart, refused, over the rate "
                "limit.",
                "ops",
                [
                    (f"sum(rate(lattice_receipts_missing_total{{{SEL}}}[{RATE}]))", "missing"),
                    (
                        f"sum(rate(lattice_receipt_post_failures_total{{{SEL}}}[{RATE}]))",
                        "refused",
                    ),
                    (f"sum(rate(lattice_kube_events_dropped_total{{{SEL}}}[{RATE}]))", "dropped"),
                ],
            ),
        ],
    )
    yield (
        "Approvals",
        [
            _series(
                "Waiting",
                "Intents awaiting approval and Runs waiting for input (0 when none).",
                "short",
                [
                    (
                        f'sum(lattice_intents{{{SEL},phase="AwaitingApproval"}}) or vector(0)',
                        "Intents awaiting approval",
                    ),
                    (
                        f'sum(lattice_runs{{{SEL},phase="Waiting"}}) or vector(0)',
                        "Runs waiting",
                    ),
                ],
            ),
            _series(
                "Longest wait",
                "How long the longest-waiting Intent has awaited approval (0 when none).",
                "s",
                [
                    (
                        "(time() - min(lattice_intent_oldest_awaiting_approval_timestamp_seconds"
                        f"{{{SEL}}})) or vector(0)",
                        "longest wait",
                    )
                ],
            ),
            _series(
                "Time to decision",
                "Time Intents spent awaiting approval before it was decided.",
                "s",
                _quantiles("lattice_intent_awaiting_approval_seconds"),
            ),
            _series(
                "Approval decisions",
                "Approval decisions per second by outcome.",
                "ops",
                [
                    (
                        f"sum by (outcome) (rate(lattice_approvals_total{{{SEL}}}[{RATE}]))",
                        "{{outcome}}",
                    )
                ],
            ),
        ],
    )


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


def panel_queries(model: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of every panel in a dashboard's JSON model."""
    out: list[tuple[str, str]] = []
    for panel in model.get("panels", []):
        for nested in [panel, *panel.get("panels", [])]:
            for target in nested.get("targets", []):
                out.append((nested.get("title", ""), target["expr"]))
    return out


def main(argv: list[str]) -> int:
    text = render()
    check = "--check" in argv
    stale = [p for p in OUTPUTS if not p.exists() or p.read_text() != text]
    if check:
        for p in stale:
            print(f"{p.relative_to(ROOT)} is out of date: run `make dashboards`", file=sys.stderr)
        return 1 if stale else 0
    for p in OUTPUTS:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
