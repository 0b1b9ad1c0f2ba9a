"""The Fly Machines API client: httpx, the operator's token, timeouts, bounded retries.

Reads (list, get, wait) and start/stop (asking twice leaves the machine as asking once) are
retried on 429 and 5xx and on a connection that failed, at most `max_attempts` times in all,
waiting `backoff` * 2^n seconds (a 429's Retry-After when it gives one, capped). A create is
retried only when it provably did not happen (429, connection refused): after a 5xx or a
lost answer it may have, and the caller looks the machine up by name instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import ValidationError

from lattice_adapters.fly._errors import RETRYABLE, from_response, from_transport
from lattice_operator.ports.errors import AdapterError, ProtocolError, RateLimited, TransportError
from lattice_operator.ports.fly import FlyMachine, FlyMachineConfig, WaitState

DEFAULT_API_URL = "https://api.machines.dev/v1"
MAX_WAIT_SECONDS = 60
"""The wait endpoint's longest wait (Fly's default and limit)."""
MAX_RETRY_AFTER = 30.0


def auth_header(token: str) -> str:
    """The Authorization header for a token: as given when it names its scheme (`FlyV1 …`
    macaroons from `fly tokens create`, or `Bearer …`), else a bearer token."""
    token = token.strip()
    scheme, _, rest = token.partition(" ")
    if rest and scheme.lower() in ("bearer", "flyv1"):
        return token
    return f"Bearer {token}"


def _machines(app: str, *rest: str) -> str:
    """The path of an app's machines (each name a single escaped segment)."""
    return "/".join(
        ["", "apps", quote(app, safe=""), "machines", *(quote(r, safe="") for r in rest)]
    )


class FlyMachinesClient:
    """`FlyMachines` over httpx."""

    def __init__(
        self,
        token: str,
        *,
        api_url: str = DEFAULT_API_URL,
        timeout: float = 30.0,
        max_attempts: int = 3,
        backoff: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self._max_attempts = max_attempts
        self._backoff = backoff
        self._sleep = sleep
        self._timeout = timeout
        self._http = httpx.AsyncClient(
            base_url=api_url.rstrip("/"),
            headers={"Authorization": auth_header(token), "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
        )

    async def __aenter__(self) -> FlyMachinesClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- the port ------------------------------------------------------------------------

    async def list_machines(self, app: str) -> list[FlyMachine]:
        data = await self._call("GET", _machines(app), f"listing machines of {app}")
        if not isinstance(data, list):
            raise ProtocolError(f"listing machines of {app}: Fly answered no list")
        return [self._machine(item, f"listing machines of {app}") for item in data]

    async def get_machine(self, app: str, machine_id: str) -> FlyMachine:
        doing = f"reading machine {machine_id} of {app}"
        return self._machine(await self._call("GET", _machines(app, machine_id), doing), doing)

    async def create_machine(
        self,
        app: str,
        config: FlyMachineConfig,
        *,
        name: str | None = None,
        region: str | None = None,
    ) -> FlyMachine:
        body: dict[str, Any] = {"config": config.model_dump(mode="json", exclude_none=True)}
        if name:
            body["name"] = name
        if region:
            body["region"] = region
        doing = f"creating a machine in {app}"
        data = await self._call("POST", _machines(app), doing, json=body, repeatable=False)
        return self._machine(data, doing)

    async def start_machine(self, app: str, machine_id: str) -> None:
        path = _machines(app, machine_id, "start")
        await self._call("POST", path, f"starting machine {machine_id} of {app}")

    async def stop_machine(
        self, app: str, machine_id: str, *, signal: str | None = None, kill_after: str | None = None
    ) -> None:
        body = {k: v for k, v in (("signal", signal), ("timeout", kill_after)) if v}
        path = _machines(app, machine_id, "stop")
        await self._call("POST", path, f"stopping machine {machine_id} of {app}", json=body)

    async def wait_for_state(
        self, app: str, machine_id: str, state: WaitState, *, timeout_seconds: int
    ) -> None:
        seconds = max(1, min(timeout_seconds, MAX_WAIT_SECONDS))
        await self._call(
            "GET",
            _machines(app, machine_id, "wait"),
            f"waiting for machine {machine_id} of {app} to be {state}",
            params={"state": state, "timeout": str(seconds)},
            # The server holds the request up to `seconds`: the client waits that much longer.
            read_timeout=self._timeout + seconds,
        )

    # -- plumbing ------------------------------------------------------------------------

    @staticmethod
    def _machine(data: Any, doing: str) -> FlyMachine:
        try:
            return FlyMachine.model_validate(data)
        except ValidationError as exc:
            raise ProtocolError(f"{doing}: Fly answered no machine: {exc}") from None

    async def _call(
        self,
        method: str,
        path: str,
        doing: str,
        *,
        json: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
        repeatable: bool = True,
        read_timeout: float | None = None,
    ) -> Any:
        timeout = httpx.Timeout(self._timeout, read=read_timeout or self._timeout)
        error: AdapterError | None = None
        for attempt in range(self._max_attempts):
            if attempt:
                await self._sleep(self._delay(attempt, error))
            try:
                response = await self._http.request(
                    method, path, json=json, params=params, timeout=timeout
                )
            except httpx.HTTPError as exc:
                error = from_transport(exc, doing)
                if isinstance(error, TransportError) and (repeatable or not error.maybe_executed):
                    continue
                raise error from None
            if response.status_code < 400:
                return response.json() if response.content else None
            error = from_response(response, doing)
            if response.status_code in RETRYABLE and (repeatable or isinstance(error, RateLimited)):
                continue
            raise error
        assert error is not None
        raise error

    def _delay(self, attempt: int, error: AdapterError | None) -> float:
        if isinstance(error, RateLimited) and error.retry_after is not None:
            return min(error.retry_after, MAX_RETRY_AFTER)
        return float(self._backoff * 2 ** (attempt - 1))


__all__ = ["DEFAULT_API_URL", "FlyMachinesClient", "auth_header"]
