"""Hostile requests to the GitHub webhook door (issue 27), over real sockets.

The receiver is served as the operator serves it (`serve`, its limits from ForgeSettings,
small ones here) against the suite's kube-apiserver; the client is a raw socket, so a
delivery can arrive in several writes with pauses, half a request can be sent, and bytes
no HTTP library would send can be. Each test is a request that, before the fix, was
refused though signed (401), made a new approval from a replay, answered 500 with a
traceback, or held the connection open (aiohttp's keep-alive is an hour). Only 127.0.0.1;
every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web

from lattice_adapters.kube import KubeClient, KubeConfig, resource_path
from lattice_devtools.localcluster.controlplane import free_port
from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.api.v1alpha1.githubrepository import GitHubRepository
from lattice_operator.api.v1alpha1.resources import INTENTS
from lattice_operator.clock import SystemClock
from lattice_operator.forge.builders import DELIVERY_ANNOTATION, plan_intent, plan_name
from lattice_operator.forge.webhooks import route, sign
from lattice_operator.handlers.github_webhooks import WebhookReceiver, serve
from lattice_operator.metrics import REGISTRY
from lattice_operator.reconcilers.approvals import (
    RECORDS,
    REQUEST,
    parse_request,
    raw_spec_digest,
    record_for,
    records_json,
)
from lattice_operator.settings import ForgeSettings
from tests.support.cluster import Cluster
from tests.support.github.fixtures import webhook_example

pytestmark = pytest.mark.e2e

REPO = "octo/app"
SECRET = b"hostile-webhook-secret"
LIMIT = 64 * 1024
LABEL = "lattice-approved"
OPERATOR = "system:serviceaccount:lattice:operator"
ANSWER_WITHIN = 30.0
"""Bound on every read of an answer (a safety net: no assertion is about time)."""


@dataclass
class Door:
    port: int
    path: str
    runner: web.AppRunner


@pytest.fixture(autouse=True)
def no_traceback(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Whatever the request, aiohttp logs no unhandled error (the 500's traceback)."""
    with caplog.at_level(logging.ERROR, logger="aiohttp"):
        yield
    errors = [r for r in caplog.records if r.name.startswith("aiohttp") and r.exc_info]
    assert errors == [], [r.getMessage() for r in errors]


@pytest.fixture
async def kube(cluster: Cluster, namespace: str) -> AsyncIterator[KubeClient]:
    cluster.kubectl(
        "create", "secret", "generic", "hook", "-n", namespace,
        f"--from-literal=secret={SECRET.decode()}",
    )  # fmt: skip
    async with KubeClient(KubeConfig.load(cluster.kubeconfig)) as client:
        yield client


def _repository(namespace: str) -> GitHubRepository:
    return GitHubRepository.model_validate(
        {
            "metadata": {"name": "app", "namespace": namespace},
            "spec": {
                "repo": REPO,
                "webhookSecretRef": {"name": "hook", "key": "secret"},
                "agent": {"spriteRef": {"name": "box"}, "command": ["agent"]},
                "approval": {"label": LABEL, "approvers": [{"github": "octocat", "user": "alice"}]},
            },
        }
    )


@pytest.fixture
async def open_door(
    kube: KubeClient, namespace: str
) -> AsyncIterator[Callable[..., Awaitable[Door]]]:
    """Starts a receiver (a new one each call: a restart forgets what it remembered)."""
    runners: list[web.AppRunner] = []
    repository = _repository(namespace)

    async def start(**limits: Any) -> Door:
        settings = ForgeSettings.model_validate(
            {
                "webhook_host": "127.0.0.1",
                "webhook_port": free_port(),
                "max_payload_bytes": LIMIT,
                "webhook_idle_timeout": 0.5,
                "webhook_body_timeout": 0.5,
                **limits,
            }
        )
        receiver = WebhookReceiver(
            kube=kube,
            clock=SystemClock(),
            repositories=lambda ns, name: repository if (ns, name) == (namespace, "app") else None,
            forge=lambda: None,
            max_bytes=settings.max_payload_bytes,
            body_timeout=settings.webhook_body_timeout,
        )
        runner = await serve(receiver, settings)
        runners.append(runner)
        return Door(settings.webhook_port, f"/github/{namespace}/app", runner)

    try:
        yield start
    finally:
        for runner in runners:
            await runner.cleanup()


def _payload(event: str, action: str, number: int, sender: str = "reporter") -> dict[str, Any]:
    payload = webhook_example(event, action)
    payload["repository"].update(full_name=REPO, name="app")
    payload["sender"].update(login=sender, type="User")
    payload["issue"]["number"] = number
    payload["issue"].pop("pull_request", None)
    return payload


def _padded(payload: dict[str, Any], size: int) -> bytes:
    """The payload's JSON, exactly `size` bytes long (a padding field takes up the rest)."""
    bare = json.dumps({**payload, "padding": ""}).encode()
    body = json.dumps({**payload, "padding": "x" * (size - len(bare))}).encode()
    assert len(body) == size
    return body


def _head(door: Door, event: str, headers: dict[str, bytes], length: int | None) -> bytes:
    lines = [
        f"POST {door.path} HTTP/1.1".encode(),
        b"Host: 127.0.0.1",
        b"Connection: close",
        b"Content-Type: application/json",
        b"X-GitHub-Event: " + event.encode(),
        b"Transfer-Encoding: chunked" if length is None else b"Content-Length: %d" % length,
        *(name.encode() + b": " + value for name, value in headers.items()),
    ]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _split(data: bytes, parts: int) -> list[bytes]:
    step = -(-len(data) // parts)
    return [data[i : i + step] for i in range(0, len(data), step)]


async def _exchange(door: Door, pieces: list[bytes]) -> tuple[int, dict[str, Any]]:
    """Writes the pieces with a pause between them, then reads the answer to its end."""
    reader, writer = await asyncio.open_connection("127.0.0.1", door.port)
    try:
        for piece in pieces:
            try:
                writer.write(piece)
                await writer.drain()
            except ConnectionError:
                break  # answered and closed before the rest was sent (a 413)
            await asyncio.sleep(0.05)
        async with asyncio.timeout(ANSWER_WITHIN):
            raw = await reader.read()
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body) if body else {}


async def _deliver(
    door: Door,
    event: str,
    body: bytes,
    *,
    parts: int = 1,
    chunked: bool = False,
    delivery: bytes = b"d-1",
    signature: bytes | None = None,
) -> tuple[int, dict[str, Any]]:
    headers = {
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": signature or sign(SECRET, body).encode(),
    }
    pieces = _split(body, parts)
    if chunked:
        pieces = [b"%x\r\n%s\r\n" % (len(p), p) for p in pieces] + [b"0\r\n\r\n"]
    head = _head(door, event, headers, None if chunked else len(body))
    return await _exchange(door, [*_split(head, 2), *pieces])


def _counted(outcome: str, event: str = "issues") -> float:
    labels = {"event": event, "outcome": outcome}
    return REGISTRY.get_sample_value("lattice_github_webhook_deliveries_total", labels) or 0.0


# 1. The whole body is verified, however it arrives, within the size limit.


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_signed_delivery_sent_in_several_writes_is_accepted(
    open_door: Callable[..., Awaitable[Door]], kube: KubeClient, namespace: str, chunked: bool
) -> None:
    # Not about slowness: the body deadline of the slow-body tests (0.5 s) was overrun by a
    # body in pieces on a loaded machine (soak).
    door = await open_door(webhook_body_timeout=30)
    body = _padded(_payload("issues", "opened", 7), 20_000)
    status, answer = await _deliver(door, "issues", body, parts=6, chunked=chunked)
    assert (status, answer["outcome"]) == (201, "created"), answer
    intent = await kube.get(resource_path(*INTENTS.gvp, namespace, answer["detail"]))
    assert intent["spec"]["params"]["issueTriage"]["issueNumber"] == 7


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_body_at_the_limit_is_read_whole_and_one_byte_more_is_refused(
    open_door: Callable[..., Awaitable[Door]], chunked: bool
) -> None:
    door = await open_door(webhook_body_timeout=30)  # (as above)
    payload = _payload("issues", "opened", 8)
    status, answer = await _deliver(
        door, "issues", _padded(payload, LIMIT), parts=8, chunked=chunked
    )
    assert (status, answer["outcome"]) == (201, "created"), answer
    status, answer = await _deliver(
        door, "issues", _padded(payload, LIMIT + 1), parts=8, chunked=chunked, delivery=b"d-2"
    )
    assert (status, answer["outcome"]) == (413, "too_large"), answer


# 2. A replayed approval label is the same decision: answered, counted, not recorded again.


async def _plan(kube: KubeClient, namespace: str, number: int) -> str:
    """The issue_plan_approve Intent a triage of issue `number` would have proposed."""
    triage = route("issues", "d", _payload("issues", "opened", number), _repository(namespace))
    manifest = triage.manifest
    manifest["metadata"]["uid"] = "00000000-0000-0000-0000-000000000001"
    plan = plan_intent(Intent.model_validate(manifest), "1. do it")
    plan["metadata"].pop("ownerReferences")
    await kube.create(resource_path(*INTENTS.gvp, namespace), plan)
    return str(plan["metadata"]["name"])


async def _record_as_the_admission_webhook_does(kube: KubeClient, path: str) -> None:
    """What the operator's admission webhook makes of the relayed request (its own pure
    functions): the record, keyed on the request's forgeRef, and the request removed."""
    intent = await kube.get(path)
    annotations = intent["metadata"]["annotations"]
    request = parse_request(annotations)
    assert request is not None
    digest = raw_spec_digest(intent["spec"])
    now = datetime.now(UTC)
    records = record_for(request, {"username": OPERATOR}, [], now, digest, operator=OPERATOR)
    patch = {"metadata": {"annotations": {RECORDS: records_json(records), REQUEST: None}}}
    await kube.merge_patch(path, patch)


async def test_a_replayed_label_approval_is_answered_once_and_counted(
    open_door: Callable[..., Awaitable[Door]], kube: KubeClient, namespace: str
) -> None:
    door = await open_door()
    name = await _plan(kube, namespace, 11)
    assert name == plan_name(REPO, 11)
    path = resource_path(*INTENTS.gvp, namespace, name)
    labeled = _payload("issues", "labeled", 11, sender="octocat")
    labeled["label"]["name"] = LABEL
    body = json.dumps(labeled).encode()

    status, answer = await _deliver(door, "issues", body, delivery=b"captured")
    assert (status, answer["outcome"]) == (200, "approved"), answer
    await _record_as_the_admission_webhook_does(kube, path)
    recorded = await kube.get(path)

    # The captured event sent again under new delivery ids (the header is not signed).
    replays = _counted("duplicate")
    for n in range(3):
        status, answer = await _deliver(door, "issues", body, delivery=b"replay-%d" % n)
        assert (status, answer["outcome"]) == (200, "duplicate"), answer
    assert _counted("duplicate") == replays + 3

    # A receiver that remembers nothing (a restart) finds the record made for the event.
    fresh = await open_door()
    status, answer = await _deliver(fresh, "issues", body, delivery=b"after-restart")
    assert (status, answer["outcome"]) == (200, "duplicate"), answer
    after = await kube.get(path)
    assert after["metadata"]["resourceVersion"] == recorded["metadata"]["resourceVersion"]
    assert REQUEST not in after["metadata"]["annotations"]  # nothing relayed again


# 3. Wrongly typed signed fields and a non-ASCII signature: 400 naming the field.


def _bad(change: dict[str, Any]) -> bytes:
    return json.dumps({**_payload("issues", "opened", 12), **change}).encode()


def _issue_with(number: str) -> bytes:
    good = json.dumps(_payload("issues", "opened", 12)).encode()
    return good.replace(b'"number": 12', b'"number": ' + number.encode(), 1)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (_bad({"repository": "octo/app"}), "repository"),
        (_bad({"issue": "#12"}), "issue"),
        (_bad({"sender": ["octocat"]}), "sender"),
        (_issue_with('"abc"'), "issue.number"),
        (_issue_with("1e400"), "issue.number"),
        (_bad({"label": {"name": {"nested": True}}}), "label.name"),
        (b'{"deep": ' + b"[" * 5000 + b"]" * 5000 + b"}", "the body"),
        (b"\xff not JSON", "the body"),
    ],
    ids=["repository", "issue", "sender", "number-abc", "number-1e400", "label", "deep", "bytes"],
)
async def test_a_signed_payload_of_the_wrong_shape_is_a_400_naming_the_field(
    open_door: Callable[..., Awaitable[Door]], body: bytes, field: str
) -> None:
    door = await open_door()
    status, answer = await _deliver(door, "issues", body)
    assert (status, answer["outcome"]) == (400, "bad_payload"), answer
    assert answer["detail"].startswith(f"{field}: "), answer


async def test_a_non_ascii_signature_header_is_a_400_naming_it(
    open_door: Callable[..., Awaitable[Door]],
) -> None:
    door = await open_door()
    body = json.dumps(_payload("issues", "opened", 13)).encode()
    status, answer = await _deliver(door, "issues", body, signature=b"sha256=\xff\xfe\xc3\xa9")
    assert (status, answer["outcome"]) == (400, "bad_header"), answer
    assert answer["detail"].startswith("X-Hub-Signature-256"), answer


async def test_a_non_ascii_delivery_id_is_not_written_anywhere(
    open_door: Callable[..., Awaitable[Door]], kube: KubeClient, namespace: str
) -> None:
    door = await open_door()
    body = json.dumps(_payload("issues", "opened", 14)).encode()
    status, answer = await _deliver(door, "issues", body, delivery=b"\xff\xfe-id")
    assert (status, answer["outcome"]) == (201, "created"), answer
    intent = await kube.get(resource_path(*INTENTS.gvp, namespace, answer["detail"]))
    assert intent["metadata"]["annotations"][DELIVERY_ANNOTATION] == ""


# 4. Half-sent requests and idle connections are let go; connections are bounded.


async def _closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection."""
    async with asyncio.timeout(ANSWER_WITHIN):
        return await reader.read()


@pytest.mark.parametrize(
    "half",
    [b"POST /github/ns/app HT", b"POST /github/ns/app HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le"],
    ids=["request-line", "headers"],
)
async def test_a_half_sent_request_head_is_disconnected(
    open_door: Callable[..., Awaitable[Door]], half: bytes
) -> None:
    door = await open_door()
    reader, writer = await asyncio.open_connection("127.0.0.1", door.port)
    try:
        writer.write(half)
        await writer.drain()
        assert await _closed_by_server(reader) == b""
    finally:
        writer.close()


async def test_a_half_sent_body_is_answered_408_and_disconnected(
    open_door: Callable[..., Awaitable[Door]],
) -> None:
    door = await open_door()
    reader, writer = await asyncio.open_connection("127.0.0.1", door.port)
    try:
        writer.write(_head(door, "issues", {}, 1000) + b'{"action": ')
        await writer.drain()
        answer = await _closed_by_server(reader)
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert b'"slow_body"' in answer
    finally:
        writer.close()


async def test_an_idle_keep_alive_connection_is_disconnected(
    open_door: Callable[..., Awaitable[Door]],
) -> None:
    door = await open_door()
    body = json.dumps({"zen": "hi", "repository": {"full_name": REPO}}).encode()
    head = _head(door, "ping", {"X-Hub-Signature-256": sign(SECRET, body).encode()}, len(body))
    head = head.replace(b"Connection: close", b"Connection: keep-alive")
    reader, writer = await asyncio.open_connection("127.0.0.1", door.port)
    try:
        writer.write(head + body)
        await writer.drain()
        answer = await _closed_by_server(reader)  # the answer, then the idle close
        assert answer.startswith(b"HTTP/1.1 200 "), answer
        assert b'"outcome": "ignored"' in answer
    finally:
        writer.close()


async def test_connections_over_the_bound_are_answered_503_and_closed(
    open_door: Callable[..., Awaitable[Door]],
) -> None:
    door = await open_door(webhook_idle_timeout=60, webhook_max_connections=3)
    held = [await asyncio.open_connection("127.0.0.1", door.port) for _ in range(3)]
    try:
        server = door.runner.server
        assert server is not None
        for _ in range(200):  # bounded: until the server has accepted the three
            if len(server.connections) == 3:
                break
            await asyncio.sleep(0.01)
        busy = _counted("busy", event="other")
        reader, writer = await asyncio.open_connection("127.0.0.1", door.port)
        try:
            # The 503 is written at once; the connection is closed once the request is in
            # (closing before would reset it and could lose the answer).
            writer.write(b"POST /github/ns/repo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
            answer = await _closed_by_server(reader)
        finally:
            writer.close()
        assert answer.startswith(b"HTTP/1.1 503 "), answer
        assert _counted("busy", event="other") == busy + 1
    finally:
        for _, held_writer in held:
            held_writer.close()
