"""The alert rules: valid for promtool, each alert unit-tested firing and not firing,
each with a severity and a runbook section in docs/monitoring.md."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.support.prometheus import RULES, tool

HERE = Path(__file__).resolve().parent
TESTS = HERE / "alerts-test.yaml"
RUNBOOK = HERE.parents[1] / "docs" / "monitoring.md"
SEVERITIES = {"critical", "warning", "info"}


def _alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_promtool_accepts_the_rules() -> None:
    out = subprocess.run(
        [tool("promtool"), "check", "rules", str(RULES)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in out.stdout


def test_promtool_unit_tests_pass() -> None:
    out = subprocess.run(
        [tool("promtool"), "test", "rules", TESTS.name],
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_every_alert_is_tested_firing_and_quiet() -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in yaml.safe_load(TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            (firing if check["exp_alerts"] else quiet).add(check["alertname"])
    names = {a["alert"] for a in _alerts()}
    assert names - firing == set(), "alerts never tested firing"
    assert names - quiet == set(), "alerts never tested staying quiet"


def test_every_alert_has_a_severity_and_a_runbook_section() -> None:
    headings = {
        m.lower()
        for m in re.findall(r"^### (Lattice\w+)$", RUNBOOK.read_text(), flags=re.MULTILINE)
    }
    for alert in _alerts():
        name = alert["alert"]
        assert alert["labels"]["severity"] in SEVERITIES, name
        assert name.lower() in headings, f"{name}: no '### {name}' section in {RUNBOOK.name}"
        assert alert["annotations"]["runbook_url"].endswith(f"monitoring.md#{name.lower()}")
        assert alert["annotations"]["summary"]
