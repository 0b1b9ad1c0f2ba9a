"""`lattice env candidates|promote|show`: global_candidate environment changes, which the
pipeline records but never applies, listed and promoted by a human into the cluster-wide
Environment (every Sprite's Runs) or into named Sprites; the cluster-wide one shown."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from lattice_operator.cli._format import safe
from lattice_operator.cli._kube import Context, Kubeconfig, Namespace, Target, target

if TYPE_CHECKING:
    from lattice_operator.api.v1alpha1.intent import SuggestedAdjustment

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


def _adjustment(where: Target, intent: str) -> SuggestedAdjustment:
    """The global candidate's adjustment (ValueError: the Intent is not one)."""
    from lattice_adapters.kube import resource_path
    from lattice_operator.api.v1alpha1 import Intent
    from lattice_operator.api.v1alpha1.resources import INTENTS

    doc: dict[str, Any] = where.call(
        lambda kube: kube.get(resource_path(*INTENTS.gvp, where.namespace, intent))
    )
    if not _candidate(doc):
        raise ValueError(f"Intent {intent} is not an environment_change global candidate")
    params = Intent.model_validate(doc).spec.params.environment_change
    assert params is not None
    return params.suggested_adjustment


def _promote_to_cluster(where: Target, intent: str) -> str:
    """Append the candidate's step to the cluster-wide Environment `default` (made if there
    is none): the API server checks the caller may patch (or create) it."""
    from lattice_adapters.kube import KubeApiError, resource_path
    from lattice_operator.api.v1alpha1.environment import CLUSTER_ENVIRONMENT, Environment
    from lattice_operator.api.v1alpha1.resources import ENVIRONMENTS
    from lattice_operator.reconcilers.intent_kinds.environment_steps import step_of, with_step

    adjustment = _adjustment(where, intent)
    if adjustment.type == "escalate_to_human":
        raise ValueError("escalate_to_human is a notice: there is nothing to promote")
    if adjustment.type == "enable_network_access":
        raise ValueError(
            "enable_network_access changes a Sprite's network policy: promote it with "
            "--sprite NAME (egress for every Sprite is the operator's "
            "sprites.default_network_policy setting)"
        )
    step = step_of(intent, adjustment)
    path = resource_path(*ENVIRONMENTS.gvp, name=CLUSTER_ENVIRONMENT)
    try:
        found: dict[str, Any] = where.call(lambda kube: kube.get(path))
    except KubeApiError as exc:
        if not exc.not_found:
            raise
        created = Environment.model_validate(
            {"metadata": {"name": CLUSTER_ENVIRONMENT}, "spec": {"steps": [step.to_wire()]}}
        )
        collection = resource_path(*ENVIRONMENTS.gvp)
        where.call(lambda kube: kube.create(collection, created.to_wire()))
        return f"Environment {CLUSTER_ENVIRONMENT}: promoted {intent} ({adjustment.type})"
    current = Environment.model_validate(found)
    if step in current.spec.steps:
        return f"Environment {CLUSTER_ENVIRONMENT}: step {intent} is there already"
    steps = with_step(current.spec.steps, step)
    patch = {
        "metadata": {"resourceVersion": current.metadata.resource_version},
        "spec": {"steps": [s.to_wire() for s in steps]},
    }
    where.call(lambda kube: kube.merge_patch(path, patch))
    return f"Environment {CLUSTER_ENVIRONMENT}: promoted {intent} ({adjustment.type})"


def _promote(where: Target, intent: str, sprite: str) -> str:
    from lattice_adapters.kube import resource_path
    from lattice_operator.api.v1alpha1 import Sprite
    from lattice_operator.api.v1alpha1.resources import SPRITES
    from lattice_operator.reconcilers.intent_kinds.environment_steps import (
        domains_of,
        step_of,
        with_domains,
        with_step,
    )

    adjustment = _adjustment(where, intent)
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
        list[str] | None,
        typer.Option(
            "--sprite",
            "-s",
            help="A Sprite to apply it to (repeatable); without it, the cluster-wide "
            "Environment every Sprite's Runs get.",
        ),
    ] = None,
    namespace: Namespace = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """Apply a global candidate to the cluster-wide Environment `default` (needs `patch`, or
    `create` for the first one, on environments.lattice.dev: the chart's
    `environment-promoter` ClusterRole), or with --sprite to Sprites (needs `patch` on
    sprites.lattice.dev). The object's resourceVersion guards each write."""
    from lattice_adapters.kube import KubeApiError

    where = target(kubeconfig, context, namespace)
    try:
        if not sprites:
            typer.echo(safe(_promote_to_cluster(where, intent)))
        for sprite in sprites or ():
            typer.echo(safe(_promote(where, intent, sprite)))
    except (KubeApiError, ValueError) as exc:
        message = exc.message if isinstance(exc, KubeApiError) else str(exc)
        typer.echo(f"promote refused: {safe(message)}", err=True)
        raise typer.Exit(1) from exc


@app.command("show")
def show(kubeconfig: Kubeconfig = None, context: Context = None) -> None:
    """The cluster-wide Environment's steps, in the order Runs run them: name, type, command
    (nothing when there is none)."""
    from lattice_adapters.kube import KubeApiError, resource_path
    from lattice_operator.api.v1alpha1.environment import CLUSTER_ENVIRONMENT, Environment
    from lattice_operator.api.v1alpha1.resources import ENVIRONMENTS

    where = target(kubeconfig, context, None)
    path = resource_path(*ENVIRONMENTS.gvp, name=CLUSTER_ENVIRONMENT)
    try:
        found: dict[str, Any] = where.call(lambda kube: kube.get(path))
    except KubeApiError as exc:
        if exc.not_found:
            return
        typer.echo(f"show refused: {safe(exc.message)}", err=True)
        raise typer.Exit(1) from exc
    for step in Environment.model_validate(found).spec.steps:
        typer.echo(safe(f"{step.name}\t{step.type}\t{step.command}"))


__all__ = ["app", "candidates", "promote", "show"]
