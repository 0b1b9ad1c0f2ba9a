"""`lattice whoami`: who the API server takes you for, and the namespace commands default to
(`kubectl auth whoami` with the context's namespace): the check for a kubeconfig's user."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from lattice_operator.cli._format import safe
from lattice_operator.cli._kube import Context, Kubeconfig, Namespace, target

REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def whoami(
    namespace: Namespace = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Your identity to the API server (a SelfSubjectReview) and the default namespace."""
    where = target(kubeconfig, context, namespace)
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    answer: dict[str, Any] = where.call(lambda kube: kube.create(REVIEWS, review))
    user = (answer.get("status") or {}).get("userInfo") or {}
    shown = {
        "username": user.get("username", ""),
        "groups": user.get("groups") or [],
        "namespace": where.namespace,
        "server": where.config().server,
    }
    if as_json:
        typer.echo(json.dumps(shown, indent=2))
        return
    for key, value in shown.items():
        text = ", ".join(value) if isinstance(value, list) else str(value)
        typer.echo(f"{key}: {safe(text)}")
