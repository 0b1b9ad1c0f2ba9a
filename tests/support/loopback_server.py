"""A small TCP server on the host's 127.0.0.1 for egress tests and benchmarks.

    with LoopbackServer() as server:
        server.port

By the first line a client sends:
- `PING` — echoes everything after it until the client closes;
- `HOLD` — answers `held` and keeps the connection until the client closes;
- `SOURCE <n>` — sends n bytes of zeros, then closes;
- anything else is read as an HTTP request head and answered `200`
  `hello from the host: <request line>` (Connection: close).

Each connection is served by a thread of its own; `connections` counts those accepted.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from types import TracebackType

_ZEROS = bytes(256 * 1024)


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        with self.server.lock:
            self.server.connections += 1
        first = self.rfile.readline(65536)
        command = first.split()
        if command[:1] == [b"PING"]:
            self.wfile.write(first)
            self.wfile.flush()
            self._echo()
        elif command[:1] == [b"HOLD"]:
            self.wfile.write(b"held\n")
            self.wfile.flush()
            while self.request.recv(65536):
                pass
        elif command[:1] == [b"SOURCE"] and len(command) == 2:
            left = int(command[1])
            while left > 0:
                chunk = _ZEROS[: min(left, len(_ZEROS))]
                self.wfile.write(chunk)
                left -= len(chunk)
        else:
            while self.rfile.readline(65536) not in (b"\r\n", b"\n", b""):
                pass
            body = b"hello from the host: " + first.strip() + b"\n"
            self.wfile.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )

    def _echo(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.connections = 0
        self.lock = threading.Lock()


class LoopbackServer:
    """The server, serving from a thread of its own while the block runs."""

    def __init__(self) -> None:
        self._server = _Server()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def connections(self) -> int:
        return self._server.connections

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def reachable(port: int) -> bool:
    """Whether the host itself reaches the server (a sanity check for tests)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            return True
    except OSError:
        return False


__all__ = ["LoopbackServer", "reachable"]
