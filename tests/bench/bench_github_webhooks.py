"""GitHub webhooks (`make bench`, figures in bench-results/github_webhooks.json): the
receiver the operator serves, against the suite's kube-apiserver.

1. Webhook received → Intent created: 300 issue deliveries one after another; the latency
   is the delivery's round trip (the receiver answers once the Intent is stored).
2. 100 deliveries/s for 30 s, 10 % of them redeliveries (half with GitHub's same delivery
   id, half as a new delivery of the same event): then every distinct issue has exactly
   one Intent — none lost, none doubled.

The request loop is bounded in count and time and only talks to 127.0.0.1. No assertions
on the numbers; the counts are asserted.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from lattice_adapters.kube import KubeClient, KubeConfig
from lattice_devtools.localcluster.controlplane import free_port
from lattice_operator.api.v1alpha1.githubrepository import GitHubRepository
from lattice_operator.clock import SystemClock
from lattice_operator.forge.webhooks import sign
from lattice_operator.handlers.github_webhooks import WebhookReceiver
from tests.support.cluster import Cluster
from tests.support.github.fixtures import webhook_example

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench-results" / "github_webhooks.json"
SECRET = b"bench-webhook-secret"
RATE, SECONDS, REDELIVERED = 100, 30, 0.10
LATENCY_SAMPLES = 300


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def _payload(template: dict[str, Any], number: int) -> bytes:
    payload = json.loads(json.dumps(template))
    payload["issue"]["number"] = number
    payload["issue"]["title"] = f"Issue {number}"
    return json.dumps(payload).encode()


@pytest.fixture
async def receiver(cluster: Cluster, namespace: str) -> AsyncIterator[str]:
    cluster.kubectl(
        "create",
        "secret",
        "generic",
        "hook",
        "-n",
        namespace,
        f"--from-literal=secret={SECRET.decode()}",
    )
    repository = GitHubRepository.model_validate(
        {
            "metadata": {"name": "hello", "namespace": namespace},
            "spec": {
                "repo": "Codertocat/Hello-World",
                "webhookSecretRef": {"name": "hook", "key": "secret"},
                "agent": {"spriteRef": {"name": "box"}, "command": ["agent"]},
            },
        }
    )
    async with KubeClient(KubeConfig.load(cluster.kubeconfig)) as kube:
        server = WebhookReceiver(
            kube=kube,
            clock=SystemClock(),
            repositories=lambda ns, name: (
                repository if (ns, name) == (namespace, "hello") else None
            ),
            forge=lambda: None,
            max_bytes=5 * 1024 * 1024,
        )
        runner = web.AppRunner(server.app(), access_log=None)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            yield f"http://127.0.0.1:{port}/github/{namespace}/hello"
        finally:
            await runner.cleanup()


async def _send(http: httpx.AsyncClient, url: str, body: bytes, delivery: str) -> int:
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": sign(SECRET, body),
    }
    response = await http.post(url, content=body, headers=headers)
    return response.status_code


async def test_webhook_to_intent_latency_and_sustained_load_with_redeliveries(
    receiver: str, cluster: Cluster, namespace: str
) -> None:
    template = webhook_example("issues", "opened")
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
    async with httpx.AsyncClient(timeout=600, limits=limits, trust_env=False) as http:
        latencies: list[float] = []
        for number in range(1, LATENCY_SAMPLES + 1):
            started = time.perf_counter()
            status = await _send(http, receiver, _payload(template, number), str(uuid.uuid4()))
            latencies.append(time.perf_counter() - started)
            assert status == 201

        rng = random.Random(14)
        sent: list[tuple[int, str]] = []  # (issue, delivery id) of first deliveries
        statuses: dict[int, int] = {}
        tasks: list[asyncio.Task[int]] = []
        total = RATE * SECONDS
        first_issue = 10_000
        started = time.perf_counter()
        for i in range(total):
            due = started + i / RATE
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if sent and rng.random() < REDELIVERED:
                issue, delivery = rng.choice(sent)
                if rng.random() < 0.5:
                    delivery = str(uuid.uuid4())  # the same event, delivered anew
            else:
                issue, delivery = first_issue + len(sent), str(uuid.uuid4())
                sent.append((issue, delivery))
            tasks.append(
                asyncio.create_task(_send(http, receiver, _payload(template, issue), delivery))
            )
        sent_in = time.perf_counter() - started
        # Bounded: whatever the machine's load, the benchmark ends.
        results = await asyncio.wait_for(asyncio.gather(*tasks), timeout=600)
        elapsed = time.perf_counter() - started
    for status in results:
        statuses[status] = statuses.get(status, 0) + 1
    names = {
        item["metadata"]["name"]
        for item in cluster.custom.list_namespaced_custom_object(
            "lattice.dev", "v1alpha1", namespace, "intents"
        )["items"]
    }
    load_names = {n for n in names if int(n.rsplit("-", 1)[1]) >= first_issue}
    prefix = next(iter(load_names)).rsplit("-", 1)[0] if load_names else ""
    expected = {f"{prefix}-{n}" for n, _ in sent}
    figures = {
        "latency_samples": LATENCY_SAMPLES,
        "webhook_to_intent_p50_ms": round(statistics.median(latencies) * 1000, 1),
        "webhook_to_intent_p99_ms": round(percentile(latencies, 99) * 1000, 1),
        "load_rate_per_second": RATE,
        "load_seconds": SECONDS,
        "deliveries": total,
        "redeliveries": total - len(sent),
        "distinct_issues": len(sent),
        "intents_created": len(load_names),
        "lost": len(expected - load_names),
        "doubled": len(load_names) - len(expected & load_names),
        "answers": {str(k): v for k, v in sorted(statuses.items())},
        "send_seconds": round(sent_in, 1),
        "all_answered_seconds": round(elapsed, 1),
        "answered_per_second": round(total / elapsed, 1),
        "load_average_1m": round(os.getloadavg()[0], 1),
        "cores": os.cpu_count(),
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    assert figures["lost"] == 0
    assert figures["doubled"] == 0
    assert len(load_names) == len(sent)
    assert set(statuses) <= {200, 201}
