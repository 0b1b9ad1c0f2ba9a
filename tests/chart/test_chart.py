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
        ("leaderElection.leaseDurationSeconds=0", "/leaderElection/leaseDurationSeconds"),
        (
            "leaderElection.renewDeadlineSeconds=20",
            "leaderElection.leaseDurationSeconds must be greater than",
        ),
        ("leaderElection.retryPeriodSeconds=9", "must be greater than 1.2 x"),
        ("webhook.certRotateBeforeDays=400", "certRotateBeforeDays must be less than"),
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
    assert settings.webhook.configuration == f"{RELEASE}-lattice-operator"  # their caBundle
    assert settings.webhook.cert_file is None
    cert = settings.webhook.certificate
    assert cert.secret == f"{NAMESPACE}/{RELEASE}-lattice-operator-webhook-tls"
    assert cert.manage is (case != "cert-manager")  # the operator rotates it by default
    election = settings.leader_election
    assert election.enabled  # one replica too: a rolling update runs two Pods at once
    assert (election.lease_name, election.lease_namespace) == (
        f"{RELEASE}-lattice-operator",
        NAMESPACE,
    )
    assert (settings.metrics_port == 0) is (case == "metrics-off")


def test_sprites_backend_from_values() -> None:
    docs = render(
        "--set", "sprites.apiUrl=https://sprites.example", "--set", "sprites.tokenSecret=tok"
    )
    text = find(docs, "ConfigMap", f"{RELEASE}-lattice-operator")["data"]["settings.yaml"]
    settings = OperatorSettings.model_validate(yaml.safe_load(text))
    assert settings.backend.api_url == "https://sprites.example"
    assert settings.backend.token_secret == f"{NAMESPACE}/tok"
    # Readable in the release's namespace whatever watchNamespaces says.
    own = find(docs, "Role", f"{RELEASE}-lattice-operator-self")
    assert (["get"], ["tok"]) in _rules(own, "secrets")


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
            # The operator writes the caBundle and keeps it current; an upgrade must not
            # put back an old one.
            assert "caBundle" not in w["clientConfig"]


def test_the_operator_makes_the_certificate_not_the_chart() -> None:
    from lattice_operator.handlers.webhook_cert import serving_names

    docs = render()
    assert not [d for d in docs if d["kind"] in ("Secret", "Certificate", "Issuer")]
    settings = OperatorSettings.model_validate(
        yaml.safe_load(
            find(docs, "ConfigMap", f"{RELEASE}-lattice-operator")["data"]["settings.yaml"]
        )
    )
    service = find(docs, "Service", f"{RELEASE}-lattice-operator-webhook")
    # The names the operator's certificate is made for include the one the API server dials.
    assert f"{service['metadata']['name']}.{NAMESPACE}.svc" in serving_names(settings.webhook)
    assert settings.webhook.certificate.validity == 365 * 86400
    assert settings.webhook.certificate.rotate_before == 30 * 86400


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


def _lattice_rules(role: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in role["rules"] if "lattice.dev" in r["apiGroups"]]


def _rules(role: dict[str, Any], resource: str) -> list[tuple[list[str], list[str]]]:
    return [
        (sorted(r["verbs"]), r.get("resourceNames", []))
        for r in role["rules"]
        if resource in r["resources"]
    ]


@pytest.mark.parametrize("case", sorted(MATRIX))
def test_the_lease_and_the_certificate_secret_are_granted_by_name(case: str) -> None:
    docs = render(*MATRIX[case])
    own = find(docs, "Role", f"{RELEASE}-lattice-operator-self")
    assert own["metadata"]["namespace"] == NAMESPACE
    lease, secret = f"{RELEASE}-lattice-operator", f"{RELEASE}-lattice-operator-webhook-tls"
    assert _rules(own, "leases") == [(["create"], []), (["get", "update"], [lease])]
    if case == "cert-manager":  # cert-manager writes it; the operator only reads it
        assert _rules(own, "secrets") == [(["get"], [secret])]
    else:
        assert _rules(own, "secrets") == [(["create"], []), (["get", "update"], [secret])]
    binding = find(docs, "RoleBinding", f"{RELEASE}-lattice-operator-self")
    assert binding["roleRef"]["name"] == own["metadata"]["name"]
    webhooks = _rules(find(docs, "ClusterRole"), "validatingwebhookconfigurations")
    if case == "cert-manager":  # cert-manager's CA injector keeps the caBundle
        assert webhooks == []
    else:
        assert webhooks == [(["get", "patch"], [f"{RELEASE}-lattice-operator"])]


def test_rbac_cluster_wide_by_default() -> None:
    docs = render()
    roles = [d for d in docs if d["kind"] in ("Role", "RoleBinding")]
    assert [r["metadata"]["name"] for r in roles] == [f"{RELEASE}-lattice-operator-self"] * 2
    role = find(docs, "ClusterRole")
    assert _lattice_rules(role)
    secrets = [r for r in role["rules"] if "secrets" in r["resources"]]
    assert [r["verbs"] for r in secrets] == [["get"]]  # never list or watch Secrets
    assert not [r for r in role["rules"] if "*" in r["verbs"] or "*" in r["resources"]]


def test_rbac_namespaced_mode_grants_only_in_the_watched_namespaces() -> None:
    docs = render(*MATRIX["namespaced"])
    assert not _lattice_rules(find(docs, "ClusterRole"))
    roles = [d for d in docs if d["kind"] == "Role" and not d["metadata"]["name"].endswith("-self")]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    assert all(_lattice_rules(r) for r in roles)
    bindings = [d for d in docs if d["kind"] == "RoleBinding"]
    # ... and the release's own namespace: the Lease and the certificate Secret.
    assert sorted(b["metadata"]["namespace"] for b in bindings) == sorted(
        ["team-a", "team-b", NAMESPACE]
    )


@pytest.mark.parametrize("case", sorted(MATRIX))
def test_pods_meet_the_restricted_profile(case: str) -> None:
    docs = render(*MATRIX[case])
    pods = [find(docs, "Deployment")["spec"]["template"]["spec"]]
    pods += [d["spec"] for d in docs if d["kind"] == "Pod"]  # the helm test hook
    for pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        for container in pod["containers"]:
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["capabilities"]["drop"] == ["ALL"]


def test_a_deployment_rolls_a_new_pod_in_before_an_old_one_goes() -> None:
    deployment = find(render(), "Deployment")
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    # holderIdentity is the Pod's name; the Lease lives in its namespace.
    assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    assert not [d for d in render() if d["kind"] == "StatefulSet"]
    assert not [d for d in render(*MATRIX["one-replica"]) if d["kind"] == "PodDisruptionBudget"]


def test_leader_election_timings_come_from_values() -> None:
    docs = render(
        "--set", "leaderElection.leaseDurationSeconds=30",
        "--set", "leaderElection.renewDeadlineSeconds=20",
        "--set", "leaderElection.retryPeriodSeconds=4",
        "--set", "leaderElection.leaseName=my-lease",
    )  # fmt: skip
    settings = OperatorSettings.model_validate(
        yaml.safe_load(
            find(docs, "ConfigMap", f"{RELEASE}-lattice-operator")["data"]["settings.yaml"]
        )
    )
    election = settings.leader_election
    assert (election.lease_duration, election.renew_deadline, election.retry_period) == (
        30,
        20,
        4,
    )
    own = find(docs, "Role", f"{RELEASE}-lattice-operator-self")
    assert _rules(own, "leases")[1] == (["get", "update"], ["my-lease"])


def test_metrics_off_removes_the_metrics_service_and_port() -> None:
    docs = render(*MATRIX["metrics-off"])
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Service"] == [
        f"{RELEASE}-lattice-operator-webhook"
    ]
    (container,) = find(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
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
