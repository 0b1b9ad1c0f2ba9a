"""kopf's webhook server with the admission port's doors: who may call (a client certificate
from the configured CA, and name, when set), how large a request may be, how long it may
take. docs/install.md ("Who may call the admission webhooks") says how to set them."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import aiohttp.web
import kopf

from lattice_operator.settings import WebhookSettings


def peer_names(peercert: Any) -> set[str]:
    """The subject common names and DNS names of a verified peer certificate (ssl's dict)."""
    if not isinstance(peercert, dict):
        return set()
    names = {
        str(value)
        for rdn in peercert.get("subject", ())
        for key, value in rdn
        if key == "commonName"
    }
    names |= {str(v) for kind, v in peercert.get("subjectAltName", ()) if kind == "DNS"}
    return names


class GuardedWebhookServer(kopf.WebhookServer):
    """Each request checked before kopf reads it, and bounded in time."""

    def __init__(self, webhook: WebhookSettings, **kwargs: Any) -> None:
        if webhook.client_ca_file:
            # The TLS handshake fails for a caller without a certificate from this CA.
            kwargs |= {"verify_mode": ssl.CERT_REQUIRED, "verify_cafile": webhook.client_ca_file}
        super().__init__(**kwargs)
        self._names = frozenset(webhook.client_names)
        self._max_body = webhook.max_body_bytes
        self._timeout = webhook.request_timeout

    async def _serve(  # type: ignore[override]  # kopf's per-request entry, a staticmethod there
        self, fn: Any, request: aiohttp.web.Request
    ) -> aiohttp.web.Response:
        if self._names:
            transport = request.transport
            peer = transport.get_extra_info("peercert") if transport is not None else None
            if not peer_names(peer) & self._names:
                raise aiohttp.web.HTTPForbidden(
                    text="the client certificate names none of the allowed callers"
                )
        length = request.content_length
        if length is None:
            raise aiohttp.web.HTTPLengthRequired(text="an admission request needs Content-Length")
        if length > self._max_body:
            raise aiohttp.web.HTTPRequestEntityTooLarge(
                max_size=self._max_body,
                actual_size=length,
                text=f"admission requests are limited to {self._max_body} bytes, this one has "
                f"{length} (an UPDATE carries the object twice: keep Intents under half)",
            )
        try:
            async with asyncio.timeout(self._timeout):
                return await kopf.WebhookServer._serve(fn, request)
        except TimeoutError:
            raise aiohttp.web.HTTPServiceUnavailable(
                text=f"the admission request took longer than {self._timeout:g} s"
            ) from None


__all__ = ["GuardedWebhookServer", "peer_names"]
