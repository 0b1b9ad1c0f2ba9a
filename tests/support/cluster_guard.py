"""The suite runs against the cluster KUBECONFIG points at only when that is safe.

It creates and deletes namespaces, installs CRDs and admission webhook configurations, and
kills operators: never something to do to a shared cluster by accident. A cluster on this
machine (loopback: the local control plane, kind, k3d) is used as given; any other needs
the explicit opt-in `LATTICE_TEST_CLUSTER=<its server URL>`, naming that very server so an
opt-in left in the environment does not carry over to another context.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from lattice_adapters.kube import KubeConfig, KubeConfigError

OPT_IN = "LATTICE_TEST_CLUSTER"
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


def refusal(kubeconfig: Path, opt_in: str | None) -> str | None:
    """Why the suite must not use this kubeconfig's current cluster (None: it may)."""
    try:
        server = KubeConfig.from_file(kubeconfig).server
    except KubeConfigError as exc:
        return f"KUBECONFIG={kubeconfig} cannot be used: {exc}"
    host = urlsplit(server).hostname or ""
    if host in LOOPBACK or host.startswith("127."):
        return None
    if opt_in == server:
        return None
    return (
        f"KUBECONFIG points at {server}, a cluster not on this machine. The tests create "
        "and delete namespaces, CRDs and webhook configurations there. To run them against "
        f"it anyway, set {OPT_IN}={server}; to use the local control plane, unset KUBECONFIG."
    )


def given_kubeconfig() -> Path | None:
    """The first file of $KUBECONFIG, if it is set."""
    value = os.environ.get("KUBECONFIG", "")
    first = next((p for p in value.split(os.pathsep) if p), None)
    return Path(first) if first else None


__all__ = ["OPT_IN", "given_kubeconfig", "refusal"]
