"""Static checks of charts/lattice-operator: lint, schema, CRDs, settings, webhooks, RBAC,
documentation, and the restricted Pod Security profile."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from lattice_operator.handlers.admission_config import webhook_configurations
from lattice_operator.handlers.admission_policy import BINDINGS, POLICIES, admission_policies
from lattice_operator.settings import OperatorSettings
from tests.support.helm import CHART, MATRIX, NAMESPACE, RELEASE, ROOT, find, helm, render

OPERATOR_ROLE = f"{RELEASE}-lattice-operator"


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
        ("stream.port=0", "/stream/port"),
        ("github.webhookport=8082", "additional properties 'webhookport' not allowed"),
        ("github.apiUrl=api.github.example", "/github/apiUrl"),
        ("github.tokenSecret=Not_A_Name", "/github/tokenSecret"),
        (
            "github.enabled=true",
            "github.enabled needs github.tokenSecret, or github.appId, github.installationId "
            "and github.appKeySecret",
        ),
        ("github.enabled=true,github.appId=1,github.tokenSecret=t", "exclude each other"),
        ("fly.enabled=true", "fly.enabled needs fly.tokenSecret"),
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


def test_admission_policies_match_what_the_operator_would_register() -> None:
    """The same policies, character for character, with this release's ServiceAccount as the
    operator's identity, each bound under its own name."""
    docs = render()
    operator = f"system:serviceaccount:{NAMESPACE}:{RELEASE}-lattice-operator"
    expected = admission_policies(f"{RELEASE}-lattice-operator", operator)
    chart = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"]
    assert [(p["metadata"]["name"], p["spec"]) for p in chart] == [
        (p["metadata"]["name"], p["spec"]) for p in expected[POLICIES]
    ]
    bindings = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert [(b["metadata"]["name"], b["spec"]) for b in bindings] == [
        (b["metadata"]["name"], b["spec"]) for b in expected[BINDINGS]
    ]


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
    # The GitHub credential's Secret is granted by name too (test_github_*).
    secrets = [r for r in _rules(own, "secrets") if not {"github-token", "github-app"} & set(r[1])]
    if case == "cert-manager":  # cert-manager writes it; the operator only reads it
        assert secrets == [(["get"], [secret])]
    else:
        assert secrets == [(["create"], []), (["get", "update"], [secret])]
    binding = find(docs, "RoleBinding", f"{RELEASE}-lattice-operator-self")
    assert binding["roleRef"]["name"] == own["metadata"]["name"]
    webhooks = _rules(find(docs, "ClusterRole", OPERATOR_ROLE), "validatingwebhookconfigurations")
    if case == "cert-manager":  # cert-manager's CA injector keeps the caBundle
        assert webhooks == []
    else:
        assert webhooks == [(["get", "patch"], [f"{RELEASE}-lattice-operator"])]


def test_rbac_cluster_wide_by_default() -> None:
    docs = render()
    roles = [d for d in docs if d["kind"] in ("Role", "RoleBinding")]
    assert [r["metadata"]["name"] for r in roles] == [f"{RELEASE}-lattice-operator-self"] * 2
    role = find(docs, "ClusterRole", OPERATOR_ROLE)
    assert _lattice_rules(role)
    secrets = [r for r in role["rules"] if "secrets" in r["resources"]]
    assert [r["verbs"] for r in secrets] == [["get"]]  # never list or watch Secrets
    assert not [r for r in role["rules"] if "*" in r["verbs"] or "*" in r["resources"]]


@pytest.mark.parametrize("case", ["default", "namespaced"])
def test_promoting_into_the_cluster_environment_is_a_role_of_its_own(case: str) -> None:
    docs = render(*MATRIX[case])
    promoter = find(docs, "ClusterRole", f"{OPERATOR_ROLE}-environment-promoter")
    assert _rules(promoter, "environments") == [(["get", "patch"], ["default"]), (["create"], [])]
    assert _rules(promoter, "intents") == [(["get", "list"], [])]
    # Nobody is bound to it by the chart; the operator only reads the Environment.
    bindings = [d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    assert all(b["roleRef"]["name"] != promoter["metadata"]["name"] for b in bindings)
    assert _rules(find(docs, "ClusterRole", OPERATOR_ROLE), "environments") == [
        (["list", "watch"], [])
    ]


def test_rbac_namespaced_mode_grants_only_in_the_watched_namespaces() -> None:
    docs = render(*MATRIX["namespaced"])
    # Only the cluster-scoped Environment, read-only: nothing namespaced is granted cluster-wide.
    assert _lattice_rules(find(docs, "ClusterRole", OPERATOR_ROLE)) == [
        {"apiGroups": ["lattice.dev"], "resources": ["environments"], "verbs": ["list", "watch"]}
    ]
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
        f"{RELEASE}-lattice-operator-webhook",
        f"{RELEASE}-lattice-operator-stream",
    ]
    (container,) = find(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert "metrics" not in [p["name"] for p in container["ports"]]


def _documented_values() -> set[str]:
    readme = (CHART / "README.md").read_text()
    return set(re.findall(r"^\| `([A-Za-z0-9.]+)` \|", readme, flags=re.MULTILINE))


def _commented_values() -> set[str]:
    """Keys of values.yaml preceded by a `# --` description."""
    keys: set[str] = set()
    stack: list[str] = []
    pending = False
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


def _settings(docs: list[dict[str, Any]]) -> OperatorSettings:
    text = find(docs, "ConfigMap", f"{RELEASE}-lattice-operator")["data"]["settings.yaml"]
    return OperatorSettings.model_validate(yaml.safe_load(text))


def _container_ports(docs: list[dict[str, Any]]) -> dict[str, int]:
    (container,) = find(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return {p["name"]: p["containerPort"] for p in container["ports"]}


def _ingress_ports(docs: list[dict[str, Any]]) -> set[int]:
    policy = find(docs, "NetworkPolicy")
    return {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}


def _matches(selector: str, labels: dict[str, str]) -> bool:
    pairs = (term.split("=", 1) for term in selector.split(","))
    return all(labels.get(key) == value for key, value in pairs)


LEADER = {"lattice.dev/leader": "true"}


def test_the_stream_service_reaches_the_leader_only() -> None:
    docs = render()
    settings = _settings(docs)
    assert (settings.stream.host, settings.stream.port) == ("0.0.0.0", 8081)
    assert _container_ports(docs)["stream"] == 8081
    service = find(docs, "Service", f"{RELEASE}-lattice-operator-stream")
    pod_labels = find(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    # The Service selects the Pods of the release carrying the label the leader puts on.
    assert service["spec"]["selector"] == {**pod_labels, **LEADER}
    assert service["spec"]["ports"] == [{"name": "stream", "port": 8081, "targetPort": "stream"}]
    election = settings.leader_election
    assert election.pod_label == "lattice.dev/leader"
    assert _matches(election.pod_selector, pod_labels)  # the new leader unlabels these
    assert not _matches(election.pod_selector, {**pod_labels, "app.kubernetes.io/instance": "x"})
    assert "lattice.dev/leader" not in pod_labels  # never in the template: the leader sets it
    # Pods: listed and patched in the release's namespace only, never cluster-wide.
    own = find(docs, "Role", f"{RELEASE}-lattice-operator-self")
    assert _rules(own, "pods") == [(["list", "patch"], [])]
    cluster_role = find(docs, "ClusterRole", OPERATOR_ROLE)
    assert _rules(cluster_role, "pods") == []
    assert _rules(cluster_role, "tokenreviews") == [(["create"], [])]
    assert _rules(cluster_role, "subjectaccessreviews") == [(["create"], [])]
    assert 8081 in _ingress_ports(docs)
    assert not [d for d in docs if d["metadata"]["name"].endswith("-github")]
    assert not settings.forge.configured
    assert settings.forge.webhook_port == 0


def test_stream_off_removes_its_service_port_and_grants() -> None:
    docs = render("--set", "stream.enabled=false")
    settings = _settings(docs)
    assert settings.stream.port == 0
    assert settings.leader_election.pod_label is None  # no Service needs the label
    assert "stream" not in _container_ports(docs)
    assert not [d for d in docs if d["metadata"]["name"].endswith("-stream")]
    assert _rules(find(docs, "ClusterRole", OPERATOR_ROLE), "tokenreviews") == []
    assert _rules(find(docs, "Role", f"{RELEASE}-lattice-operator-self"), "pods") == []
    assert 8081 not in _ingress_ports(docs)


def test_without_leader_election_the_services_select_every_pod() -> None:
    docs = render("--set", "leaderElection.enabled=false", "--set", "replicaCount=1")
    pod_labels = find(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    service = find(docs, "Service", f"{RELEASE}-lattice-operator-stream")
    assert service["spec"]["selector"] == pod_labels
    assert _settings(docs).leader_election.pod_label is None
    assert _rules(find(docs, "Role", f"{RELEASE}-lattice-operator-self"), "pods") == []


def _github_egress(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Egress rules after DNS, the API server and the Sprites API."""
    return list(find(docs, "NetworkPolicy")["spec"]["egress"][3:])


def test_github_with_a_token_from_values() -> None:
    docs = render(*MATRIX["github-token"], "--set", "github.webhookPort=9000")
    forge = _settings(docs).forge
    assert forge.configured
    assert forge.token_secret == f"{NAMESPACE}/github-token"
    assert (forge.app_id, forge.app_key_secret) == (None, None)
    assert (forge.webhook_host, forge.webhook_port) == ("0.0.0.0", 9000)
    assert forge.api_url == "https://api.github.com"
    assert forge.max_payload_bytes == 5 * 1024 * 1024
    assert _container_ports(docs)["github"] == 9000
    service = find(docs, "Service", f"{RELEASE}-lattice-operator-github")
    assert service["spec"]["selector"]["lattice.dev/leader"] == "true"
    assert service["spec"]["ports"] == [{"name": "github", "port": 9000, "targetPort": "github"}]
    assert not [d for d in docs if d["kind"] == "Ingress"]  # exposing it is the user's choice
    own = find(docs, "Role", f"{RELEASE}-lattice-operator-self")
    assert (["get"], ["github-token"]) in _rules(own, "secrets")
    assert 9000 in _ingress_ports(docs)
    # Egress to GitHub: any address on 443 unless narrowed.
    assert _github_egress(docs) == [{"ports": [{"protocol": "TCP", "port": 443}]}]


def test_github_as_an_app_with_narrowed_egress() -> None:
    docs = render(
        *MATRIX["github-app-stream-off"],
        "--set", "github.apiUrl=https://ghe.example/api/v3",
        "--set", "github.gitUrl=https://ghe.example/{repo}.git",
        "--set", "networkPolicy.githubCIDRs={192.0.2.0/24,198.51.100.0/24}",
    )  # fmt: skip
    forge = _settings(docs).forge
    assert forge.configured
    assert (forge.app_id, forge.installation_id) == ("123", 45)
    assert forge.app_key_secret == f"{NAMESPACE}/github-app"
    assert forge.token_secret is None
    assert (forge.api_url, forge.git_url) == (
        "https://ghe.example/api/v3",
        "https://ghe.example/{repo}.git",
    )
    own = find(docs, "Role", f"{RELEASE}-lattice-operator-self")
    assert (["get"], ["github-app"]) in _rules(own, "secrets")
    # The GitHub Service needs the leader label even with the stream off.
    assert _rules(own, "pods") == [(["list", "patch"], [])]
    assert _settings(docs).leader_election.pod_label == "lattice.dev/leader"
    assert _github_egress(docs) == [
        {
            "to": [{"ipBlock": {"cidr": "192.0.2.0/24"}}, {"ipBlock": {"cidr": "198.51.100.0/24"}}],
            "ports": [{"protocol": "TCP", "port": 443}],
        }
    ]


def test_github_off_by_default_grants_and_opens_nothing_for_it() -> None:
    docs = render()
    assert len(find(docs, "NetworkPolicy")["spec"]["egress"]) == 3
    own = find(docs, "Role", f"{RELEASE}-lattice-operator-self")
    assert not [r for r in _rules(own, "secrets") if "github-token" in r[1]]
    assert "github" not in _container_ports(docs)


def test_fly_with_a_token_from_values() -> None:
    docs = render(
        "--set", "fly.enabled=true",
        "--set", "fly.tokenSecret=fly-token",
        "--set", "networkPolicy.flyCIDRs={192.0.2.0/24}",
    )  # fmt: skip
    fly = _settings(docs).fly
    assert fly.configured
    assert fly.token_secret == f"{NAMESPACE}/fly-token"
    assert fly.api_url == "https://api.machines.dev/v1"
    own = find(docs, "Role", f"{RELEASE}-lattice-operator-self")
    assert (["get"], ["fly-token"]) in _rules(own, "secrets")
    egress = find(docs, "NetworkPolicy")["spec"]["egress"]
    assert {
        "to": [{"ipBlock": {"cidr": "192.0.2.0/24"}}],
        "ports": [{"protocol": "TCP", "port": 443}],
    } in egress


def test_fly_off_by_default_grants_and_opens_nothing_for_it() -> None:
    docs = render("--set", "fly.tokenSecret=fly-token")  # a name alone turns nothing on
    assert not _settings(docs).fly.configured
    own = find(docs, "Role", f"{RELEASE}-lattice-operator-self")
    assert not [r for r in _rules(own, "secrets") if "fly-token" in r[1]]
    assert len(find(docs, "NetworkPolicy")["spec"]["egress"]) == 3


def test_webhook_callers_are_limited_when_configured() -> None:
    # Default: no client certificate asked for, any source, bounded requests.
    default = _settings(render())
    assert default.webhook.client_ca_file is None
    assert (default.webhook.max_body_bytes, default.webhook.request_timeout) == (4194304, 10)
    docs = render(*MATRIX["webhook-callers"])
    webhook = _settings(docs).webhook
    assert webhook.client_ca_file == "/etc/lattice/webhook-client-ca/ca.crt"
    assert webhook.client_names == ("apiserver-webhook-client",)
    pod = find(docs, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["webhook-client-ca"] == "/etc/lattice/webhook-client-ca"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["webhook-client-ca"]["configMap"]["name"] == "apiserver-webhook-client-ca"
    ingress = find(docs, "NetworkPolicy")["spec"]["ingress"]
    [to_webhook] = [r for r in ingress if {"protocol": "TCP", "port": 9443} in r["ports"]]
    assert to_webhook["from"] == [{"ipBlock": {"cidr": "10.0.0.10/32"}}]
    assert to_webhook["ports"] == [{"protocol": "TCP", "port": 9443}]
