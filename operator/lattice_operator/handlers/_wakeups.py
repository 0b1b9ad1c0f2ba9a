"""Wake-ups: a daemon asleep until what it reads changes is woken by the watch event itself.

kopf calls index functions for every watch event, before any handler, and without a log line
per call: the place for a wake-up that needs nothing but the event (these index nothing). One
function per kind, however many sleepers it wakes: each index function costs kopf a handler
invocation on every event.

- An open Intent's task sleeps until the Intent, its Run or its Sprite changes (its own
  events wake it from `handlers.intent.intent_event`, once its body is the event's: an index
  function runs before that).
- A Run waiting for its Sprite looks again when the Sprite changes (every Run on it), when a
  Run on it ends (the one next in line only) or when its own spec changes (a cancel).

A Run's event wakes from the Runs' `on.event` handler (`run_changed`), not from an index
function: kopf calls it after every index has taken the event (so the one woken reads claims
that include it) and for a deletion too, which index functions never see.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import kopf

from lattice_operator.api.v1alpha1 import TERMINAL_RUN_PHASES
from lattice_operator.api.v1alpha1.resources import SPRITES
from lattice_operator.builders import INTENT_LABEL
from lattice_operator.handlers._context import OperatorContext, context_of
from lattice_operator.reconcilers.sprite_claims import RunClaim, next_in_line


def _wake_intent(ctx: OperatorContext, namespace: str | None, name: str | None) -> None:
    if ctx.intent_workers is not None:
        ctx.intent_workers.wake((namespace or "", name or ""))


@kopf.index(*SPRITES.gvp)
async def wake_on_sprite(body: kopf.Body, memo: kopf.Memo, **_: Any) -> dict[str, str]:
    ctx = context_of(memo)
    namespace = body.metadata.namespace or ""
    ctx.sprite_waiters.wake_all((namespace, body.metadata.name or ""))
    _wake_intent(ctx, namespace, body.metadata.labels.get(INTENT_LABEL))
    return {}


def wake_for_run(
    ctx: OperatorContext,
    event_type: str,
    body: kopf.Body,
    claims: Mapping[tuple[str, str], Iterable[RunClaim]] | None,
) -> None:
    """What a Run's watch event wakes: its Intent; on its end (or deletion) the Run next in
    line on its Sprite; on a change of its spec its own daemon, if it waits."""
    namespace = body.metadata.namespace or ""
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    _wake_intent(ctx, namespace, (spec.get("intentRef") or {}).get("name"))
    sprite = (namespace, (spec.get("spriteRef") or {}).get("name") or "")
    if event_type == "DELETED" or status.get("phase") in TERMINAL_RUN_PHASES:
        following = next_in_line(claims.get(sprite, ()) if claims is not None else ())
        if following is not None:
            ctx.sprite_waiters.wake(sprite, following.uid)
    elif body.metadata.get("generation") != status.get("observedGeneration"):
        ctx.sprite_waiters.wake(sprite, body.metadata.uid or "")


__all__ = ["wake_for_run", "wake_on_sprite"]
