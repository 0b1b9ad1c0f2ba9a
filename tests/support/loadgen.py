"""A load generator for the operator: one process, an async Kubernetes client, many requests
in flight (never one `kubectl` per object).

Two shapes, as agent-sandbox's stress harness has them:

- `burst`: N objects created at once (at most `in_flight` requests open); time until every
  one has started;
- `open_loop`: Poisson arrivals at a target rate for a fixed time; an arrival never waits
  for earlier ones (its latency counts from when it was due), reported per window so you see
  whether latency holds.

Per object it records when its create was due and sent, when the API server acknowledged
it, and when its Run's exec started: the Run's `status.startTime`, which the operator writes
the moment the sprite confirmed the exec session (same machine, same clock). `StartWatch`
watches the Runs of a namespace for it, so nothing polls.

`ceiling` measures the API server alone: bare custom objects (a CRD nobody watches) created
and status-patched at full speed, so a report can say how close the operator gets to it.

Only 127.0.0.1 is reached (the suite's kube-apiserver); every loop is bounded in count and
time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

from lattice_adapters.kube import KubeApiError, KubeClient, KubeConfig, resource_path

GROUP, VERSION = "lattice.dev", "v1alpha1"
Body = dict[str, Any]


def pct(samples: list[float], q: float) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 1)


def stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass
class Sample:
    """One object the generator made."""

    name: str
    run: str
    """The Run whose exec start ends this object's latency (the object itself, or its Run)."""
    due: float
    """When it was due (open loop: its arrival time; burst: the burst's start)."""
    sent: float = 0.0
    acked: float | None = None
    error: str | None = None


@dataclass
class LoadReport:
    samples: list[Sample]
    started: dict[str, float]
    window: float = 10.0
    steps: dict[str, dict[str, float]] | None = None
    """Per object, when it first showed each milestone (`StartWatch(timeline=True)`)."""

    def timeline(self) -> list[dict[str, Any]]:
        """Each milestone the objects went through, by median time after it was due (the
        create's acknowledgement and the Run's exec start included): where the time goes."""
        marks: dict[str, list[float]] = {}
        for s in self.samples:
            if s.acked is not None:
                marks.setdefault("create acknowledged", []).append(s.acked - s.due)
            names = [s.name] if s.run == s.name else [s.name, s.run]
            for name in names:
                for step, at in (self.steps or {}).get(name, {}).items():
                    marks.setdefault(step, []).append(at - s.due)
            if s.run in self.started:
                marks.setdefault("Run status.startTime (exec confirmed)", []).append(
                    self.started[s.run] - s.due
                )
        rows = [
            {"step": step, "objects": len(v), "p50_ms": ms(pct(v, 50)), "p99_ms": ms(pct(v, 99))}
            for step, v in marks.items()
            if len(v) * 2 >= len(self.samples)
        ]
        return sorted(rows, key=lambda r: r["p50_ms"] or 0.0)

    def latencies(self, subset: list[Sample] | None = None) -> list[float]:
        chosen = self.samples if subset is None else subset
        return [self.started[s.run] - s.due for s in chosen if s.run in self.started]

    def summary(self) -> dict[str, Any]:
        lat = self.latencies()
        errors = [s for s in self.samples if s.error]
        acks = [s.acked - s.sent for s in self.samples if s.acked is not None]
        first = min(s.due for s in self.samples)
        last_start = max(self.started[s.run] for s in self.samples if s.run in self.started)
        return {
            "objects": len(self.samples),
            "started": len(lat),
            "create_errors": len(errors),
            "first_errors": sorted({e.error or "" for e in errors})[:3],
            "p50_ms": ms(pct(lat, 50)),
            "p90_ms": ms(pct(lat, 90)),
            "p99_ms": ms(pct(lat, 99)),
            "max_ms": ms(max(lat) if lat else None),
            "create_ack_p50_ms": ms(pct(acks, 50)),
            "create_ack_p99_ms": ms(pct(acks, 99)),
            "all_started_after_s": round(last_start - first, 2) if lat else None,
        }

    def windows(self) -> list[dict[str, Any]]:
        """Per `window` seconds of arrivals: how many, how many started, their latency."""
        if not self.samples:
            return []
        first = min(s.due for s in self.samples)
        count = int((max(s.due for s in self.samples) - first) // self.window) + 1
        rows = []
        for i in range(count):
            inside = [s for s in self.samples if i <= (s.due - first) / self.window < i + 1]
            lat = self.latencies(inside)
            rows.append(
                {
                    "from_s": i * self.window,
                    "arrivals": len(inside),
                    "started": len(lat),
                    "p50_ms": ms(pct(lat, 50)),
                    "p99_ms": ms(pct(lat, 99)),
                }
            )
        return rows


def milestone(obj: Body) -> str:
    """What a watched object shows of its way to exec, as one short string: a new one is a
    step (a finalizer added, a phase, the Run's session confirmed)."""
    status = obj.get("status") or {}
    parts = [
        f"finalizers={len(obj['metadata'].get('finalizers') or [])}",
        f"phase={status.get('phase') or '-'}",
    ]
    if status.get("runRef"):
        parts.append("runRef")
    if status.get("startTime"):
        parts.append("startTime")
    return " ".join(parts)


class StartWatch:
    """Watches one namespace's Runs and records each Run's `status.startTime`; with
    `timeline`, also when (this process's clock, on receipt) each object of `plural` first
    showed each milestone, to see where the time goes between apply and exec."""

    def __init__(
        self, config: KubeConfig, namespace: str, plural: str = "runs", timeline: bool = False
    ) -> None:
        self._config = config
        self._namespace = namespace
        self._plural = plural
        self._timeline = timeline
        self.started: dict[str, float] = {}
        self.phases: dict[str, str] = {}
        self.steps: dict[str, dict[str, float]] = {}
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> StartWatch:
        plurals = {"runs"} | ({self._plural} if self._timeline else set())
        for plural in sorted(plurals):
            ready = asyncio.Event()
            self._tasks.append(
                asyncio.create_task(
                    self._watch(plural, ready), name=f"watch-{plural}-{self._namespace}"
                )
            )
            await asyncio.wait_for(ready.wait(), 30)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _see(self, plural: str, obj: Body) -> None:
        if self._timeline:
            # An Intent's Run's steps are kept too, under the Run's own name.
            prefix = "" if plural == self._plural else "Run "
            steps = self.steps.setdefault(obj["metadata"]["name"], {})
            steps.setdefault(prefix + milestone(obj), time.time())
        if plural != "runs":
            return
        name = obj["metadata"]["name"]
        status = obj.get("status") or {}
        self.phases[name] = status.get("phase") or "Pending"
        if status.get("startTime") and name not in self.started:
            self.started[name] = stamp(status["startTime"])
        self._changed.set()

    async def wait(self, names: set[str], within: float) -> None:
        """Until every Run named has started (or `within` seconds passed)."""
        deadline = time.monotonic() + within
        while not names <= self.started.keys():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 1.0))

    async def wait_phases(self, names: set[str], phases: set[str], within: float) -> None:
        deadline = time.monotonic() + within
        while any(self.phases.get(n) not in phases for n in names):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 1.0))

    async def _watch(self, plural: str, ready: asyncio.Event) -> None:
        path = resource_path(GROUP, VERSION, plural, self._namespace)
        headers = {"Accept": "application/json"}
        token = self._config.bearer_token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        connector = aiohttp.TCPConnector(ssl=self._config.ssl_context())
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        async with aiohttp.ClientSession(
            connector=connector, trust_env=False, timeout=timeout
        ) as session:
            while True:
                async with session.get(self._config.server + path, headers=headers) as resp:
                    if resp.status != 200:
                        # The API server under the row's load can time its LIST out (504):
                        # list again shortly rather than end the row.
                        await asyncio.sleep(1.0)
                        continue
                    listed = await resp.json()
                for item in listed["items"]:
                    self._see(plural, item)
                version = listed["metadata"]["resourceVersion"]
                ready.set()
                params = {"watch": "1", "resourceVersion": version, "timeoutSeconds": "300"}
                async with session.get(
                    self._config.server + path, headers=headers, params=params
                ) as resp:
                    async for line in resp.content:
                        if not line.strip():
                            continue
                        event = json.loads(line)
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self._see(plural, event["object"])
                        elif event["type"] == "ERROR":
                            break  # expired: list again


class Generator:
    """Creates objects with one async client, many requests in flight."""

    def __init__(self, kube: KubeClient, namespace: str, plural: str, in_flight: int = 64):
        self._kube = kube
        self._collection = resource_path(GROUP, VERSION, plural, namespace)
        self._slots = asyncio.Semaphore(in_flight)

    async def _create(self, sample: Sample, body: Body) -> None:
        async with self._slots:
            sample.sent = time.time()
            try:
                await self._kube.create(self._collection, body)
                sample.acked = time.time()
            except (KubeApiError, aiohttp.ClientError, TimeoutError) as exc:
                sample.error = str(exc)[:200]

    async def burst(self, bodies: list[Body], run_of: Callable[[str], str]) -> list[Sample]:
        due = time.time()
        samples = [
            Sample(b["metadata"]["name"], run_of(b["metadata"]["name"]), due) for b in bodies
        ]
        await asyncio.gather(*(self._create(s, b) for s, b in zip(samples, bodies, strict=True)))
        return samples

    async def open_loop(
        self,
        body_of: Callable[[int], Body],
        run_of: Callable[[str], str],
        *,
        rate: float,
        seconds: float,
        seed: int = 17,
    ) -> list[Sample]:
        """Poisson arrivals at `rate`/s for `seconds`: each create is launched when due,
        whatever the earlier ones are doing (at most 2 * rate * seconds objects)."""
        rng = random.Random(seed)
        start = time.time()
        due, i = start, 0
        samples: list[Sample] = []
        tasks: list[asyncio.Task[None]] = []
        limit = math.ceil(rate * seconds * 2)
        while i < limit:
            due += rng.expovariate(rate)
            if due - start >= seconds:
                break
            delay = due - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            body = body_of(i)
            name = body["metadata"]["name"]
            sample = Sample(name, run_of(name), due)
            samples.append(sample)
            tasks.append(asyncio.create_task(self._create(sample, body)))
            i += 1
        await asyncio.gather(*tasks)
        return samples


# -- the API server alone ------------------------------------------------------------------

PROBE_CRD: Body = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "probes.bench.lattice.dev"},
    "spec": {
        "group": "bench.lattice.dev",
        "scope": "Namespaced",
        "names": {"plural": "probes", "singular": "probe", "kind": "Probe"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


def probes(namespace: str) -> str:
    """The collection of PROBE_CRD's objects in `namespace`."""
    return resource_path("bench.lattice.dev", "v1", "probes", namespace)


def probe(name: str) -> Body:
    """A bare object of PROBE_CRD (a small spec, no status)."""
    return {
        "apiVersion": "bench.lattice.dev/v1",
        "kind": "Probe",
        "metadata": {"name": name},
        "spec": {"command": ["true"], "note": "x" * 200},
    }


async def ceiling(
    kube: KubeClient, namespace: str, count: int, in_flight: int, prefix: str = "p"
) -> dict[str, Any]:
    """Bare custom objects (nobody watches them) created, then their status patched, as fast as
    the API server takes them with `in_flight` requests open: its ceiling on this machine."""
    collection = probes(namespace)
    slots = asyncio.Semaphore(in_flight)

    async def one(i: int) -> None:
        name = f"{prefix}{i}"
        async with slots:
            await kube.create(collection, probe(name))
            await kube.merge_patch(
                f"{collection}/{name}/status",
                {"status": {"phase": "Running", "startTime": datetime.now().isoformat()}},
            )

    began = time.monotonic()
    await asyncio.gather(*(one(i) for i in range(count)))
    elapsed = time.monotonic() - began
    return {
        "objects": count,
        "in_flight": in_flight,
        "seconds": round(elapsed, 2),
        "create_plus_status_patch_per_s": round(count / elapsed, 1),
        "writes_per_s": round(2 * count / elapsed, 1),
    }


# -- the API server's own metrics --------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")


async def apiserver_metrics(config: KubeConfig) -> dict[tuple[str, str], float]:
    """The API server's /metrics as {(name, labels): value}."""
    headers = {}
    token = config.bearer_token()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    connector = aiohttp.TCPConnector(ssl=config.ssl_context())
    async with (
        aiohttp.ClientSession(connector=connector, trust_env=False) as session,
        session.get(config.server + "/metrics", headers=headers) as resp,
    ):
        text = await resp.text()
    values: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        found = _SAMPLE.match(line)
        if found:
            values[(found.group(1), found.group(2) or "")] = float(found.group(3))
    return values


READ_VERBS = ("GET", "LIST", "WATCH")
WRITE_VERBS = ("POST", "PATCH", "PUT", "DELETE")


def _label(labels: str, name: str) -> str:
    # Not the end of a longer label's name ("resource" in "subresource").
    found = re.search(rf'(?<![\w]){name}="([^"]*)"', labels)
    return found.group(1) if found else ""


def requests_between(
    before: dict[tuple[str, str], float],
    after: dict[tuple[str, str], float],
    *,
    detailed: bool = False,
    verbs: tuple[str, ...] = WRITE_VERBS,
) -> dict[str, int]:
    """Write requests (or requests of `verbs`) the API server served between two scrapes, by
    resource (`detailed`: by resource, subresource, verb and status code, as
    `runs/status PATCH 200`)."""
    counts: dict[str, int] = {}
    for (name, labels), value in after.items():
        if name != "apiserver_request_total" or not any(f'verb="{v}"' in labels for v in verbs):
            continue
        resource = _label(labels, "resource") or "?"
        if detailed:
            sub, verb, code = (_label(labels, k) for k in ("subresource", "verb", "code"))
            resource = f"{resource}/{sub} {verb} {code}" if sub else f"{resource} {verb} {code}"
        delta = value - before.get((name, labels), 0.0)
        if delta:
            counts[resource] = counts.get(resource, 0) + int(delta)
    return counts


def webhook_latency(
    before: dict[tuple[str, str], float], after: dict[tuple[str, str], float]
) -> dict[str, dict[str, float]]:
    """Each admission webhook's calls and mean latency between two scrapes (the API server's
    `apiserver_admission_webhook_admission_duration_seconds`)."""
    base = "apiserver_admission_webhook_admission_duration_seconds"
    out: dict[str, dict[str, float]] = {}
    for (name, labels), value in after.items():
        if name != f"{base}_count":
            continue
        hook = _label(labels, "name") or "?"
        calls = value - before.get((name, labels), 0.0)
        total = after.get((f"{base}_sum", labels), 0.0) - before.get((f"{base}_sum", labels), 0.0)
        if calls:
            row = out.setdefault(hook, {"calls": 0.0, "seconds": 0.0})
            row["calls"] += calls
            row["seconds"] += total
    return {
        hook: {"calls": int(r["calls"]), "mean_ms": round(1000 * r["seconds"] / r["calls"], 2)}
        for hook, r in out.items()
    }


def kube_config(kubeconfig: Path) -> KubeConfig:
    return KubeConfig.load(kubeconfig)


__all__ = [
    "PROBE_CRD",
    "Generator",
    "LoadReport",
    "Sample",
    "StartWatch",
    "apiserver_metrics",
    "ceiling",
    "kube_config",
    "pct",
    "probe",
    "probes",
    "requests_between",
    "webhook_latency",
]


def _what(event: dict[str, Any]) -> str:
    """What a write changed, from its request body: an Event's reason; the parts of an
    object a PATCH touched (finalizers, which annotations, status); else nothing."""
    body = event.get("requestObject")
    ref = event.get("objectRef", {})
    if ref.get("resource") == "events" and isinstance(body, dict):
        return str(body.get("reason", ""))
    if ref.get("subresource") == "status":
        return _status_written(body)
    if event.get("verb") != "patch" or ref.get("subresource"):
        return ""
    if isinstance(body, list):  # a JSON patch: its operations' paths
        return ",".join(sorted({str(op.get("path", "")) for op in body if op.get("op") != "test"}))
    if not isinstance(body, dict):
        return ""
    parts = sorted(k for k in body if k != "metadata")
    meta = body.get("metadata") or {}
    parts += sorted(k for k in meta if k not in ("annotations", "resourceVersion"))
    parts += sorted(f"annotation {a.split('/')[-1]}" for a in meta.get("annotations") or {})
    return ",".join(parts)


def audit_size(audit_log: Path) -> int:
    return audit_log.stat().st_size if audit_log.exists() else 0


def _status_written(body: Any) -> str:
    """A status write's phase and Succeeded condition reason (a merge or a JSON patch)."""
    if isinstance(body, list):
        ops = [op.get("value") for op in body if op.get("path") == "/status"]
        status = ops[0] if ops and isinstance(ops[0], dict) else {}
        kind = "json "
    else:
        status = (body or {}).get("status") or {}
        kind = ""
    done = [c for c in status.get("conditions") or [] if c.get("type") == "Succeeded"]
    reason = done[0].get("reason", "") if done else ""
    return f"{kind}phase={status.get('phase', '-')} {reason}".rstrip()


def writes_by_writer(audit_log: Path, namespace: str, since: int = 0) -> dict[str, int]:
    """The writes of `namespace` in the API server's audit log (LATTICE_APISERVER_AUDIT=1) from
    byte `since` on, by who made them (user agent), resource, verb, code and what they
    changed, as `kopf | intents PATCH 200 | finalizers`."""
    counts: dict[str, int] = {}
    with audit_log.open("rb") as f:
        f.seek(since)
        lines = f.read().decode().splitlines()
    for line in lines:
        event = json.loads(line)
        ref = event.get("objectRef", {})
        if ref.get("namespace") != namespace or event.get("stage") != "ResponseComplete":
            continue
        agent = str(event.get("userAgent", "?")).split("/")[0].split(" ")[0]
        resource = ref.get("resource", "?") + (
            f"/{ref['subresource']}" if ref.get("subresource") else ""
        )
        code = event.get("responseStatus", {}).get("code", "?")
        key = f"{agent} | {resource} {event.get('verb', '?').upper()} {code} | {_what(event)}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))
