"""`lattice approve|reject`: decisions on Intents, recorded with your authenticated identity."""

from __future__ import annotations

import json
import secrets
from typing import Annotated, Any

import typer

from lattice_operator.cli._format import safe
from lattice_operator.cli._kube import Context, Kubeconfig, Namespace, Target, target

Reason = Annotated[str, typer.Option("--reason", "-r", help="Why (recorded with the decision).")]


def _decide(intent: str, where: Target, decision: str, reason: str) -> None:
    from lattice_adapters.kube import KubeApiError, resource_path
    from lattice_operator.api.v1alpha1.resources import INTENTS
    from lattice_operator.reconcilers.approvals import (
        REQUEST,
        ApprovalRefused,
        parse_records,
        raw_spec_digest,
    )

    path = resource_path(*INTENTS.gvp, where.namespace, intent)
    try:
        current: dict[str, Any] = where.call(lambda kube: kube.get(path))
    except KubeApiError as exc:
        typer.echo(f"{decision} refused: {safe(exc.message)}", err=True)
        raise typer.Exit(1) from exc
    spec = current.get("spec") or {}
    try:
        digest = raw_spec_digest(spec)
    except ApprovalRefused as exc:
        typer.echo(f"{decision} refused: {safe(exc)}", err=True)
        raise typer.Exit(1) from exc
    # What you decide on, pinned: the webhook refuses the decision if the spec changed since.
    typer.echo(_describe(intent, spec, digest))
    # The nonce makes every request a change, so repeating one is seen by the webhook.
    request = {
        "decision": decision,
        "reason": reason,
        "specDigest": digest,
        "nonce": secrets.token_hex(4),
    }
    patch = {"metadata": {"annotations": {REQUEST: json.dumps(request)}}}
    try:
        updated: dict[str, Any] = where.call(lambda kube: kube.merge_patch(path, patch))
    except KubeApiError as exc:
        typer.echo(f"{decision} refused: {safe(exc.message)}", err=True)
        raise typer.Exit(1) from exc
    records = parse_records(updated.get("metadata", {}).get("annotations"))
    if not records:
        typer.echo(
            "the request was stored but no admission webhook recorded it: "
            "is the operator's webhook configured?",
            err=True,
        )
        raise typer.Exit(1)
    last = records[-1]
    typer.echo(safe(f"{intent}: {last.decision} recorded as {last.user}"))


def _describe(intent: str, spec: dict[str, Any], digest: str) -> str:
    """The parts of a spec an approver should see, on a few lines."""
    lines = [f"{intent}: {spec.get('kind')} ({digest[:19]}…)"]
    if spec.get("summary"):
        lines.append(f"  summary: {spec['summary']}")
    for kind_params in (spec.get("params") or {}).values():
        if isinstance(kind_params, dict) and kind_params.get("command"):
            lines.append(f"  command: {json.dumps(kind_params['command'])}")
    lines.append(f"  allowedActions: {', '.join(spec.get('allowedActions') or []) or '(none)'}")
    credentials = [
        f"{c.get('name')} ← secret {(c.get('secretKeyRef') or {}).get('name')}"
        for c in spec.get("credentials") or []
        if isinstance(c, dict)
    ]
    lines.append(f"  credentials: {', '.join(credentials) or '(none)'}")
    return "\n".join(safe(line) for line in lines)


def approve(
    intent: Annotated[str, typer.Argument(help="The Intent to approve.")],
    reason: Reason = "",
    namespace: Namespace = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """Approve an Intent awaiting approval (needs the `approve` verb on intents.lattice.dev)."""
    _decide(intent, target(kubeconfig, context, namespace), "approve", reason)


def reject(
    intent: Annotated[str, typer.Argument(help="The Intent to reject.")],
    reason: Reason = "",
    namespace: Namespace = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """Reject an Intent awaiting approval (needs the `approve` verb on intents.lattice.dev)."""
    _decide(intent, target(kubeconfig, context, namespace), "reject", reason)
