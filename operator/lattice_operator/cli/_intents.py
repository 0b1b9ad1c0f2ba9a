"""`lattice approve|reject`: decisions on Intents, recorded with your authenticated identity."""

from __future__ import annotations

import json
import secrets
from typing import Annotated, Any

import typer

from lattice_operator.cli._runs import Namespace, kube_call

Reason = Annotated[str, typer.Option("--reason", "-r", help="Why (recorded with the decision).")]


def _decide(intent: str, namespace: str, decision: str, reason: str) -> None:
    from lattice_adapters.kube import KubeApiError, resource_path
    from lattice_operator.reconcilers.approvals import REQUEST, parse_records

    path = resource_path("lattice.dev", "v1alpha1", "intents", namespace, intent)
    # The nonce makes every request a change, so repeating one is seen by the webhook.
    request = {"decision": decision, "reason": reason, "nonce": secrets.token_hex(4)}
    patch = {"metadata": {"annotations": {REQUEST: json.dumps(request)}}}
    try:
        updated: dict[str, Any] = kube_call(lambda kube: kube.merge_patch(path, patch))
    except KubeApiError as exc:
        typer.echo(f"{decision} refused: {exc.message}", err=True)
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
    typer.echo(f"{intent}: {last.decision} recorded as {last.user}")


def approve(
    intent: Annotated[str, typer.Argument(help="The Intent to approve.")],
    reason: Reason = "",
    namespace: Namespace = "default",
) -> None:
    """Approve an Intent awaiting approval (needs the `approve` verb on intents.lattice.dev)."""
    _decide(intent, namespace, "approve", reason)


def reject(
    intent: Annotated[str, typer.Argument(help="The Intent to reject.")],
    reason: Reason = "",
    namespace: Namespace = "default",
) -> None:
    """Reject an Intent awaiting approval (needs the `approve` verb on intents.lattice.dev)."""
    _decide(intent, namespace, "reject", reason)
