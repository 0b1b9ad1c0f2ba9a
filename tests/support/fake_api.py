"""A stand-in API server on 127.0.0.1 for CLI error tests: answers what a test tells it to,
and records every request (method, raw path with query), so a test can assert what was sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeApi:
    url: str
    answers: dict[str, tuple[int, str, bytes]] = field(default_factory=dict)
    seen: list[tuple[str, str]] = field(default_factory=list)

    def json(self, path: str, body: Any, status: int = 200) -> None:
        self.answers[path] = (status, "application/json", json.dumps(body).encode())

    def raw(self, path: str, body: bytes, content_type: str, status: int = 200) -> None:
        self.answers[path] = (status, content_type, body)


@contextmanager
def fake_api() -> Iterator[FakeApi]:
    api: FakeApi

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            api.seen.append((self.command, self.path))
            path = self.path.split("?", 1)[0]
            status, ctype, body = api.answers.get(
                path, (404, "application/json", b'{"kind":"Status","reason":"NotFound"}')
            )
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_PATCH = do_POST = do_DELETE = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    api = FakeApi(url=f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def kubeconfig(server: str, **cluster: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
