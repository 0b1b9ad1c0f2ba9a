"""The operator's own webhook certificate: made into a Secret, its CA published in the
webhook configurations, rotated every few seconds (a short validity) while admission
requests keep coming — and not one of them refused."""

from __future__ import annotations

import socket
import ssl
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from kubernetes.client.exceptions import ApiException

from lattice_adapters import tls
from tests.support.admission_cases import build
from tests.support.cluster import Cluster, wait_for
from tests.support.sprites_server import LocalSprites
from tests.support.stack import WEBHOOK_HOST, operator_stack
from tests.support.webhooks import published_bundle, webhook_url

pytestmark = pytest.mark.e2e

SECRET = "lattice-webhook-tls"
CERTIFICATE = {"validity": 8.0, "rotate_before": 5.0, "propagation": 1.0, "reload_interval": 0.25}
ROTATIONS = 3
REQUEST_LIMIT = 3000  # a bounded loop: this many requests or the deadline, whichever first
DEADLINE = 90.0


def handshake(url: str, bundle: bytes) -> x509.Certificate:
    """A fresh TLS connection to the webhook server, verified with `bundle` (as an API
    server opening a new connection would); the certificate it was served."""
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    context = ssl.create_default_context(cadata=bundle.decode())
    with (
        socket.create_connection((host, int(port)), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=host) as conn,
    ):
        der = conn.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def steps(metrics_port: int) -> dict[str, float]:
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2) as resp:
        text = resp.read().decode()
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("lattice_webhook_cert_steps_total{"):
            name = line.split('step="', 1)[1].split('"', 1)[0]
            found[name] = float(line.rsplit(" ", 1)[1])
    return found


def test_requests_are_admitted_across_several_rotations(
    cluster: Cluster, namespace: str, local_sprites: LocalSprites, tmp_path: Path
) -> None:
    webhook = {
        "host": WEBHOOK_HOST,
        "port": 0,
        "certificate": {"secret": f"{namespace}/{SECRET}", **CERTIFICATE},
    }
    with operator_stack(cluster, local_sprites, tmp_path, webhook=webhook) as stack:
        wait_for(
            lambda: (
                cluster.kubectl("-n", namespace, "get", "secret", SECRET, check=False).returncode
                == 0
            ),
            what="the certificate Secret",
        )
        url = webhook_url(cluster)
        custom = cluster.custom
        policy: dict[str, Any] = build("intentpolicy.yaml", "rotating", {})
        bad: dict[str, Any] = build("intentpolicy.yaml", "broken", {})
        bad["spec"]["rules"][0]["match"] = "intent.spec.kind + 1"

        admitted = refused = handshakes = 0
        failures: list[str] = []
        cas: set[str] = set()
        started = time.monotonic()
        while (
            # Until the rotations are done and enough requests went through them: under load
            # (soak) only 26 requests fitted in three rotations.
            (steps(stack.metrics_port).get("drop", 0) < ROTATIONS or admitted < 10 * ROTATIONS)
            and admitted + refused < REQUEST_LIMIT
            and time.monotonic() - started < DEADLINE
        ):
            # Through the API server: the validating webhook (failurePolicy Fail) must
            # answer; a dry run stores nothing.
            try:
                custom.create_namespaced_custom_object(
                    "lattice.dev", "v1alpha1", namespace, "intentpolicies", policy, dry_run="All"
                )
                admitted += 1
            except ApiException as exc:
                refused += 1
                failures.append(f"{time.monotonic() - started:.2f}s: {exc.status} {exc.body}")
            # The webhook's own answer still arrives (the check runs, not just the TLS).
            try:
                custom.create_namespaced_custom_object(
                    "lattice.dev", "v1alpha1", namespace, "intentpolicies", bad, dry_run="All"
                )
                failures.append("a broken policy was admitted")
            except ApiException as exc:
                if "invalid rules" not in str(exc.body):
                    failures.append(f"refused for another reason: {exc.body}")
            # A brand-new connection, verified with what is published right now.
            try:
                served = handshake(url, published_bundle(cluster))
                handshakes += 1
            except (ssl.SSLError, OSError) as exc:
                failures.append(f"{time.monotonic() - started:.2f}s: handshake: {exc}")
            else:
                cas.add(f"{served.issuer.rfc4514_string()} {served.serial_number}")
        done = steps(stack.metrics_port)
        assert not failures, failures[:5]
        assert refused == 0
        assert done.get("drop", 0) >= ROTATIONS, (done, time.monotonic() - started)
        assert done.get("begin", 0) >= ROTATIONS
        assert "reissue" not in done  # never had to start afresh
        assert len(cas) >= ROTATIONS + 1, "handshakes saw the certificate change"
        assert admitted >= 10 * ROTATIONS
        # The old CA leaves the bundle: after a drop, one CA is published again.
        wait_for(
            lambda: len(tls.load_certificates(published_bundle(cluster))) == 1,
            timeout=10,
            what="a single CA in the bundle",
        )
        print(f"\n{admitted} admitted, {handshakes} handshakes, steps {done}")


def test_a_rotated_certificate_is_loaded_without_restarting_the_server(
    cluster: Cluster, namespace: str, local_sprites: LocalSprites, tmp_path: Path
) -> None:
    """Every replica loads the Secret's certificate when it changes, whoever changed it."""
    webhook = {
        "host": WEBHOOK_HOST,
        "port": 0,
        "certificate": {
            "secret": f"{namespace}/{SECRET}",
            "manage": False,  # as with cert-manager: another tool writes the Secret
            "reload_interval": 0.25,
        },
    }
    ca, ca_key, ca_cert = tls.make_ca("outside-ca")
    first = tls.serving_cert(ca_key, ca_cert, (WEBHOOK_HOST,))
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        ca.write(directory, "ca")
        first.write(directory, "tls")
        cluster.kubectl(
            "-n", namespace, "create", "secret", "generic", SECRET,
            f"--from-file=ca.crt={directory / 'ca.crt'}",
            f"--from-file=tls.crt={directory / 'tls.crt'}",
            f"--from-file=tls.key={directory / 'tls.key'}",
        )  # fmt: skip
        with operator_stack(cluster, local_sprites, tmp_path, webhook=webhook) as stack:
            url = webhook_url(cluster)
            served = handshake(url, ca.cert_pem)
            assert served.serial_number == tls.load_certificates(first.cert_pem)[0].serial_number
            second = tls.serving_cert(ca_key, ca_cert, (WEBHOOK_HOST,))
            second.write(directory, "tls2")
            manifest = cluster.kubectl(
                "-n", namespace, "create", "secret", "generic", SECRET,
                f"--from-file=ca.crt={directory / 'ca.crt'}",
                f"--from-file=tls.crt={directory / 'tls2.crt'}",
                f"--from-file=tls.key={directory / 'tls2.key'}",
                "--dry-run=client", "-o", "yaml",
            ).stdout  # fmt: skip
            cluster.kubectl("apply", "-f", "-", input=manifest)
            want = tls.load_certificates(second.cert_pem)[0].serial_number
            wait_for(
                lambda: handshake(url, ca.cert_pem).serial_number == want,
                timeout=10,
                what="the server to serve the new certificate",
            )
            assert stack.operator.alive()
            assert "loaded the new certificate" in stack.operator.log()
            # Not the operator's to manage: the Secret holds what the other tool wrote.
            secret = cluster.core.read_namespaced_secret(SECRET, namespace)
            assert "ca.key" not in (secret.data or {})
