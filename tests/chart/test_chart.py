"""Static checks of charts/lattice-operator: lint, schema, CRDs, settings, webhooks, RBAC,
documentation, and the restricted Pod Security profile."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from lattice_operator.handlers.admission_config import webhook_configurations
from lattice_operator.settings import OperatorSettings
from tests.support.helm import CHART, MATRIX, NAMESPACE, RELEASE, ROOT, find, helm, render


def test_helm_lint_strict() -> None:
    out = helm("lint", "--strict", str(CHART))
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("case", sorted(MATRIX))
def test_lint_strict_for_each_case(case: str) -> None:
    out = helm("lint", "--strict", str(CHART), *MATRIX[case])
    assert out.returncode == 0, out.stdout + out.stderr


def test_chart_crds_are_the_generated_ones() -> None:
    generated = {p.name: p.read_text() for p in (ROOT / "crds").glob("*.yaml")}
    shipped = {p.name: p.read_text() for p in (CHART / "crds").glob("*.yaml")}
    assert shipped == generated, "charts/lattice-operator/crds differs from crds/: copy them again"


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("replicas=3", "additional properties 'replicas' not allowed"),
        ("image.pullPolicy=Sometimes", "value must be one of"),
        ("webhook.prot=9443", "additional properties 'prot' not allowed"),
        ("sprites.apiUrl=sprites.example", "/sprites/apiUrl"),
    ],
)
def test_misspelt_or_invalid_values_fail_with_the_schema_message(flag: str, message: str) -> None:
    out = helm("template", RELEASE, str(CHART), "--set", flag)
    assert out.returncode != 0
    assert message in out.stderr, out.stderr


@pytest.mark.parametrize("case", sorted(MATRIX))
def test_rendered_settings_are_valid_operator_settings(case: str) -> None:
    docs = render(*MATRIX[case])
    text = find(docs, "ConfigMap", f"{RELEASE}-lattice-operator")["data"]["settings.yaml"]
    settings = OperatorSettings.model_validate(yaml.safe_load(text))
    assert settings.webhook.managed is None  # the chart owns the webhook configurations
    assert settings.webhook.cert_file == "/tls/tls.crt"
    assert settings.peering.standalone is (case == "one-replica")
    assert (settings.metrics_port == 0) is (case == "metrics-off")


def test_sprites_backend_from_values() -> None:
    docs = render(
        "--set", "sprites.apiUrl=https://sprites.example", "--set", "sprites.tokenSecret=tok"
    )
    text = find(docs, "ConfigMap", f"{RELEASE}-lattice-operator")["data"]["settings.yaml"]
    settings = OperatorSettings.model_validate(yaml.safe_load(text))
    assert settings.backend.api_url == "https://sprites.example"
    assert settings.backend.token_secret == f"{NAMESPACE}/tok"


def _comparable(webhook: dict[str, Any]) -> dict[str, Any]:
    """A webhook without its CA, its matchConditions' whitespace normalised."""
    out = {k: v for k, v in webhook.items() if k != "clientConfig"}
    out["path"] = webhook["clientConfig"]["service"]["path"]
    out["matchConditions"] = [
        {"name": c["name"], "expression": re.sub(r"\s+", "", c["expression"])}
        for c in webhook.get("matchConditions", [])
    ]
    return out


def test_webhooks_match_what_the_operator_would_register() -> None:
    docs = render()
    service = {"namespace": NAMESPACE, "name": f"{RELEASE}-lattice-operator-webhook", "port": 443}
    expected = webhook_configurations("lattice.dev", {"service": service, "caBundle": "CA"})
    for plural, kind in (
        ("mutatingwebhookconfigurations", "MutatingWebhookConfiguration"),
        ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration"),
    ):
        chart = find(docs, kind)["webhooks"]
        ours = expected[plural]["webhooks"]
        assert [_comparable(w) for w in chart] == [_comparable(w) for w in ours]
        for w in chart:
            assert w["clientConfig"]["service"]["name"] == service["name"]
            assert w["clientConfig"]["caBundle"]  # the chart-made CA


def test_cert_manager_mode_injects_the_ca_and_makes_no_secret() -> None:
    docs = render(*MATRIX["cert-manager"])
    assert not [d for d in docs if d["kind"] == "Secret"]
    cert = find(docs, "Certificate")
    assert cert["spec"]["secretName"] == f"{RELEASE}-lattice-operator-webhook-tls"
    hook = find(docs, "ValidatingWebhookConfiguration")
    assert hook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        f"{NAMESPACE}/{RELEASE}-lattice-operator-webhook-tls"
    )
    assert all("caBundle" not in w["clientConfig"] for w in hook["webhooks"])


def test_webhook_certificate_names_the_service() -> None:
    from base64 import b64decode

    from cryptography import x509

    secret = find(render(), "Secret")
    cert = x509.load_pem_x509_certificate(b64decode(secret["data"]["tls.crt"]))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"{RELEASE}-lattice-operator-webhook.{NAMESPACE}.svc" in names.get_values_for_type(
        x509.DNSName
    )


def _lattice_rules(role: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in role["rules"] if "lattice.dev" in r["apiGroups"]]


def test_rbac_cluster_wide_by_default() -> None:
    docs = render()
    assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding")]
    role = find(docs, "ClusterRole")
    assert _lattice_rules(role)
    secrets = [r for r in role["rules"] if "secrets" in r["resources"]]
    assert [r["verbs"] for r in secrets] == [["get"]]  # never list or watch Secrets
    assert not [r for r in role["rules"] if "*" in r["verbs"] or "*" in r["resources"]]


def test_rbac_namespaced_mode_grants_only_in_the_watched_namespaces() -> None:
    docs = render(*MATRIX["namespaced"])
    assert not _lattice_rules(find(docs, "ClusterRole"))
    roles = [d for d in docs if d["kind"] == "Role"]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    assert all(_lattice_rules(r) for r in roles)
    bindings = [d for d in docs if d["kind"] == "RoleBinding"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    peerings = [d for d in docs if d["kind"] == "KopfPeering"]
    assert sorted(p["metadata"]["namespace"] for p in peerings) == ["team-a", "team-b"]


@pytest.mark.parametrize("case", sorted(MATRIX))
def test_pods_meet_the_restricted_profile(case: str) -> None:
    docs = render(*MATRIX[case])
    pods = [find(docs, "StatefulSet")["spec"]["template"]["spec"]]
    pods += [d["spec"] for d in docs if d["kind"] == "Pod"]  # the helm test hook
    for pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        for container in pod["containers"]:
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["capabilities"]["drop"] == ["ALL"]


def test_replicas_get_distinct_peering_priorities() -> None:
    pod = find(render(), "StatefulSet")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "--priority=$(POD_INDEX)" in container["args"]
    (env,) = [e for e in container["env"] if e["name"] == "POD_INDEX"]
    assert env["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.labels['apps.kubernetes.io/pod-index']"
    )
    one = find(render(*MATRIX["one-replica"]), "StatefulSet")["spec"]["template"]["spec"]
    assert not [a for a in one["containers"][0]["args"] if a.startswith("--priority")]
    assert not [d for d in render(*MATRIX["one-replica"]) if d["kind"] == "PodDisruptionBudget"]


def test_metrics_off_removes_the_metrics_service_and_port() -> None:
    docs = render(*MATRIX["metrics-off"])
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Service"] == [
        f"{RELEASE}-lattice-operator-webhook"
    ]
    (container,) = find(docs, "StatefulSet")["spec"]["template"]["spec"]["containers"]
    assert "metrics" not in [p["name"] for p in container["ports"]]


def _documented_values() -> set[str]:
    readme = (CHART / "README.md").read_text()
    return set(re.findall(r"^\| `([A-Za-z0-9.]+)` \|", readme, flags=re.MULTILINE))


def _commented_values() -> set[str]:
    """Keys of values.yaml preceded by a `# --` description."""
    keys, stack, pending = set(), [], False
    for line in (CHART / "values.yaml").read_text().splitlines():
        if re.match(r"^\s*# -- ", line):
            pending = True
            continue
        m = re.match(r"^(\s*)([A-Za-z][A-Za-z0-9]*):", line)
        if m:
            stack = [*stack[: len(m.group(1)) // 2], m.group(2)]
            if pending:
                keys.add(".".join(stack))
            pending = False
    return keys


def _leaves(values: Any, prefix: str = "") -> set[str]:
    if isinstance(values, dict) and values:
        return set().union(*(_leaves(v, f"{prefix}{k}.") for k, v in values.items()))
    return {prefix.rstrip(".")}


def test_every_value_is_documented_and_every_documented_value_exists() -> None:
    documented, commented = _documented_values(), _commented_values()
    assert documented == commented
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for leaf in _leaves(values):
        assert any(leaf == d or leaf.startswith(f"{d}.") for d in documented), (
            f"{leaf} is not documented in the chart README"
        )
