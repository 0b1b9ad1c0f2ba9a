"""Exec over plain HTTP: `POST /v1/sprites/{name}/exec` (non-TTY, no WebSocket).

The answer streams the same `[id][payload]` frames as the non-TTY exec socket (1 stdout,
2 stderr, 3 exit + one byte) but with no length prefix: each frame is its own HTTP chunk
(the JS SDK's wire form). httpx does not report chunk ends, so this reads with aiohttp,
whose `iter_chunks` does: a frame is what arrives up to a chunk's end, however the network
split it.

No session id, no attach, no signal: the process belongs to the request. A stream that
ends without an exit frame raises `ExitStatusUnknown` (never success). Only a connection
that never reached the server is retryable (`maybe_executed=False`).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence

import aiohttp

from lattice_adapters.sprites._translate import error_from_response, redact
from lattice_operator.ports.errors import (
    AdapterError,
    ExitStatusUnknown,
    InvalidRequest,
    ProtocolError,
    Timeout,
    TransportError,
)
from lattice_operator.ports.sprites import DetachOnExit, ExecOutput

STDOUT, STDERR, EXIT = 1, 2, 3
MAX_STDIN = 10 * 1024 * 1024
"""The endpoint refuses larger request bodies (413)."""


def exec_post_params(
    argv: Sequence[str], env: Mapping[str, str] | None, workdir: str | None, stdin: bool
) -> list[tuple[str, str]]:
    """The query of an HTTP exec (no `tty`, `id`, `detachable` or `cc`: the server refuses
    them there)."""
    if not argv:
        raise InvalidRequest("exec needs a command")
    params = [("cmd", arg) for arg in argv]
    params.append(("path", argv[0]))
    params += [("env", f"{k}={v}") for k, v in (env or {}).items()]
    if workdir:
        params.append(("dir", workdir))
    params.append(("stdin", "true" if stdin else "false"))
    return params


class PostExecSession(DetachOnExit):
    """One HTTP exec: its response body, read frame by frame (an `ExecSession`)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        response: aiohttp.ClientResponse,
        *,
        what: str,
        secret: str,
    ) -> None:
        self._http = session
        self._response = response
        self._what = what
        self._secret = secret
        self._id = f"post-{uuid.uuid4().hex[:16]}"
        self._exit_code: int | None = None
        self._closed = False

    @classmethod
    async def open(
        cls,
        url: str,
        params: list[tuple[str, str]],
        headers: Mapping[str, str],
        *,
        body: bytes | None,
        what: str,
        secret: str,
        connect_timeout: float,
    ) -> PostExecSession:
        if body is not None and len(body) > MAX_STDIN:
            raise InvalidRequest(f"{what}: stdin is larger than {MAX_STDIN} bytes")
        # No read timeout: the command runs as long as it runs (the Run's timeout bounds it).
        timeout = aiohttp.ClientTimeout(total=None, connect=connect_timeout, sock_read=None)
        http = aiohttp.ClientSession(timeout=timeout, trust_env=False)
        try:
            response = await http.post(
                url,
                params=params,
                headers={**headers, "Content-Type": "application/octet-stream"},
                data=body or b"",
            )
        except aiohttp.ClientConnectorError as exc:
            await http.close()
            text = redact(f"{what}: {type(exc).__name__}: {exc}", secret)
            raise TransportError(text, maybe_executed=False) from None
        except TimeoutError:
            await http.close()
            raise Timeout(f"{what}: no answer within {connect_timeout:g}s") from None
        except aiohttp.ClientError as exc:
            await http.close()
            raise TransportError(redact(f"{what}: {type(exc).__name__}: {exc}", secret)) from None
        if response.status != 200:
            content = await response.read()
            response.release()
            await http.close()
            raise error_from_response(
                response.status,
                {k.lower(): v for k, v in response.headers.items()},
                content,
                what=what,
                secret=secret,
            )
        return cls(http, response, what=what, secret=secret)

    @property
    def session_id(self) -> str:
        """A local id (the endpoint names no session): `post-…`."""
        return self._id

    @property
    def tty(self) -> bool:
        return False

    @property
    def exit_code(self) -> int | None:
        return self._exit_code

    def __aiter__(self) -> AsyncIterator[ExecOutput]:
        return self._frames()

    async def _frames(self) -> AsyncIterator[ExecOutput]:
        buffer = b""
        try:
            async for data, end in self._response.content.iter_chunks():
                buffer += data
                if not end or not buffer:
                    continue
                frame, buffer = buffer, b""
                kind, payload = frame[0], frame[1:]
                if kind == EXIT:
                    if len(payload) != 1:
                        raise ProtocolError(f"{self._what}: malformed exit frame")
                    self._exit_code = payload[0]
                    return
                if kind in (STDOUT, STDERR):
                    yield ExecOutput(stream="stdout" if kind == STDOUT else "stderr", data=payload)
                else:
                    raise ProtocolError(f"{self._what}: unknown frame type {kind}")
        except AdapterError:
            raise
        except (aiohttp.ClientError, ConnectionError) as exc:
            text = redact(f"{self._what}: {type(exc).__name__}: {exc}", self._secret)
            raise ExitStatusUnknown(text) from None
        finally:
            await self.detach()
        if self._exit_code is None:
            raise ExitStatusUnknown(f"{self._what}: the answer ended without an exit frame")

    async def write_stdin(self, data: bytes) -> None:
        raise InvalidRequest("HTTP exec takes its stdin in the request body")

    async def close_stdin(self) -> None:
        return None

    async def resize(self, cols: int, rows: int) -> None:
        raise InvalidRequest("HTTP exec has no terminal")

    async def signal(self, name: str) -> None:
        raise InvalidRequest("HTTP exec takes no signals: close it to stop the command")

    async def wait(self) -> int:
        async for _ in self._frames():
            pass
        if self._exit_code is None:
            raise ExitStatusUnknown(f"{self._what}: the answer ended without an exit frame")
        return self._exit_code

    async def detach(self) -> None:
        """Close the request: the server stops the command (it belongs to the request)."""
        if self._closed:
            return
        self._closed = True
        self._response.close()
        await self._http.close()


__all__ = ["MAX_STDIN", "PostExecSession", "exec_post_params"]
