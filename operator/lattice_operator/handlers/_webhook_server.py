"""kopf's webhook server with the admission port's doors: who may call (a client certificate
from the configured CA, and name, when set), how large a request may be, how long it may
take. docs/install.md ("Who may call the admission webhooks") says how to set them."""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any

import aiohttp.web
import kopf

# kopf's own errors of a review, mapped as its `_serve` maps them (not exported by kopf).
from kopf._core.engines import admission as kopf_admission

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
                f"{length}",
            )
        try:
            async with asyncio.timeout(self._timeout):
                return await self._review(fn, request, length)
        except TimeoutError:
            raise aiohttp.web.HTTPServiceUnavailable(
                text=f"the admission request took longer than {self._timeout:g} s"
            ) from None

    @staticmethod
    async def _review(fn: Any, request: aiohttp.web.Request, length: int) -> aiohttp.web.Response:
        """kopf's own `_serve`, reading the body from the stream: aiohttp's `request.text()`
        refuses bodies over its 1 MiB `client_max_size`, and an UPDATE's review carries the
        object twice, so an Intent over ~512 KB could never be approved. The length was
        checked against `max_body_bytes` (by default above twice the largest object etcd
        stores)."""
        body = await request.content.readexactly(length)
        sslpeer = request.transport.get_extra_info("peercert") if request.transport else None
        try:
            data = json.loads(body)
            response = await fn(
                data,
                webhook=request.match_info.get("id"),
                sslpeer=sslpeer,
                headers=dict(request.headers),
            )
        except kopf_admission.AmbiguousResourceError as exc:
            raise aiohttp.web.HTTPConflict(reason=str(exc) or None) from None
        except kopf_admission.UnknownResourceError as exc:
            raise aiohttp.web.HTTPNotFound(reason=str(exc) or None) from None
        except (kopf_admission.WebhookError, ValueError, RecursionError) as exc:
            raise aiohttp.web.HTTPBadRequest(reason=str(exc)[:200] or None) from None
        return aiohttp.web.json_response(response)


__all__ = ["GuardedWebhookServer", "peer_names"]
