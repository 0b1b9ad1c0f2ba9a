"""The first installation's last steps, after its audit: a `helm upgrade` naming a token Secret
that does not exist leaves the operator running; `helm uninstall` keeps the CRDs, the custom
resources, and what the operator made (its certificate Secret and Lease).
"""

from __future__ import annotations

import json

import pytest

from lattice_devtools.localcluster.node import NodeCluster
from tests.support.node_e2e import (
    NAMESPACE,
    RELEASE,
    SECRET,
    Released,
    condition,
    get,
    operator_pods,
    upgrade,
    wait_until,
)

pytestmark = pytest.mark.node


def test_a_missing_token_secret_leaves_the_operator_running(
    installed: NodeCluster, released: Released
) -> None:
    node = installed
    upgrade(node, released, "--set", "sprites.tokenSecret=no-such-secret")
    assert "no-such-secret" in get_settings(node)
    sprite = {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Sprite",
        "metadata": {"name": "no-token"},
        "spec": {},
    }
    node.kubectl("apply", "-f", "-", input=json.dumps(sprite))
    cond = wait_until(
        lambda: condition(get(node, "sprite", "no-token"), "Ready"), "the Sprite's Ready"
    )
    assert cond["status"] != "True"
    assert cond["reason"]
    # The operator answered the new Sprite, so it runs; none of its containers restarted.
    for pod in operator_pods(node):
        (status,) = pod["status"]["containerStatuses"]
        assert status["restartCount"] == 0, status
        assert status["ready"] is True


def get_settings(node: NodeCluster) -> str:
    cm = get(node, "configmap", f"{RELEASE}-lattice-operator", NAMESPACE)
    return str(cm.get("data", {}).get("settings.yaml", ""))


def test_helm_uninstall_keeps_crds_and_custom_resources(installed: NodeCluster) -> None:
    node = installed
    node.helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait")
    left = node.kubectl(
        "-n", NAMESPACE, "get", "deployment,service,configmap,secret,serviceaccount,role",
        "-l", "app.kubernetes.io/instance=lattice", "-o", "name",
    )  # fmt: skip
    assert left.stdout.strip() == ""
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        assert not get(node, kind, f"{RELEASE}-lattice-operator", "")
    for check in ("check-run-owner", "check-grants", "check-approvers"):
        for kind in ("validatingadmissionpolicy", "validatingadmissionpolicybinding"):
            assert not get(node, kind, f"{check}.{RELEASE}-lattice-operator", "")
    crds = node.kubectl("get", "crd", "-o", "name").stdout
    assert "sprites.lattice.dev" in crds
    assert get(node, "sprite", "sample"), "the Sprite must outlive the chart"
    assert get(node, "run", "sample-agent"), "the Run must outlive the chart"
    # What the operator itself made stays, as documented: the certificate and the Lease.
    assert get(node, "secret", SECRET, NAMESPACE)
    assert get(node, "lease", f"{RELEASE}-lattice-operator", NAMESPACE)
