"""`lattice env candidates|promote`: global_candidate environment changes, which the
pipeline records but never applies, listed and promoted by a human into Sprites."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from lattice_operator.cli._format import safe
from lattice_operator.cli._kube import Context, Kubeconfig, Namespace, Target, target

app = typer.Typer(
    help="Environment changes proposed by sprites for every repository (global candidates).",
    no_args_is_help=True,
)

CANDIDATE = "GlobalCandidate"


def _candidate(doc: dict[str, Any]) -> bool:
    status = doc.get("status") or {}
    conditions: list[dict[str, Any]] = status.get("conditions") or []
    done = next((c for c in conditions if c.get("type") == "Succeeded"), {})
    return doc.get("spec", {}).get("kind") == "environment_change" and (
        done.get("reason") == CANDIDATE
    )


@app.command("candidates")
def candidates(
    namespace: Namespace = None, kubeconfig: Kubeconfig = None, context: Context = None
) -> None:
    """List the namespace's global candidates: Intent, adjustment type, details."""
    from lattice_adapters.kube import resource_path
    from lattice_operator.api.v1alpha1.resources import INTENTS

    where = target(kubeconfig, context, namespace)
    path = resource_path(*INTENTS.gvp, where.namespace)
    listed: dict[str, Any] = where.call(lambda kube: kube.get(path))
    for doc in listed.get("items") or []:
        if _candidate(doc):
            params = doc["spec"]["params"]["environmentChange"]
            adjustment = params["suggestedAdjustment"]
            typer.echo(
                safe(
                    f"{doc['metadata']['name']}\t{adjustment['type']}\t"
                    f"{adjustment.get('details') or {}}"
                )
            )


def _promote(where: Target, intent: str, sprite: str) -> str:
    from lattice_adapters.kube import resource_path
    from lattice_operator.api.v1alpha1 import Intent, Sprite
    from lattice_operator.api.v1alpha1.resources import INTENTS, SPRITES
    from lattice_operator.reconcilers.intent_kinds.environment_steps import (
        domains_of,
        step_of,
        with_domains,
        with_step,
    )

    doc: dict[str, Any] = where.call(
        lambda kube: kube.get(resource_path(*INTENTS.gvp, where.namespace, intent))
    )
    if not _candidate(doc):
        raise ValueError(f"Intent {intent} is not an environment_change global candidate")
    params = Intent.model_validate(doc).spec.params.environment_change
    assert params is not None
    adjustment = params.suggested_adjustment
    path = resource_path(*SPRITES.gvp, where.namespace, sprite)
    current = Sprite.model_validate(where.call(lambda kube: kube.get(path)))
    guard = {"resourceVersion": current.metadata.resource_version}
    if adjustment.type == "escalate_to_human":
        raise ValueError("escalate_to_human is a notice: there is nothing to promote")
    if adjustment.type == "enable_network_access":
        policy = with_domains(current.spec.network_policy, domains_of(adjustment))
        if policy is None:
            return f"Sprite {sprite}: its network policy allows it already"
        patch = {"metadata": guard, "spec": {"networkPolicy": policy.to_wire()}}
    else:
        step = step_of(intent, adjustment)
        if step in current.spec.environment:
            return f"Sprite {sprite}: step {intent} is there already"
        steps = with_step(current.spec.environment, step)
        patch = {"metadata": guard, "spec": {"environment": [s.to_wire() for s in steps]}}
    where.call(lambda kube: kube.merge_patch(path, patch))
    return f"Sprite {sprite}: promoted {intent} ({adjustment.type})"


@app.command("promote")
def promote(
    intent: Annotated[str, typer.Argument(help="The global candidate (an Intent).")],
    sprites: Annotated[
        list[str], typer.Option("--sprite", "-s", help="A Sprite to apply it to (repeatable).")
    ],
    namespace: Namespace = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """Apply a global candidate to Sprites: what an approved repo_specific change would do
    (needs `patch` on sprites.lattice.dev; the Sprite's resourceVersion guards the write)."""
    from lattice_adapters.kube import KubeApiError

    where = target(kubeconfig, context, namespace)
    for sprite in sprites:
        try:
            typer.echo(safe(_promote(where, intent, sprite)))
        except (KubeApiError, ValueError) as exc:
            message = exc.message if isinstance(exc, KubeApiError) else str(exc)
            typer.echo(f"promote refused: {safe(message)}", err=True)
            raise typer.Exit(1) from exc


__all__ = ["app", "candidates", "promote"]
