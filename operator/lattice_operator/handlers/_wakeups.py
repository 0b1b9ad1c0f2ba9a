"""Wake-ups: a daemon asleep until what it reads changes is woken by the watch event itself.

kopf calls index functions for every watch event, before any handler, and without a log line
per call: the place for a wake-up (these index nothing). One function per kind, however many
sleepers it wakes: each index function costs kopf a handler invocation on every event.

- An open Intent's daemon sleeps until the Intent, its Run or its Sprite changes.
- A Run waiting for a busy or unready Sprite looks again when the Sprite changes or a Run
  on it ends.
"""

from __future__ import annotations

from typing import Any

import kopf

from lattice_operator.api.v1alpha1 import TERMINAL_RUN_PHASES
from lattice_operator.api.v1alpha1.resources import INTENTS, RUNS, SPRITES
from lattice_operator.builders import INTENT_LABEL
from lattice_operator.handlers._context import OperatorContext, context_of


def _wake_intent(ctx: OperatorContext, namespace: str | None, name: str | None) -> None:
    event = ctx.intent_wakeups.get((namespace or "", name or ""))
    if event is not None:
        event.set()


def _wake_sprite_waiters(ctx: OperatorContext, namespace: str | None, sprite: str | None) -> None:
    for event in ctx.sprite_waiters.get((namespace or "", sprite or ""), ()):
        event.set()


@kopf.index(*INTENTS.gvp)
async def wake_on_intent(body: kopf.Body, memo: kopf.Memo, **_: Any) -> dict[str, str]:
    _wake_intent(context_of(memo), body.metadata.namespace, body.metadata.name)
    return {}


@kopf.index(*RUNS.gvp)
async def wake_on_run(body: kopf.Body, memo: kopf.Memo, **_: Any) -> dict[str, str]:
    ctx = context_of(memo)
    spec = body.get("spec", {})
    _wake_intent(ctx, body.metadata.namespace, (spec.get("intentRef") or {}).get("name"))
    if body.get("status", {}).get("phase") in TERMINAL_RUN_PHASES:
        sprite = (spec.get("spriteRef") or {}).get("name")
        _wake_sprite_waiters(ctx, body.metadata.namespace, sprite)
    return {}


@kopf.index(*SPRITES.gvp)
async def wake_on_sprite(body: kopf.Body, memo: kopf.Memo, **_: Any) -> dict[str, str]:
    ctx = context_of(memo)
    _wake_sprite_waiters(ctx, body.metadata.namespace, body.metadata.name)
    _wake_intent(ctx, body.metadata.namespace, body.metadata.labels.get(INTENT_LABEL))
    return {}


__all__ = ["wake_on_intent", "wake_on_run", "wake_on_sprite"]
