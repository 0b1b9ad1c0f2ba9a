"""kopf wiring of Fly (optional): the Machines API client, with the operator's own token from
a Secret, made at start-up when `fly.token_secret` is set and closed at clean-up."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from lattice_adapters.fly import FlyMachinesClient
from lattice_operator.handlers._context import context_of
from lattice_operator.handlers._secrets import read_secret
from lattice_operator.ports.errors import AdapterError, CredentialsMissing

log = logging.getLogger(__name__)


@kopf.on.startup()
async def start_fly(memo: kopf.Memo, **_: Any) -> None:
    ctx = context_of(memo)
    settings = ctx.settings.fly
    if not settings.configured or settings.token_secret is None:
        return
    try:
        token = await read_secret(ctx, settings.token_secret, "token")
    except CredentialsMissing as exc:
        log.error("Fly is not available: %s", exc)
        ctx.fly_problem = f"Fly token: {exc}"
        return
    ctx.fly = FlyMachinesClient(
        token,
        api_url=settings.api_url,
        timeout=settings.timeout,
        max_attempts=settings.max_attempts,
        backoff=settings.backoff,
    )
    log.info("Fly Machines API at %s", settings.api_url)


@kopf.on.cleanup()
async def stop_fly(memo: kopf.Memo, **_: Any) -> None:
    ctx = context_of(memo)
    if ctx.fly is not None:
        try:
            await ctx.fly.aclose()
        except AdapterError as exc:
            log.warning("closing Fly: %s", exc)
