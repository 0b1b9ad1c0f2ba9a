"""A pr_create_from_plan Intent, its Sprite and its Run, and the world the Intent pipeline
sees them in: the GitHub kinds' unit tests and the executor tests share them."""

from __future__ import annotations

from typing import Any

from lattice_operator.api.v1alpha1 import Intent, Run, Sprite
from lattice_operator.reconcilers.intent import IntentWorld
from tests.support.intent_world import NOW, policy

AGENT = {"spriteRef": {"name": "box"}, "command": ["agent"]}


def pr_intent(**status: Any) -> Intent:
    return Intent.model_validate(
        {
            "metadata": {"name": "pr", "namespace": "ns", "uid": "u-1", "generation": 1},
            "spec": {
                "kind": "pr_create_from_plan",
                "params": {"prCreateFromPlan": {"repo": "octo/app", "plan": "do it", "run": AGENT}},
                "allowedActions": ["OPEN_PR"],
            },
            "status": status,
        }
    )


def sprite(ready: bool = True) -> Sprite:
    return Sprite.model_validate(
        {
            "metadata": {"name": "box", "namespace": "ns"},
            "spec": {},
            "status": {
                "spriteName": "ns-box",
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True" if ready else "False",
                        "reason": "R",
                        "message": "",
                        "lastTransitionTime": NOW.isoformat(),
                    }
                ],
            },
        }
    )


def run(phase: str, **status: Any) -> Run:
    return Run.model_validate(
        {
            "metadata": {
                "name": "pr-run",
                "namespace": "ns",
                "uid": "r",
                "ownerReferences": [
                    {
                        "apiVersion": "lattice.dev/v1alpha1",
                        "kind": "Intent",
                        "name": "pr",
                        "uid": "u-1",
                        "controller": True,
                    }
                ],
            },
            "spec": {**AGENT, "intentRef": {"name": "pr"}},
            "status": {"phase": phase, **status},
        }
    )


def world(it: Intent, **kw: Any) -> IntentWorld:
    values: dict[str, Any] = {
        "intent": it,
        "policies": [policy("allow")],
        "default_policy": None,
        "approvals": [],
        "run": None,
        "sprite": sprite(),
        "now": NOW,
        "forge_ready": True,
    }
    values.update(kw)
    return IntentWorld(**values)


def prepared(**forge: Any) -> dict[str, Any]:
    return {
        "forge": {
            "repo": "octo/app",
            "baseBranch": "main",
            "baseSha": "a" * 40,
            "headBranch": "lattice/pr",
            "preparedAt": NOW.isoformat(),
            **forge,
        }
    }
