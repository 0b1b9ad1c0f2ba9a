"""The installed operator drives work in the node's Pods: the agent sample through WAITING and
a resume, the gated Intent approved through the chart's webhook, a new Run's events through
the stream Service to a ServiceAccount's token, a HealthCheck firing on schedule, a
GitHubRepository reporting its webhook Secret and taking a signed delivery.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from lattice_devtools.localcluster.node import NodeCluster
from tests.support.node_e2e import HTTP_CLIENT, TIMINGS, http, service_url, wait_phase, wait_until
from tests.support.node_samples import (
    STREAM,
    approve_the_gated_sample,
    drive_the_agent_sample,
    github_repository_reports_its_secret,
    health_check_fires_and_keeps_its_history,
    viewer_token,
)

pytestmark = pytest.mark.node


def test_samples_complete_on_the_node(installed: NodeCluster) -> None:
    started = time.monotonic()
    drive_the_agent_sample(installed, "default")
    TIMINGS["agent Run (with resume)"] = time.monotonic() - started


def test_gated_intent_is_approved_through_the_chart_webhook(installed: NodeCluster) -> None:
    approve_the_gated_sample(installed, "default")


def test_the_stream_service_delivers_a_new_run_to_a_service_account_token(
    installed: NodeCluster,
) -> None:
    """Through the stream Service (which selects the leader's Pod by its label): the live
    page; 401 without a token and with one the API server rejects; with a ServiceAccount's
    token, the events of a Run made after subscribing."""
    node = installed
    token = viewer_token(node)
    url = service_url(node, STREAM)
    # The leader labels its Pod once it serves the stream: until then no endpoint answers.
    status, content_type, page = wait_until(
        lambda: (answer := http(node, f"{url}/"))[0] == 200 and answer,
        "the live page through the stream Service",
        120,
    )
    assert content_type.startswith("text/html"), content_type
    assert "<html" in page.lower()
    status, _, text = http(node, f"{url}/events")
    assert status == 401, text
    status, _, text = http(node, f"{url}/events", headers={"Authorization": "Bearer not-a-token"})
    assert (status, text.strip()) == (401, "the token was not accepted by the API server"), text
    started = time.monotonic()
    reader = subprocess.Popen(
        node.ns_cmd(
            sys.executable, "-c", HTTP_CLIENT, f"{url}/events?namespace=default", "GET",
            f"Authorization: Bearer {token}", "", '"run_id":"stream-run"', "120",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert reader.stdout is not None
        first = reader.stdout.readline() + reader.stdout.readline()
        assert first == "200\ntext/event-stream\n", first + (
            reader.stderr.read() if reader.stderr else ""
        )
        run = {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "Run",
            "metadata": {"name": "stream-run"},
            "spec": {"spriteRef": {"name": "sample"}, "command": ["echo", "streamed"]},
        }
        node.kubectl("apply", "-f", "-", input=json.dumps(run))
        out, err = reader.communicate(timeout=150)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.communicate()
    assert reader.returncode == 0, out[-3000:] + err[-2000:]
    data = [line for line in out.splitlines() if line.startswith("data:")]
    assert any('"run_id":"stream-run"' in line for line in data), out[-3000:]
    TIMINGS["stream: subscribe -> a new Run's event"] = time.monotonic() - started
    wait_phase(node, "run", "stream-run", {"Succeeded", "Failed", "Canceled"})


def test_a_health_check_fires_on_schedule_and_keeps_its_history(installed: NodeCluster) -> None:
    health_check_fires_and_keeps_its_history(installed, "default")


def test_a_github_repository_reports_whether_its_secret_is_readable(
    installed: NodeCluster,
) -> None:
    github_repository_reports_its_secret(installed, "default", deliver=True)
