"""The operator's HTTP doors against hostile clients (issue 27), served for real: the stream
and /metrics close a connection that does not send its request, answer 503 to one over
their bound, and a stream client sending garbage tokens gets 429 instead of costing the
API server a TokenReview each."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from lattice_devtools.localcluster.controlplane import free_port
from tests.support.cluster import Cluster
from tests.support.sprites_server import LocalSprites
from tests.support.stack import Stack, operator_stack

WAIT = 30.0
"""Bound on every wait for the operator to act (its limits here are 1-2 s)."""
STREAM_MAX, METRICS_MAX = 3, 2


@pytest.fixture(scope="module")
def doors(
    cluster: Cluster, local_sprites: LocalSprites, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, int]]:
    port = free_port()
    log_dir: Path = tmp_path_factory.mktemp("operator-doors")
    limits = {"header_timeout": 1.0, "idle_timeout": 2.0}
    with operator_stack(
        cluster,
        local_sprites,
        log_dir,
        stream={
            "port": port,
            "connections": {**limits, "max_connections": STREAM_MAX},
            "token_reviews_per_minute": 6,
            "token_reviews_burst": 2,
        },
        metrics_connections={**limits, "max_connections": METRICS_MAX},
    ) as stack:
        yield stack, port
        assert stack.operator.alive(), stack.operator.log()[-5000:]


def _connect(port: int) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    conn.settimeout(WAIT)
    return conn


def _closed_by_server(conn: socket.socket) -> bool:
    try:
        while conn.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionError:
        pass
    return True


def test_half_sent_and_silent_connections_are_closed(doors: tuple[Stack, int]) -> None:
    stack, stream_port = doors
    for port in (stream_port, stack.metrics_port):
        with _connect(port) as silent, _connect(port) as half:
            half.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            assert _closed_by_server(half), port
            assert _closed_by_server(silent), port


def test_a_connection_over_the_bound_is_answered_503(doors: tuple[Stack, int]) -> None:
    stack, stream_port = doors
    for port, bound in ((stream_port, STREAM_MAX), (stack.metrics_port, METRICS_MAX)):
        with ExitStack() as held:
            for _ in range(bound):
                held.enter_context(_connect(port))
            with _connect(port) as extra:
                extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                answer = extra.recv(4096)
        assert answer.startswith(b"HTTP/1.1 503 "), (port, answer)
    # Served as before once the held connections are gone.
    metrics = httpx.get(f"http://127.0.0.1:{stack.metrics_port}/metrics", trust_env=False)
    assert metrics.status_code == 200
    assert "lattice_leader" in metrics.text


def test_garbage_tokens_get_429_not_a_token_review_each(doors: tuple[Stack, int]) -> None:
    _, stream_port = doors
    answers = [
        httpx.get(
            f"http://127.0.0.1:{stream_port}/events",
            headers={"Authorization": f"Bearer garbage-{n}"},
            trust_env=False,
            timeout=WAIT,
        )
        for n in range(4)
    ]
    assert [a.status_code for a in answers] == [401, 401, 429, 429]
    assert "too many unknown tokens" in answers[2].text
    assert answers[2].headers["Retry-After"] == "10"
