"""The admission port's doors, on the server itself (127.0.0.1): a caller without the
required client certificate fails the handshake, one with a certificate of another name is
refused, a request above the size limit is refused before it is read, and a request that
takes too long is cut off."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from lattice_adapters import tls

# handlers/_webhook_server (the admission port's server) is the module under test.
from lattice_operator.handlers._webhook_server import GuardedWebhookServer
from lattice_operator.settings import WebhookSettings

CALLER = "kube-apiserver-webhook-client"


@dataclass
class Served:
    url: str
    server_ca: bytes
    pki: Path


async def _slow_or_echo(request: Any, **_: Any) -> dict[str, Any]:
    if request.get("slow"):
        await asyncio.sleep(30)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {}}


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    client_ca, client_key, client_cert = tls.make_ca("webhook-client-ca")
    client_ca.write(tmp_path, "client-ca")
    tls.client_cert(client_key, client_cert, CALLER).write(tmp_path, "caller")
    tls.client_cert(client_key, client_cert, "someone-else").write(tmp_path, "other")
    ca, ca_key, ca_cert = tls.make_ca("webhook-ca")
    cert, key = tls.serving_cert(ca_key, ca_cert, ("127.0.0.1",)).write(tmp_path, "tls")
    settings = WebhookSettings(
        client_ca_file=str(tmp_path / "client-ca.crt"),
        client_names=(CALLER,),
        max_body_bytes=64 * 1024,
        request_timeout=0.5,
    )
    server = GuardedWebhookServer(
        settings, addr="127.0.0.1", port=0, certfile=str(cert), pkeyfile=str(key)
    )
    configs = server(_slow_or_echo)
    config = await anext(configs)
    try:
        yield Served(str(config["url"]), ca.cert_pem, tmp_path)
    finally:
        await configs.aclose()


def _context(served: Served, who: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=served.server_ca.decode())
    if who is not None:
        context.load_cert_chain(served.pki / f"{who}.crt", served.pki / f"{who}.key")
    return context


async def _post(served: Served, who: str | None, body: dict[str, Any]) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{served.url}/check-policy",
            data=json.dumps(body).encode(),
            ssl=_context(served, who),
            timeout=aiohttp.ClientTimeout(total=20),
        ) as response,
    ):
        return response.status, await response.text()


async def test_a_caller_without_a_client_certificate_fails_the_handshake(served: Served) -> None:
    with pytest.raises((aiohttp.ClientError, ssl.SSLError, ConnectionError)):
        await _post(served, None, {"request": {}})


async def test_a_certificate_naming_another_caller_is_refused(served: Served) -> None:
    status, text = await _post(served, "other", {"request": {}})
    assert status == 403, text
    assert "names none of the allowed callers" in text


async def test_the_allowed_caller_is_served_within_the_limits(served: Served) -> None:
    status, _ = await _post(served, "caller", {"request": {}})
    # kopf answers (no handler for this request: 400 from kopf, not from the doors).
    assert status not in {403, 413, 503}
    status, text = await _post(served, "caller", {"request": {}, "pad": "x" * 70_000})
    assert status == 413, text
    assert "limited to 65536 bytes" in text
    status, text = await _post(served, "caller", {"request": {}, "slow": True})
    assert status == 503, text
    assert "took longer than 0.5 s" in text
