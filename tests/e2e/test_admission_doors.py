"""The admission port's doors, against the real API server: the operator requires the API
server's client certificate (the local control plane presents one to webhooks, as a
cluster's AdmissionConfiguration does); a caller without it is turned away at the TLS
handshake; with it, an oversized request is refused before it is read, and a hostile
IntentPolicy rule is refused when stored, at once, naming the rule."""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lattice_devtools.localcluster.controlplane import WEBHOOK_CLIENT
from tests.support.cluster import Cluster
from tests.support.sprites_server import LocalSprites
from tests.support.stack import WEBHOOK_HOST, Stack, operator_stack
from tests.support.webhooks import published_bundle, webhook_url

pytestmark = pytest.mark.e2e

TWELVE = "[1,2,3,4,5,6,7,8,9,10,11,12]"
HOSTILE = f"{TWELVE}.all(a,{TWELVE}.all(b,{TWELVE}.all(c,a+b+c>0)))"
MAX_BODY = 256 * 1024


@pytest.fixture(scope="module")
def guarded(
    cluster: Cluster, local_sprites: LocalSprites, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    if cluster.local is None:
        pytest.skip("needs the local control plane (its API server presents a client cert)")
    webhook = {
        "host": WEBHOOK_HOST,
        "port": 0,
        "client_ca_file": str(cluster.local.webhook_client_ca),
        "client_names": [WEBHOOK_CLIENT],
        "max_body_bytes": MAX_BODY,
    }
    log_dir: Path = tmp_path_factory.mktemp("operator")
    with operator_stack(cluster, local_sprites, log_dir, webhook=webhook) as stack:
        webhook_url(cluster)
        yield stack


def _policy(match: str) -> dict[str, Any]:
    return {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "IntentPolicy",
        "metadata": {"name": "hostile"},
        "spec": {
            "rules": [{"name": "hostile", "match": match, "risk": "safe", "outcome": "allow"}]
        },
    }


def _review(obj: dict[str, Any]) -> bytes:
    request = {
        "uid": "0",
        "kind": {"group": "lattice.dev", "version": "v1alpha1", "kind": "IntentPolicy"},
        "resource": {"group": "lattice.dev", "version": "v1alpha1", "resource": "intentpolicies"},
        "namespace": "default",
        "operation": "CREATE",
        "userInfo": {"username": "someone"},
        "object": obj,
    }
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(review).encode()


def _context(cluster: Cluster, *, with_certificate: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=published_bundle(cluster).decode())
    context.check_hostname = False  # the URL names the address the certificate is for
    if with_certificate:
        assert cluster.local is not None
        users = yaml.safe_load((cluster.local.pki / "webhook-client.kubeconfig").read_text())
        user = users["users"][0]["user"]
        with tempfile.TemporaryDirectory() as directory:
            cert, key = Path(directory, "c.pem"), Path(directory, "k.pem")
            cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
            key.write_bytes(base64.b64decode(user["client-key-data"]))
            context.load_cert_chain(cert, key)
    return context


def _post(cluster: Cluster, body: bytes, *, with_certificate: bool) -> tuple[int, str]:
    url = webhook_url(cluster).rsplit("/", 1)[0] + "/check-policy"
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    context = _context(cluster, with_certificate=with_certificate)
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_hostile_rule_is_refused_through_the_api_server(guarded: Stack, namespace: str) -> None:
    out = guarded.cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", input=json.dumps(_policy(HOSTILE)), check=False
    )
    assert out.returncode != 0
    assert "spec.rules[0] (hostile): too costly" in out.stderr, out.stderr
    # Refused before it was stored.
    assert guarded.find(namespace, "intentpolicies", "hostile") is None


def test_a_caller_without_the_client_certificate_is_turned_away(guarded: Stack) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError, urllib.error.URLError)):
        _post(guarded.cluster, _review(_policy(HOSTILE)), with_certificate=False)


def test_with_the_certificate_the_hostile_review_is_answered_and_a_large_one_refused(
    guarded: Stack,
) -> None:
    status, text = _post(guarded.cluster, _review(_policy(HOSTILE)), with_certificate=True)
    assert status == 200, text
    response = json.loads(text)["response"]
    assert response["allowed"] is False
    assert "spec.rules[0] (hostile): too costly" in response["status"]["message"]
    large = _policy("true")
    large["metadata"]["annotations"] = {"padding": "x" * MAX_BODY}
    status, text = _post(guarded.cluster, _review(large), with_certificate=True)
    assert status == 413, text
    assert f"limited to {MAX_BODY} bytes" in text
