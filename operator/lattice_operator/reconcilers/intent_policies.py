"""The IntentPolicies an Intent is classified against: those the API server lists when it is
classified, not only those the operator's index has caught up with.

The index (handlers.intent.compiled_policies) is fed by its own watch and compiles each
policy in a worker thread (cel-python loads with the first); an Intent's watch event can be
handled before it (`kubectl apply -f dir/` with a policy and an Intent). Classified against
the index alone, such an Intent would be decided once by no policy: approval required, for
good. So a classification lists the namespace's IntentPolicies (one read), takes the index's
compiled policy where it holds the listed version (by resourceVersion), and compiles a
version it does not hold yet at once rather than wait for it (the same spec compiles to the
same rules; no timing bound, no wake-up from the index needed). Such a compile is shared by
the Intents that need it and remembered by version. A policy the index still holds but the
API server no longer lists was deleted: not used. An invalid one is skipped, as the index
skips it (the index remembers it as invalid: it is compiled once, never waited for).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from lattice_operator.api.v1alpha1.intentpolicy import IntentPolicySpec
from lattice_operator.api.v1alpha1.resources import INTENT_POLICIES
from lattice_operator.policy import CompiledPolicy, PolicyInvalid, compile_policy_off_loop
from lattice_operator.ports.cluster import ClusterWriter

log = logging.getLogger(__name__)

COMPILES_REMEMBERED = 256
"""Policy versions compiled from a listing (the index did not hold them yet), remembered so
that the Intents classified against the same new policy compile it once."""


@dataclass(frozen=True)
class IndexedPolicy:
    """One IntentPolicy as the index holds it."""

    name: str
    version: str
    """Its metadata.resourceVersion."""
    compiled: CompiledPolicy | None
    """None: invalid, not used (its status says why)."""


async def compile_stored(namespace: str, raw: Mapping[str, Any]) -> CompiledPolicy | None:
    """An IntentPolicy as the API server has it, compiled off the event loop; None (with a
    warning) when it is invalid."""
    name = str((raw.get("metadata") or {}).get("name") or "")
    try:
        spec = IntentPolicySpec.model_validate(dict(raw.get("spec") or {}))
        return await compile_policy_off_loop(name, spec)
    except (ValidationError, PolicyInvalid) as exc:
        log.warning("IntentPolicy %s/%s is not used: %s", namespace, name, exc)
        return None


def _name_and_version(raw: Mapping[str, Any]) -> tuple[str, str]:
    meta = raw.get("metadata") or {}
    return str(meta.get("name") or ""), str(meta.get("resourceVersion") or "")


class PolicySource:
    """A namespace's compiled IntentPolicies, in name order: from the index (memory), or as
    the API server lists them now (for a classification)."""

    def __init__(
        self,
        indexed: Mapping[str, Iterable[IndexedPolicy]],
        writer: Callable[[], ClusterWriter],
        *,
        remembered: int = COMPILES_REMEMBERED,
    ) -> None:
        self._indexed = indexed
        self._writer = writer
        self._compiles: OrderedDict[tuple[str, str, str], asyncio.Task[CompiledPolicy | None]]
        self._compiles = OrderedDict()
        self._remembered = remembered

    async def listed(self, namespace: str) -> list[CompiledPolicy]:
        """What the API server lists now (one LIST), compiled: the index's where it holds
        the listed version, compiled here otherwise."""
        listed = await self._writer().list(INTENT_POLICIES.gvp, namespace)
        known = {(p.name, p.version): p for p in self._indexed.get(namespace, [])}
        in_force: list[CompiledPolicy] = []
        for raw in sorted(listed, key=_name_and_version):
            name, version = _name_and_version(raw)
            hit = known.get((name, version))
            compiled = hit.compiled if hit is not None else await self._compiled(namespace, raw)
            if compiled is not None:
                in_force.append(compiled)
        return in_force

    async def _compiled(self, namespace: str, raw: Mapping[str, Any]) -> CompiledPolicy | None:
        name, version = _name_and_version(raw)
        key = (namespace, name, version)
        task = self._compiles.get(key)
        if task is None:
            task = asyncio.create_task(compile_stored(namespace, raw))
            self._compiles[key] = task
            while len(self._compiles) > self._remembered:
                self._compiles.popitem(last=False)
        else:
            self._compiles.move_to_end(key)
        try:
            # Shielded: a classification cancelled meanwhile (its Intent deleted) leaves the
            # compile to the others waiting for it.
            return await asyncio.shield(task)
        except Exception:
            if self._compiles.get(key) is task:
                del self._compiles[key]  # a failure to try again, not a version's answer
            raise


__all__ = [
    "COMPILES_REMEMBERED",
    "IndexedPolicy",
    "PolicySource",
    "compile_stored",
]
