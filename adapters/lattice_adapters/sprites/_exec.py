"""Exec sessions over the Sprites exec WebSocket (what the SDK's exec cannot do for us).

sprites-py 0.7.2 runs a command to completion and buffers or copies its output; it cannot
send `max_run_after_disconnect`, detach without killing, deliver signals in-band, hand out the
session id before the command ends, or tell replayed scrollback from live output. This
module speaks the wire protocol directly (`websockets`), as the reference describes:

- non-TTY: binary frames `[stream id][payload]` (0 stdin, 1 stdout, 2 stderr, 3 exit + one
  byte, 4 stdin EOF); TTY: raw binary both ways, `resize` JSON, `exit` JSON;
- `session_info` is the first text frame on every open and attach;
- on attach the session's scrollback is replayed first. The local server announces its size
  in `session_info.scrollback_bytes`; the real service does not, so there the frames that
  arrive before the first quiet gap of `REPLAY_QUIET` seconds are taken as the replay
  (best effort: consumers de-duplicate by content anyway);
- a socket that closes without an exit frame raises `ExitStatusUnknown`, never success.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from lattice_adapters.sprites._translate import translate_exception
from lattice_operator.ports.errors import (
    AdapterError,
    ExitStatusUnknown,
    InvalidRequest,
    ProtocolError,
    Timeout,
)
from lattice_operator.ports.sprites import DetachOnExit, ExecOutput

STDIN, STDOUT, STDERR, EXIT, STDIN_EOF = 0, 1, 2, 3, 4
REPLAY_QUIET = 0.1
"""Seconds of silence that end a replay whose size the server did not announce."""
SESSION_INFO_TIMEOUT = 30.0
MAX_MESSAGE = 10 * 1024 * 1024
SIGNALS = frozenset({"INT", "TERM", "HUP", "KILL", "QUIT", "USR1", "USR2", "STOP", "CONT"})

SignalFallback = Callable[[str], Awaitable[None]]


class SessionInfoMessage(BaseModel):
    """The `session_info` text frame."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["session_info"]
    session_id: str
    command: str = ""
    created: int | float | None = None
    cols: int = 0
    rows: int = 0
    is_owner: bool = False
    tty: bool = False
    scrollback_bytes: int | None = None
    """Local-server extension: how many bytes of replay follow (absent at Fly.io)."""


class WsExecSession(DetachOnExit):
    """One attachment to an exec session; implements `lattice_operator.ports.ExecSession`."""

    def __init__(
        self,
        ws: ClientConnection,
        info: SessionInfoMessage,
        *,
        early: list[bytes],
        attached: bool,
        what: str,
        secret: str,
        signal_fallback: SignalFallback | None,
    ) -> None:
        self._ws = ws
        self._info = info
        self._what = what
        self._secret = secret
        self._signal_fallback = signal_fallback
        self._pending: deque[ExecOutput] = deque()
        self._exit_code: int | None = None
        self._done = False
        self._replay_left = info.scrollback_bytes or 0
        # Without an announced size, an attach replays until the first quiet gap.
        self._replay_by_silence = attached and info.scrollback_bytes is None
        for frame in early:
            self._on_binary(frame)
        caps = ws.response.headers.get("X-Sprite-Capabilities", "") if ws.response else ""
        self._inband_signals = "signal" in {c.strip() for c in caps.split(",")}

    @classmethod
    async def open(
        cls,
        url: str,
        headers: dict[str, str],
        *,
        attached: bool,
        what: str,
        secret: str,
        logger: logging.Logger,
        open_timeout: float,
        signal_fallback: SignalFallback | None = None,
    ) -> WsExecSession:
        """Connect, wait for `session_info`, and return the open session."""
        try:
            ws = await connect(
                url,
                additional_headers=headers,
                open_timeout=open_timeout,
                ping_interval=15,
                ping_timeout=45,
                # The live server holds the socket ~5 s after the exit frame: do not wait.
                close_timeout=0,
                max_size=MAX_MESSAGE,
                compression=None,
                proxy=None,
                user_agent_header=None,
                logger=logger,
            )
        except Exception as exc:
            raise translate_exception(exc, what=what, secret=secret) from None
        early: list[bytes] = []
        try:
            info = await asyncio.wait_for(_read_session_info(ws, early), SESSION_INFO_TIMEOUT)
        except TimeoutError:
            await ws.close()
            raise Timeout(f"{what}: no session_info within {SESSION_INFO_TIMEOUT:.0f}s") from None
        except AdapterError:
            await ws.close()
            raise
        except Exception as exc:
            await ws.close()
            raise translate_exception(exc, what=what, secret=secret) from None
        return cls(
            ws,
            info,
            early=early,
            attached=attached,
            what=what,
            secret=secret,
            signal_fallback=signal_fallback,
        )

    # -- ExecSession ----------------------------------------------------------------------
    @property
    def session_id(self) -> str:
        return self._info.session_id

    @property
    def tty(self) -> bool:
        return self._info.tty

    @property
    def exit_code(self) -> int | None:
        return self._exit_code

    @property
    def command(self) -> str:
        """The command line the server reports for this session."""
        return self._info.command

    def __aiter__(self) -> WsExecSession:
        return self

    async def __anext__(self) -> ExecOutput:
        while True:
            if self._pending:
                return self._pending.popleft()
            if self._done:
                raise StopAsyncIteration
            message = await self._receive()
            try:
                if isinstance(message, str):
                    self._on_text(message)
                else:
                    self._on_binary(message)
            except ProtocolError:
                self._done = True
                await self._ws.close()
                raise
            if self._exit_code is not None and not self._done:
                self._done = True
                # The exit frame is the end: close now rather than wait for the server.
                await self._ws.close()

    async def write_stdin(self, data: bytes) -> None:
        await self._send(data if self.tty else bytes([STDIN]) + data)

    async def close_stdin(self) -> None:
        # A TTY has no EOF frame; Ctrl-D as data lets the line discipline see end-of-file.
        await self._send(b"\x04" if self.tty else bytes([STDIN_EOF]))

    async def resize(self, cols: int, rows: int) -> None:
        if not self.tty:
            raise InvalidRequest(f"{self._what}: resize needs a TTY session")
        await self._send(json.dumps({"type": "resize", "cols": cols, "rows": rows}))

    async def signal(self, name: str) -> None:
        short = name.upper().removeprefix("SIG")
        if short not in SIGNALS:
            raise InvalidRequest(f"{self._what}: unknown signal {name!r}")
        if self._inband_signals or self._signal_fallback is None:
            await self._send(json.dumps({"type": "signal", "signal": short}))
        else:
            await self._signal_fallback(f"SIG{short}")

    async def wait(self) -> int:
        async for _ in self:
            pass
        if self._exit_code is None:  # detached earlier: the outcome was never seen
            raise ExitStatusUnknown(f"{self._what}: detached", session_id=self.session_id)
        return self._exit_code

    async def detach(self) -> None:
        self._done = True
        await self._ws.close()

    def __repr__(self) -> str:
        return f"WsExecSession(session_id={self.session_id!r}, tty={self.tty})"

    # -- frames ---------------------------------------------------------------------------
    async def _receive(self) -> str | bytes:
        try:
            if self._replay_by_silence:
                try:
                    return await asyncio.wait_for(self._ws.recv(), REPLAY_QUIET)
                except TimeoutError:
                    self._replay_by_silence = False
            return await self._ws.recv()
        except ConnectionClosed as exc:
            self._done = True
            raise ExitStatusUnknown(
                f"{self._what}: socket closed before the exit status ({_close_reason(exc)})",
                session_id=self.session_id,
            ) from None
        except Exception as exc:
            self._done = True
            await self._ws.close()
            raise ExitStatusUnknown(
                f"{self._what}: socket failed before the exit status "
                f"({translate_exception(exc, what='exec', secret=self._secret)})",
                session_id=self.session_id,
            ) from None

    def _on_text(self, message: str) -> None:
        try:
            data: Any = json.loads(message)
        except ValueError:
            return
        if not isinstance(data, dict):
            return
        if data.get("type") == "exit" and self._exit_code is None:
            code = data.get("exit_code")
            if not isinstance(code, int):
                raise ProtocolError(f"{self._what}: exit message without an exit code")
            self._exit_code = _clamp(code)

    def _on_binary(self, frame: bytes) -> None:
        if self.tty:
            self._emit("stdout", frame)
            return
        if not frame:
            return
        stream, payload = frame[0], frame[1:]
        if stream == STDOUT:
            self._emit("stdout", payload)
        elif stream == STDERR:
            self._emit("stderr", payload)
        elif stream == EXIT and self._exit_code is None:
            if len(payload) != 1:
                raise ProtocolError(f"{self._what}: exit frame with {len(payload)} bytes")
            self._exit_code = payload[0]
        # Unknown stream ids (e.g. 0x05 "ready" of old servers) are ignored.

    def _emit(self, stream: Literal["stdout", "stderr"], data: bytes) -> None:
        if not data:
            return
        if self._replay_left > 0:
            replayed, data = data[: self._replay_left], data[self._replay_left :]
            self._replay_left -= len(replayed)
            self._pending.append(ExecOutput(stream=stream, data=replayed, replay=True))
            if not data:
                return
        replay = self._replay_by_silence
        self._pending.append(ExecOutput(stream=stream, data=data, replay=replay))

    async def _send(self, message: str | bytes) -> None:
        if self._done:
            raise InvalidRequest(f"{self._what}: the session is no longer attached")
        try:
            await self._ws.send(message)
        except ConnectionClosed:
            # The session ended or the socket dropped: iterating reports which.
            return
        except Exception as exc:
            raise translate_exception(exc, what=self._what, secret=self._secret) from None


async def _read_session_info(ws: ClientConnection, early: list[bytes]) -> SessionInfoMessage:
    while True:
        message = await ws.recv()
        if isinstance(message, bytes):
            early.append(message)
            continue
        try:
            data = json.loads(message)
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("type") == "session_info":
            if "session_id" in data:
                data["session_id"] = str(data["session_id"])
            try:
                return SessionInfoMessage.model_validate(data)
            except ValidationError as exc:
                raise ProtocolError(f"malformed session_info: {exc.error_count()} errors") from None


def _clamp(code: int) -> int:
    return code if 0 <= code <= 255 else 255


def _close_reason(exc: ConnectionClosed) -> str:
    if exc.rcvd is not None:
        return f"close code {exc.rcvd.code}"
    return "no close frame"


__all__ = ["SessionInfoMessage", "WsExecSession"]
