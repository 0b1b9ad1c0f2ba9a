"""The operator's TLS connections read 64 KiB at a time (lattice_operator.boot): asyncio holds
that much per open connection, 256 KiB by default."""

from __future__ import annotations

import asyncio
import ssl
from asyncio import sslproto

import pytest

from lattice_operator.boot import TLS_READ_BUFFER, lean_tls_reads


def read_buffer(loop: asyncio.AbstractEventLoop, asked: int) -> int:
    """The buffer a new TLS connection hands its socket when `asked` bytes (-1: any)."""
    waiter = loop.create_future()
    protocol = sslproto.SSLProtocol(loop, asyncio.Protocol(), ssl.create_default_context(), waiter)
    size = len(protocol.get_buffer(asked))
    # Never connected: nothing to close but its transport's flag (a warning otherwise).
    protocol._app_transport._closed = True
    return size


async def test_a_connection_opened_after_it_holds_a_smaller_read_buffer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sslproto.SSLProtocol, "max_size", sslproto.SSLProtocol.max_size)
    loop = asyncio.get_running_loop()
    assert read_buffer(loop, -1) == 256 * 1024  # asyncio's own
    lean_tls_reads()
    assert read_buffer(loop, -1) == TLS_READ_BUFFER == 64 * 1024
    assert read_buffer(loop, 1 << 20) == TLS_READ_BUFFER  # never more, whatever is asked
