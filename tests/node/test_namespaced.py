"""A second installation, in namespaced mode, once the first is uninstalled: the samples
complete in the one namespace it watches, and the audit log proves its Roles as for the first
(tests.support.node_audit).
"""

from __future__ import annotations

import pytest

from lattice_devtools.localcluster.node import NodeCluster
from tests.support.node_audit import (
    NAMESPACED_UNEXERCISED,
    UNEXERCISED_GRANTS,
    audit_log_check,
    granted,
)
from tests.support.node_e2e import (
    NS_NAMESPACE,
    NS_RELEASE,
    TEAM,
    Released,
    holder,
    http,
    install,
    service_url,
    wait_until,
)
from tests.support.node_samples import (
    approve_the_gated_sample,
    drive_the_agent_sample,
    github_repository_reports_its_secret,
    health_check_fires_and_keeps_its_history,
)

pytestmark = pytest.mark.node


def test_namespaced_mode_is_proven_by_the_audit_log_too(
    node: NodeCluster, sprites: str, installed: NodeCluster, released: Released
) -> None:
    """A second installation serving one namespace only: its Roles there (and in its own
    namespace), a ClusterRole for the cluster-scoped calls; the samples complete, and the
    audit log shows every request allowed and every grant used."""
    since = len((node.state / "audit.log").read_text().splitlines())
    node.kubectl("create", "namespace", TEAM)
    install(
        node, sprites, released, NS_RELEASE, NS_NAMESPACE, "--set", f"watchNamespaces={{{TEAM}}}"
    )
    wait_until(lambda: holder(node, NS_NAMESPACE, NS_RELEASE), "a Lease holder", 60)
    drive_the_agent_sample(node, TEAM)
    approve_the_gated_sample(node, TEAM)
    health_check_fires_and_keeps_its_history(node, TEAM)
    github_repository_reports_its_secret(node, TEAM)
    # Its stream (on by default) authenticates a token with a TokenReview.
    url = service_url(node, f"{NS_RELEASE}-lattice-operator-stream", NS_NAMESPACE)
    wait_until(
        lambda: http(node, f"{url}/events", headers={"Authorization": "Bearer nope"})[0] == 401,
        "the namespaced installation's stream to refuse a bad token",
        120,
    )
    user = f"system:serviceaccount:{NS_NAMESPACE}:{NS_RELEASE}-lattice-operator"
    grants = granted(node, NS_RELEASE, [TEAM, NS_NAMESPACE])
    refused = node.kubectl(
        "auth", "can-i", "list", "sprites.lattice.dev", "-n", "default", f"--as={user}",
        check=False,
    )  # fmt: skip
    assert refused.stdout.strip() == "no"  # nothing outside the watched namespace
    audit_log_check(node, user, grants, since, UNEXERCISED_GRANTS | NAMESPACED_UNEXERCISED)
    node.helm("uninstall", NS_RELEASE, "--namespace", NS_NAMESPACE, "--wait")
