"""The release installed as a platform team installs it (the `installed` fixture of
tests/node/conftest.py): both operator Pods run the pushed image by digest, pulled by the node
from the private registry with the imagePullSecret, one of them the leader; `helm test`
reaches the webhook over TLS; the logs are readable through the API.
"""

from __future__ import annotations

import json
import re

import pytest

from lattice_devtools.localcluster.node import NodeCluster
from tests.support.node_e2e import (
    IMAGE_PATH,
    NAMESPACE,
    PULL_SECRET,
    RELEASE,
    Released,
    get,
    holder,
    operator_pods,
    wait_until,
)

pytestmark = pytest.mark.node


def leader_gauge(node: NodeCluster, pod: str) -> str:
    """The Pod's lattice_leader metric, read through the API server's Pod proxy."""
    path = f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}:9090/proxy/metrics"
    out = node.kubectl("get", "--raw", path, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("lattice_leader ")]
    return lines[0].split()[1] if lines else f"? {out.stderr.strip()}"


def test_both_operator_pods_run_as_the_image_with_one_leader(
    installed: NodeCluster, released: Released
) -> None:
    pods = operator_pods(installed)
    assert len(pods) == 2
    for pod in pods:
        # The packaged chart's default: the pushed image by digest, pulled with the Secret.
        assert pod["spec"]["containers"][0]["image"] == released.image
        assert pod["spec"]["imagePullSecrets"] == [{"name": PULL_SECRET}]
        (status,) = pod["status"]["containerStatuses"]
        assert status["imageID"].endswith(released.digest), status
        assert status["ready"] is True  # the standby too: it serves the webhooks
    names = sorted(p["metadata"]["name"] for p in pods)
    leader = wait_until(lambda: holder(installed), "a Lease holder", 60)
    assert leader in names  # holderIdentity is the Pod's name
    gauges = {pod: leader_gauge(installed, pod) for pod in names}
    assert sorted(gauges.values()) == ["0.0", "1.0"], gauges
    assert gauges[leader] == "1.0"


def test_the_node_pulled_from_the_registry_which_wants_the_credentials(
    installed: NodeCluster, released: Released
) -> None:
    """The registry answers the image's manifest only to its account; the node's containerd
    fetched it as that account (the imagePullSecret's); a Pod without the Secret that must
    pull is refused."""
    registry = released.registry
    manifest = f"/v2/{IMAGE_PATH}/manifests/{released.digest}"
    accept = ("-H", "Accept: application/vnd.oci.image.manifest.v1+json")
    assert registry.status(manifest, *accept) == 401
    assert registry.status(manifest, *accept, "-u", f"{registry.username}:wrong") == 401
    account = f"{registry.username}:{registry.password}"
    assert registry.status(manifest, *accept, "-u", account) == 200
    pulls = [
        line
        for line in registry.log().splitlines()
        if 'msg="response completed"' in line
        and f'http.request.uri="{manifest}"' in line
        and re.search(r'http\.request\.useragent="?containerd/', line)  # quoted: 1.6.20~ds1
    ]
    assert pulls, registry.log()[-3000:]
    assert all(f"auth.user.name={registry.username} " in line for line in pulls), pulls
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "no-pull-secret"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "c", "image": released.image, "imagePullPolicy": "Always",
                 "command": ["true"]}
            ],
        },
    }  # fmt: skip
    installed.kubectl("apply", "-f", "-", input=json.dumps(pod))

    def refused() -> str:
        statuses = get(installed, "pod", "no-pull-secret").get("status", {})
        for status in statuses.get("containerStatuses") or []:
            waiting = status.get("state", {}).get("waiting") or {}
            if waiting.get("reason") in ("ErrImagePull", "ImagePullBackOff"):
                return str(waiting.get("message") or waiting["reason"])
        return ""

    message = wait_until(refused, "the pull without the Secret refused", 120)
    installed.kubectl("delete", "pod", "no-pull-secret", "--wait=false")
    assert "401" in message or "nauthorized" in message, message


def test_helm_test_reaches_the_webhook_over_tls(installed: NodeCluster) -> None:
    out = installed.helm("test", RELEASE, "--namespace", NAMESPACE, "--logs", check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "webhook answers with TLS" in out.stdout


def test_operator_logs_are_readable_through_the_api(installed: NodeCluster) -> None:
    pod = operator_pods(installed)[0]["metadata"]["name"]
    out = installed.kubectl("-n", NAMESPACE, "logs", pod)
    assert out.stdout.strip()
