"""The design's GitHub loops end to end: the operator (a real process) against the local
GitHub (every request checked against GitHub's OpenAPI description; real git pushes through
git http-backend), agents in local sprites, webhooks delivered as GitHub sends them (real
payload shapes, signed).

Loop 1: issue opened → triage comment → a person answers → plan comment → approval by
comment (a mapped GitHub user; an unmapped one is refused and answered) → execution.
Loop 2: plan → branch pushed, PR opened → review → fixup commit pushed, PR commented.
Loop 3: a project issue → proposed task issues drafted for approval, created after approval.
Loop 4: an issue labelled as a question → the agent's sourced notes, then its plan, posted.
Loop 5: a scheduled check fails → one issue opened, then updated, not duplicated.
Loop 6: code pushed to main → its docs updated by a PR, or one issue kept while they lag.
Bad input: a bad signature, an oversized payload, a replayed delivery, an unknown event; a
sprite branch that rewrites history or the base branch is refused and nothing is pushed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from lattice_adapters.sprites import SpritesAdapter
from lattice_devtools.localcluster.controlplane import free_port
from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.api.v1alpha1.githubrepository import GitHubRepository
from lattice_operator.forge.builders import plan_intent
from lattice_operator.forge.webhooks import route
from lattice_operator.reconcilers.approvals import RECORDS
from tests.support.admission_cases import build
from tests.support.agents import agent
from tests.support.cluster import Cluster, wait_for
from tests.support.e2e_intents import APPROVER_ROLE, bind_role, kubectl_as
from tests.support.github import payloads
from tests.support.github.server import GitHubDouble, github_double
from tests.support.sprites_server import LocalSprites
from tests.support.stack import Stack, operator_stack

pytestmark = pytest.mark.e2e

REPO = "octo/app"
TOKEN = "ghp_operator-token-for-tests"
HOOK_SECRET = b"webhook-secret-for-tests"
RESULTS = Path(__file__).resolve().parents[2] / "bench-results"

AGENT = agent(
    r"""
ctx = json.load(open(os.environ["LATTICE_FORGE_CONTEXT"]))
kind = ctx["kind"]
resumed = os.path.exists("/workspace/.lattice/resume.json")
inputs = {}
if resumed:
    emit("INFO", {"message": "resumed"})
    inputs = json.load(open("/workspace/.lattice/resume.json"))["inputs"]

def git(*args):
    subprocess.run(["git", "-C", "/workspace/repo", *args], check=True, capture_output=True)

def commit(name, text, message):
    with open("/workspace/repo/" + name, "a") as f:
        f.write(text + "\n")
    git("add", "-A")
    git("commit", "-q", "-m", message)

if kind == "issue_triage" and ctx.get("research"):
    notes = {"notes": "Answering: " + ctx["issue"]["title"] + ". LISTEN/NOTIFY carries 8000 bytes.",
             "sources": ["https://www.postgresql.org/docs/current/sql-notify.html", "app.py"]}
    json.dump(notes, open("/workspace/.lattice/forge/notes.json", "w"))
    open("/workspace/.lattice/forge/plan.md", "w").write("1. Use LISTEN/NOTIFY\n2. Test it")
    emit("ARTIFACT", {"kind": "notes", "ref": "/workspace/.lattice/forge/notes.json"})
    emit("ARTIFACT", {"kind": "plan", "ref": "/workspace/.lattice/forge/plan.md"})
    emit("COMPLETED", {"status": "success", "summary": "researched"})
elif kind == "issue_triage" and "project" in ctx["issue"]["labels"]:
    tasks = [{"title": "Epic: " + ctx["issue"]["title"], "body": "The whole of it."},
             {"title": "Design the storage", "body": "First step."},
             {"title": "Build the importer", "body": "Second step."}]
    json.dump(tasks, open("/workspace/.lattice/forge/tasks.json", "w"))
    emit("ACTION_REQUEST", {"action": "POST_COMMENT", "blocking": False, "parameters": {
        "body": "Proposed issues:\n" + "\n".join("- " + t["title"] for t in tasks)}})
    emit("ARTIFACT", {"kind": "tasks", "ref": "/workspace/.lattice/forge/tasks.json"})
    emit("COMPLETED", {"status": "success", "summary": "drafted %d issues" % len(tasks)})
elif kind == "issue_triage" and not resumed:
    emit("ACTION_REQUEST", {"action": "POST_COMMENT", "blocking": False,
                            "parameters": {"body": "Which page shows the stale list?"}})
    emit("ACTION_REQUEST", {"action": "LABEL_ISSUE", "blocking": False,
                            "parameters": {"labels": ["triaged"]}})
    emit("WAITING", {"reason": "ANSWER", "checkpoint_id": checkpoint("asked"),
                     "expected_inputs": {"answer": "string", "author": "string"}})
elif kind == "issue_triage":
    plan = "1. Invalidate the cache on save (%s)\n2. Test it" % inputs["answer"]
    open("/workspace/.lattice/forge/plan.md", "w").write(plan)
    emit("ACTION_REQUEST", {"action": "POST_COMMENT", "blocking": False,
                            "parameters": {"body": "Plan:\n" + plan}})
    emit("ARTIFACT", {"kind": "plan", "ref": "/workspace/.lattice/forge/plan.md"})
    emit("COMPLETED", {"status": "success", "summary": "planned"})
elif kind == "pr_create_from_plan" and ctx.get("docs"):
    changed = ctx["docs"]["changed"]
    if any("engine" in path for path in changed):  # lag it cannot fix here
        open("/workspace/.lattice/forge/lag.md", "w").write(
            "The engine's design in README.md predates " + ", ".join(changed))
        emit("ARTIFACT", {"kind": "docs_lag", "ref": "/workspace/.lattice/forge/lag.md"})
        emit("COMPLETED", {"status": "success", "summary": "docs lag"})
    elif any("util" in path for path in changed):  # nothing the docs say changed
        emit("ARTIFACT", {"kind": "docs_current", "ref": "README.md"})
        emit("COMPLETED", {"status": "success", "summary": "docs current"})
    else:
        commit("README.md", "Documented: " + ", ".join(changed), "Update the docs")
        emit("COMPLETED", {"status": "success", "summary": "docs updated"})
elif kind == "pr_create_from_plan" and not resumed:
    plan = ctx["plan"]
    head = os.environ["LATTICE_FORGE_BRANCH"]
    if "REWRITE" in plan:  # a hostile agent: history that does not descend from the base
        git("checkout", "-q", "--orphan", "rewritten")
        commit("NEW.md", "rewritten", "rewrite history")
        git("branch", "-q", "-M", "rewritten", head)
    elif "BASE" in plan:  # a hostile agent: it changes the base branch too
        git("checkout", "-q", os.environ["LATTICE_FORGE_BASE"])
        commit("README.md", "tampered", "tamper with the base")
        git("checkout", "-q", head)
        commit("CACHE.md", plan, "Implement the plan")
    else:
        commit("CACHE.md", plan, "Implement the plan")
    emit("ACTION_REQUEST", {"action": "OPEN_PR", "blocking": True, "parameters": {
        "title": "Invalidate the cache on save", "body": "Implements the approved plan.",
        "head": head, "base": os.environ["LATTICE_FORGE_BASE"]}})
    emit("WAITING", {"reason": "OPEN_PR", "checkpoint_id": checkpoint("pr"),
                     "expected_inputs": {"status": "string", "url": "string",
                                         "number": "integer", "reason": "string"}})
elif kind == "pr_create_from_plan":
    if inputs.get("status") == "fulfilled":
        emit("ARTIFACT", {"kind": "pr_url", "url": inputs["url"], "ref": str(inputs["number"])})
        emit("COMPLETED", {"status": "success", "summary": "opened #%s" % inputs["number"]})
    else:
        emit("COMPLETED", {"status": "failure", "summary": "refused: %s" % inputs.get("reason")})
elif kind == "pr_fixup_from_feedback":
    notes = [c["body"] for c in ctx["review_comments"]] or [ctx["feedback"]]
    commit("CACHE.md", "addressed: " + "; ".join(notes), "Address the review")
    emit("COMPLETED", {"status": "success", "summary": "addressed %d comments" % len(notes)})
else:
    emit("ERROR", {"message": "unexpected kind " + kind})
"""
)

# The agent is a file in the sprite: an argv this long would not fit the exec URL.
AGENT_PATH = "/workspace/agent.py"
AGENT_COMMAND = ["python3", AGENT_PATH]


async def _install_agent(stack: Stack, sprite: str) -> None:
    async with SpritesAdapter(stack.sprites.credentials) as backend:
        await backend.write_file(sprite, AGENT_PATH, AGENT.encode())


POLICY = {
    "apiVersion": "lattice.dev/v1alpha1",
    "kind": "IntentPolicy",
    "metadata": {"name": "github"},
    "spec": {
        "rules": [
            {
                "name": "plans-need-approval",
                "match": "intent.spec.kind == 'issue_plan_approve'",
                "risk": "controlled",
                "outcome": "require_approval",
            },
            {"name": "the-rest", "match": "true", "risk": "safe", "outcome": "allow"},
        ]
    },
}


def _secret(name: str, **data: str) -> k8s.V1Secret:
    """A set-up Secret, written through the API client rather than a kubectl process."""
    return k8s.V1Secret(metadata=k8s.V1ObjectMeta(name=name), string_data=data)


@pytest.fixture(scope="module")
def github(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitHubDouble]:
    with github_double(tmp_path_factory.mktemp("github"), token=TOKEN) as gh:
        yield gh


@pytest.fixture(scope="module")
def forge_stack(
    cluster: Cluster,
    local_sprites: LocalSprites,
    github: GitHubDouble,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Stack, str]]:
    creds = cluster.create_namespace("forge-creds")
    cluster.core.create_namespaced_secret(creds, _secret("github", token=TOKEN))
    port = free_port()
    forge = {
        "api_url": github.api_url,
        "git_url": github.git_url,
        "token_secret": f"{creds}/github",
        "webhook_host": "127.0.0.1",
        "webhook_port": port,
    }
    log_dir: Path = tmp_path_factory.mktemp("operator-github")
    try:
        with operator_stack(cluster, local_sprites, log_dir, forge=forge) as stack:
            yield stack, f"http://127.0.0.1:{port}"
            if not stack.operator.alive():
                raise AssertionError(f"the operator died:\n{stack.operator.log()[-5000:]}")
    finally:
        cluster.delete_namespace(creds)
    assert github.violations == [], github.violations  # nothing GitHub would not know


@pytest.fixture
def wired(forge_stack: tuple[Stack, str], namespace: str, github: GitHubDouble) -> dict[str, Any]:
    return _wire(forge_stack, namespace, github)


def _wire(forge_stack: tuple[Stack, str], namespace: str, github: GitHubDouble) -> dict[str, Any]:
    """A namespace wired to a fresh repository: Sprite, policy, webhook secret, rules."""
    stack, base = forge_stack
    repo = f"octo/app-{namespace[-8:]}"
    github.create_repo(repo, {"README.md": "# app\n", "app.py": "CACHE = {}\n"})
    stack.create(namespace, POLICY)
    stack.create(namespace, build("sprite.yaml", "box", {"spec.networkPolicy": {"rules": []}}))
    stack.cluster.core.create_namespaced_secret(
        namespace, _secret("hook", secret=HOOK_SECRET.decode())
    )
    stack.create(
        namespace,
        {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "GitHubRepository",
            "metadata": {"name": "app"},
            "spec": {
                "repo": repo,
                "webhookSecretRef": {"name": "hook", "key": "secret"},
                "agent": {
                    "spriteRef": {"name": "box"},
                    "command": AGENT_COMMAND,
                    "timeoutSeconds": 300,
                },
                "approval": {"approvers": [{"github": "octocat", "user": "alice"}]},
                "research": {"labels": ["question"]},
                "docs": [{"code": "*.py", "docs": "README.md"}],
            },
        },
    )
    bind_role(stack, namespace, "alice", APPROVER_ROLE)
    sprite = stack.wait_sprite_ready(namespace, "box")
    asyncio.run(_install_agent(stack, sprite["status"]["spriteName"]))
    url = f"{base}/github/{namespace}/app"
    wait_for(
        lambda: payloads.deliver(url, HOOK_SECRET, "ping", {"zen": "hi"}).status_code == 200,
        timeout=30,
        what="the operator to know the GitHubRepository",
    )
    return {"stack": stack, "repo": repo, "url": url, "namespace": namespace}


@pytest.fixture(scope="module", autouse=True)
def failing_check(forge_stack: tuple[Stack, str], github: GitHubDouble) -> Iterator[dict[str, Any]]:
    """Loop 5's namespace, wired like the others, with its failing HealthCheck applied before
    the module's first test: the check runs every 5 s at most (its shortest schedule), so its
    three failures take 15 s, spent beside the other tests instead of in loop 5 alone."""
    stack, _ = forge_stack
    namespace = stack.cluster.create_namespace("loop-5")
    try:
        w = _wire(forge_stack, namespace, github)
        check = {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "HealthCheck",
            "metadata": {"name": "smoke"},
            "spec": {
                "schedule": "@every 5s",
                "probe": {"spriteRef": {"name": "box"}, "command": ["sh", "-c", "exit 1"]},
                "issue": {"repo": w["repo"]},
            },
        }
        stack.create(namespace, check)
        yield w
    finally:
        stack.cluster.delete_namespace(namespace)


def _intent(w: dict[str, Any], name: str, phases: set[str], timeout: float = 180) -> dict[str, Any]:
    found: dict[str, Any] = w["stack"].wait_phase(w["namespace"], "intents", name, phases, timeout)
    return found


def _show(obj: dict[str, Any], w: dict[str, Any] | None = None) -> str:
    status = obj.get("status") or {}
    keep = {k: status.get(k) for k in ("conditions", "forge", "result", "runRef")}
    if w is not None and status.get("runRef"):
        run = w["stack"].find(w["namespace"], "runs", status["runRef"]["name"]) or {}
        run_status = run.get("status") or {}
        keep["run"] = {k: run_status.get(k) for k in ("logTail", "actionResults")}
        keep["run"]["violations"] = (run_status.get("events") or {}).get("violations")
    return json.dumps(keep, indent=1)[-6000:]


def _comments(github: GitHubDouble, repo: str, number: int) -> list[str]:
    with github.lock:
        return [c["body"] for c in github.repos[repo].comments[number]]


def test_loop_2_plan_to_pull_request_to_fixup(wired: dict[str, Any], github: GitHubDouble) -> None:
    stack, repo, ns = wired["stack"], wired["repo"], wired["namespace"]
    base_sha = github.branch_sha(repo, "main")
    started = time.monotonic()
    stack.create(
        ns,
        {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "Intent",
            "metadata": {"name": "plan"},
            "spec": {
                "kind": "pr_create_from_plan",
                "summary": "Invalidate the cache",
                "params": {
                    "prCreateFromPlan": {
                        "repo": repo,
                        "plan": "Invalidate the cache on save",
                        "headBranch": "lattice/cache",
                        "run": {"spriteRef": {"name": "box"}, "command": AGENT_COMMAND},
                    }
                },
                "allowedActions": ["OPEN_PR", "POST_COMMENT"],
            },
        },
    )
    done = _intent(wired, "plan", {"Succeeded", "Failed"})
    opened = time.monotonic()
    assert done["status"]["phase"] == "Succeeded", _show(done)
    pr = done["status"]["forge"]["pullRequest"]
    assert any(a.startswith("pr_url: ") for a in done["status"]["result"]["artifacts"])
    with github.lock:
        pull = github.repos[repo].pulls[pr["number"]]
    assert (pull["head"]["ref"], pull["base"]["ref"]) == ("lattice/cache", "main")
    log = github.git_log(repo, "lattice/cache")
    assert log[0].endswith("Implement the plan")
    assert github.branch_sha(repo, "main") == base_sha  # the base is untouched
    assert len(github.calls("pulls/create")) >= 1
    # The credential never reached the sprite: not in the Run, its env or its files.
    run = stack.get(ns, "runs", done["status"]["runRef"]["name"])
    assert TOKEN not in json.dumps(run)

    review, comments = github.submit_review(
        repo,
        pr["number"],
        state="CHANGES_REQUESTED",
        body="Please also clear on delete",
        login="octocat",
        comments=[("CACHE.md", 1, "clear it on delete too")],
    )
    with github.lock:
        pull_now = dict(github.repos[repo].pulls[pr["number"]])
    reviewed = time.monotonic()
    answer = payloads.deliver(
        wired["url"],
        HOOK_SECRET,
        "pull_request_review",
        payloads.review_submitted(repo, pull_now, review, "octocat"),
    )
    assert answer.status_code == 201, answer.text
    # The review's line comment arrives as its own event: it is the same fixup, not a new one.
    again = payloads.deliver(
        wired["url"],
        HOOK_SECRET,
        "pull_request_review_comment",
        payloads.review_comment(repo, pull_now, comments[0], "octocat"),
    )
    assert (again.status_code, again.json()["outcome"]) == (200, "exists")
    fixup_name = answer.json()["detail"]
    fixed = _intent(wired, fixup_name, {"Succeeded", "Failed"})
    finished = time.monotonic()
    assert fixed["status"]["phase"] == "Succeeded", _show(fixed)
    log = github.git_log(repo, "lattice/cache")
    assert log[0].endswith("Address the review")
    assert log[1].endswith("Implement the plan")  # a fast-forward: the PR's commit is kept
    assert fixed["status"]["forge"]["pushedSha"] == github.branch_sha(repo, "lattice/cache")
    assert any("Lattice pushed" in c for c in _comments(github, repo, pr["number"]))
    figures = {
        "plan_to_pr_seconds": round(opened - started, 2),
        "review_to_fixup_pushed_seconds": round(finished - reviewed, 2),
        "loop_2_seconds": round(finished - started, 2),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "github_loop2.json").write_text(json.dumps(figures, indent=2) + "\n")


def test_loop_1_issue_to_triage_to_approved_plan(
    wired: dict[str, Any], github: GitHubDouble
) -> None:
    stack, repo, ns, url = wired["stack"], wired["repo"], wired["namespace"], wired["url"]
    issue = github.open_issue(repo, "The list is stale", "Saving does not refresh", "reporter")
    number = issue["number"]
    delivery = "d-opened-1"
    created = payloads.deliver(
        url, HOOK_SECRET, "issues", payloads.issues("opened", repo, issue, "reporter"), delivery
    )
    assert created.status_code == 201, created.text
    triage = created.json()["detail"]
    # A redelivery (same delivery id, or GitHub's retry with a new one) makes nothing new.
    for again in (delivery, "d-opened-2"):
        replay = payloads.deliver(
            url, HOOK_SECRET, "issues", payloads.issues("opened", repo, issue, "reporter"), again
        )
        assert replay.json()["outcome"] in ("duplicate", "exists"), replay.text
    waiting = _intent(wired, triage, {"Waiting", "Failed"})
    assert waiting["status"]["phase"] == "Waiting", _show(waiting)
    wait_for(
        lambda: "Which page shows the stale list?" in "\n".join(_comments(github, repo, number)),
        timeout=60,
        what="the triage question",
    )
    wait_for(
        lambda: "triaged" in [x["name"] for x in github.repos[repo].issues[number]["labels"]],
        timeout=60,
        what="the triage label",
    )

    reply = github.add_comment(repo, number, "The orders page", "reporter")
    answered = payloads.deliver(
        url,
        HOOK_SECRET,
        "issue_comment",
        payloads.issue_comment(repo, issue, reply, "reporter"),
    )
    assert answered.json()["outcome"] == "resumed", answered.text
    done = _intent(wired, triage, {"Succeeded", "Failed"})
    assert done["status"]["phase"] == "Succeeded", _show(done)
    plan = done["status"]["forge"]["followup"]
    assert any("Plan:" in c and "The orders page" in c for c in _comments(github, repo, number))
    awaiting = _intent(wired, plan, {"AwaitingApproval"})
    assert "The orders page" in awaiting["spec"]["params"]["issuePlanApprove"]["plan"]

    # An unmapped GitHub user's command is refused, and answered on the issue.
    sneaky = github.add_comment(repo, number, "/lattice approve", "mallory")
    refused = payloads.deliver(
        url, HOOK_SECRET, "issue_comment", payloads.issue_comment(repo, issue, sneaky, "mallory")
    )
    assert refused.json()["outcome"] == "refused", refused.text
    assert any("@mallory" in c and "not mapped" in c for c in _comments(github, repo, number))
    assert stack.get(ns, "intents", plan)["status"]["phase"] == "AwaitingApproval"

    # The mapped user approves by comment: recorded under both identities, once.
    command = github.add_comment(repo, number, "/lattice approve looks right", "octocat")
    body = payloads.issue_comment(repo, issue, command, "octocat")
    approved = payloads.deliver(url, HOOK_SECRET, "issue_comment", body, "d-approve")
    assert approved.json()["outcome"] == "approved", approved.text
    # The same signed comment under another delivery id: a repeat, answered, not relayed.
    again = payloads.deliver(url, HOOK_SECRET, "issue_comment", body, "d-approve-retry")
    assert (again.status_code, again.json()["outcome"]) == (200, "duplicate")
    started = _intent(wired, plan, {"Succeeded", "Failed"})
    assert started["status"]["phase"] == "Succeeded", _show(started)
    [record] = started["status"]["approvals"]
    assert (record["user"], record["forgeUser"]) == ("alice", "octocat")
    assert record["forgeRef"] == command["html_url"]
    followup = started["status"]["forge"]["followup"]
    assert any("Plan approved" in c for c in _comments(github, repo, number))
    pr_intent = _intent(wired, followup, {"Succeeded", "Failed"}, timeout=240)
    assert pr_intent["status"]["phase"] == "Succeeded", _show(pr_intent, wired)
    number_pr = pr_intent["status"]["forge"]["pullRequest"]["number"]
    with github.lock:
        assert f"Resolves #{number}" in github.repos[repo].pulls[number_pr]["body"]


@pytest.mark.parametrize(
    ("marker", "rule"), [("REWRITE", "not_based_on_expected"), ("BASE", "other_refs")]
)
def test_a_branch_that_rewrites_history_or_the_base_is_refused(
    wired: dict[str, Any], github: GitHubDouble, marker: str, rule: str
) -> None:
    stack, repo, ns = wired["stack"], wired["repo"], wired["namespace"]
    base_sha = github.branch_sha(repo, "main")
    name = f"hostile-{marker.lower()}"
    stack.create(
        ns,
        {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "Intent",
            "metadata": {"name": name},
            "spec": {
                "kind": "pr_create_from_plan",
                "summary": "hostile",
                "params": {
                    "prCreateFromPlan": {
                        "repo": repo,
                        "plan": f"do {marker}",
                        "headBranch": f"lattice/{name}",
                        "run": {"spriteRef": {"name": "box"}, "command": AGENT_COMMAND},
                    }
                },
                "allowedActions": ["OPEN_PR"],
            },
        },
    )
    failed = _intent(wired, name, {"Succeeded", "Failed"})
    assert failed["status"]["phase"] == "Failed", _show(failed)
    run = stack.get(ns, "runs", failed["status"]["runRef"]["name"])
    violations = run["status"]["events"]["violations"]
    assert any(v["category"] == "branch_refused" and rule in v["reason"] for v in violations)
    [result] = [r for r in run["status"]["actionResults"] if r["action"] == "OPEN_PR"]
    assert result["status"] == "refused"
    assert github.branch_sha(repo, f"lattice/{name}") is None  # nothing pushed
    assert github.branch_sha(repo, "main") == base_sha


def test_bad_deliveries_create_nothing(wired: dict[str, Any], github: GitHubDouble) -> None:
    stack, repo, ns, url = wired["stack"], wired["repo"], wired["namespace"], wired["url"]
    issue = github.open_issue(repo, "Bad input", "x", "reporter")
    payload = payloads.issues("opened", repo, issue, "reporter")
    forged = payloads.deliver(url, HOOK_SECRET, "issues", payload, signature="sha256=" + "0" * 64)
    assert forged.status_code == 401
    wrong_key = payloads.deliver(url, b"not-the-secret", "issues", payload)
    assert wrong_key.status_code == 401
    big = {**payload, "padding": "x" * (6 * 1024 * 1024)}
    assert payloads.deliver(url, HOOK_SECRET, "issues", big).status_code == 413
    unknown = payloads.deliver(url, HOOK_SECRET, "star", {"action": "created"})
    assert (unknown.status_code, unknown.json()["outcome"]) == (202, "unknown_event")
    intents = stack.cluster.custom.list_namespaced_custom_object(
        "lattice.dev", "v1alpha1", ns, "intents"
    )["items"]
    assert intents == []


def test_a_replayed_approval_label_is_recorded_once(
    wired: dict[str, Any], github: GitHubDouble
) -> None:
    """A captured, signed `issues.labeled` sent again under new X-GitHub-Delivery ids (a
    header the signature does not cover) made an approval record each time, until the
    record limit refused a real approver: now it is answered and nothing more is recorded."""
    stack, repo, ns, base = wired["stack"], wired["repo"], wired["namespace"], wired["url"]
    two = json.loads(json.dumps(POLICY))
    two["spec"]["rules"][0]["approvers"] = 2  # the plan keeps waiting while it is replayed
    stack.apply(ns, two)
    stack.create(
        ns,
        {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "GitHubRepository",
            "metadata": {"name": "labels"},
            "spec": {
                "repo": repo,
                "webhookSecretRef": {"name": "hook", "key": "secret"},
                "approval": {
                    "label": "lattice-approved",
                    "approvers": [{"github": "octocat", "user": "alice"}],
                },
            },
        },
    )
    url = base.rsplit("/", 1)[0] + "/labels"
    wait_for(
        lambda: payloads.deliver(url, HOOK_SECRET, "ping", {"zen": "hi"}).status_code == 200,
        timeout=30,
        what="the operator to know the second GitHubRepository",
    )
    issue = github.open_issue(repo, "Replayed label", "x", "reporter")
    triage = route(
        "issues", "d", payloads.issues("opened", repo, issue, "reporter"), _labels(wired)
    )
    triage.manifest["metadata"]["uid"] = "00000000-0000-0000-0000-000000000001"
    plan = plan_intent(Intent.model_validate(triage.manifest), "1. do it")
    plan["metadata"].pop("ownerReferences")
    stack.create(ns, plan)
    name = plan["metadata"]["name"]
    _intent(wired, name, {"AwaitingApproval"})

    labeled = payloads.issues("labeled", repo, issue, "octocat", label="lattice-approved")
    first = payloads.deliver(url, HOOK_SECRET, "issues", labeled, "d-captured")
    assert first.json()["outcome"] == "approved", first.text
    for n in range(3):
        replay = payloads.deliver(url, HOOK_SECRET, "issues", labeled, f"d-replay-{n}")
        assert (replay.status_code, replay.json()["outcome"]) == (200, "duplicate"), replay.text
    annotations = stack.get(ns, "intents", name)["metadata"]["annotations"]
    records = json.loads(annotations[RECORDS])
    assert [(r["user"], r["forgeUser"]) for r in records] == [("alice", "octocat")]
    assert records[0]["forgeRef"].startswith(f"label:{repo}#{issue['number']}:lattice-approved:")
    assert stack.get(ns, "intents", name)["status"]["phase"] == "AwaitingApproval"


def _labels(wired: dict[str, Any]) -> GitHubRepository:
    return GitHubRepository.model_validate(
        {
            "metadata": {"name": "labels", "namespace": wired["namespace"]},
            "spec": {
                "repo": wired["repo"],
                "webhookSecretRef": {"name": "hook", "key": "secret"},
                "agent": {"spriteRef": {"name": "box"}, "command": AGENT_COMMAND},
            },
        }
    )


REPO_EDITOR = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "lattice-github-repository-editor-test"},
    "rules": [
        {
            "apiGroups": ["lattice.dev"],
            "resources": ["githubrepositories"],
            "verbs": ["get", "list", "create", "update", "patch"],
        }
    ],
}


def test_mapping_a_github_account_needs_the_right_to_impersonate(
    wired: dict[str, Any],
) -> None:
    stack, ns = wired["stack"], wired["namespace"]
    bind_role(stack, ns, "bob", REPO_EDITOR)
    doc = {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "GitHubRepository",
        "metadata": {"name": "bobs", "namespace": ns},
        "spec": {
            "repo": wired["repo"],
            "webhookSecretRef": {"name": "hook", "key": "secret"},
            "approval": {"approvers": [{"github": "bob-on-github", "user": "alice"}]},
        },
    }
    refused = kubectl_as(stack, "bob", "apply", "-f", "-", input=json.dumps(doc))
    assert refused.returncode != 0
    assert "spec.approval.approvers[0]" in refused.stderr
    assert "impersonate" in refused.stderr
    # Mapping one's own account to oneself needs nothing more.
    doc["spec"]["approval"]["approvers"] = [{"github": "bob-on-github", "user": "bob"}]
    mine = kubectl_as(stack, "bob", "apply", "-f", "-", input=json.dumps(doc))
    assert mine.returncode == 0, mine.stderr


def test_loop_3_a_project_issue_drafts_issues_created_after_approval(
    wired: dict[str, Any], github: GitHubDouble
) -> None:
    repo, url = wired["repo"], wired["url"]
    issue = github.open_issue(
        repo, "Importer", "We need an importer", "reporter", labels=("project",)
    )
    number = issue["number"]
    created = payloads.deliver(
        url, HOOK_SECRET, "issues", payloads.issues("opened", repo, issue, "reporter")
    )
    assert created.status_code == 201, created.text
    triage = _intent(wired, created.json()["detail"], {"Succeeded", "Failed"})
    assert triage["status"]["phase"] == "Succeeded", _show(triage, wired)
    plan = triage["status"]["forge"]["followup"]
    awaiting = _intent(wired, plan, {"AwaitingApproval"})
    drafts = awaiting["spec"]["params"]["issuePlanApprove"]["tasks"]
    assert [d["title"] for d in drafts] == [
        "Epic: Importer",
        "Design the storage",
        "Build the importer",
    ]

    def tasks() -> list[dict[str, Any]]:
        with github.lock:
            return [
                i
                for i in github.repos[repo].issues.values()
                if "lattice-task" in [x["name"] for x in i["labels"]]
            ]

    assert tasks() == []  # drafts only, until approved
    command = github.add_comment(repo, number, "/lattice approve", "octocat")
    body = payloads.issue_comment(repo, issue, command, "octocat")
    assert payloads.deliver(url, HOOK_SECRET, "issue_comment", body).json()["outcome"] == (
        "approved"
    )
    done = _intent(wired, plan, {"Succeeded", "Failed"})
    assert done["status"]["phase"] == "Succeeded", _show(done)
    made = tasks()
    assert sorted(i["title"] for i in made) == sorted(d["title"] for d in drafts)
    assert sorted(done["status"]["forge"]["issues"]) == sorted(i["number"] for i in made)
    assert any("created these issues" in c for c in _comments(github, repo, number))
    # The approval delivered again creates nothing more.
    payloads.deliver(url, HOOK_SECRET, "issue_comment", body)
    time.sleep(2)
    assert len(tasks()) == len(drafts)


def test_loop_4_a_question_gets_sourced_notes_then_a_plan(
    wired: dict[str, Any], github: GitHubDouble
) -> None:
    repo, url = wired["repo"], wired["url"]
    issue = github.open_issue(
        repo, "How should clients hear of changes?", "Polling?", "reporter", labels=("question",)
    )
    number = issue["number"]
    created = payloads.deliver(
        url, HOOK_SECRET, "issues", payloads.issues("opened", repo, issue, "reporter")
    )
    assert (created.status_code, created.json()["outcome"]) == (201, "created"), created.text
    research = _intent(wired, created.json()["detail"], {"Succeeded", "Failed"})
    assert research["status"]["phase"] == "Succeeded", _show(research, wired)
    assert research["spec"]["params"]["issueTriage"]["research"] is True
    plan = research["status"]["forge"]["followup"]
    awaiting = _intent(wired, plan, {"AwaitingApproval"})
    assert awaiting["spec"]["params"]["issuePlanApprove"]["plan"].startswith("1. Use LISTEN")
    comments = _comments(github, repo, number)
    [notes] = [i for i, c in enumerate(comments) if c.startswith("### Research notes")]
    [proposal] = [i for i, c in enumerate(comments) if c.startswith("### Proposed plan")]
    assert notes < proposal  # the notes first, then the plan
    assert "Answering: How should clients hear of changes?" in comments[notes]
    assert (
        "**Sources**\n\n1. <https://www.postgresql.org/docs/current/sql-notify.html>\n2. `app.py`"
    ) in comments[notes]
    assert f"Awaiting approval as Intent `{plan}`." in comments[proposal]
    # Each was written once, with its idempotency key, through the operator's credential.
    assert len(comments) == 2, comments
    assert "lattice:key=" in comments[notes]


def test_loop_6_code_pushed_to_main_gets_its_docs_updated_or_one_lag_issue(
    wired: dict[str, Any], github: GitHubDouble
) -> None:
    stack, repo, ns, url = wired["stack"], wired["repo"], wired["namespace"], wired["url"]

    def pushed(files: dict[str, str], message: str, branch: str = "main") -> Any:
        before = github.branch_sha(repo, branch) or "0" * 40
        sha = github.commit_to(repo, branch, files, message)
        body = payloads.push(repo, branch, before, sha, sorted(files), "octocat")
        return sha, payloads.deliver(url, HOOK_SECRET, "push", body)

    # Only code the rules name, on the base branch, starts anything.
    _, readme = pushed({"README.md": "# app\nMore words.\n"}, "Edit the readme")
    assert (readme.status_code, readme.json()["detail"]) == (200, "no_docs_affected")
    _, other = pushed({"app.py": "CACHE = {1: 2}\n"}, "Elsewhere", branch="topic")
    assert (other.status_code, other.json()["detail"]) == (200, "other_ref")

    sha, created = pushed({"app.py": "CACHE = {}\nTTL = 60\n"}, "Add a TTL")
    assert created.status_code == 201, created.text
    base_sha = github.branch_sha(repo, "main")
    update = _intent(wired, created.json()["detail"], {"Succeeded", "Failed"})
    assert update["status"]["phase"] == "Succeeded", _show(update, wired)
    assert update["spec"]["params"]["prCreateFromPlan"]["docs"]["changed"] == ["app.py"]
    pr = update["status"]["forge"]["pullRequest"]
    with github.lock:
        pull = github.repos[repo].pulls[pr["number"]]
    assert (pull["head"]["ref"], pull["base"]["ref"]) == (f"lattice/docs-{sha[:12]}", "main")
    assert github.git_log(repo, f"lattice/docs-{sha[:12]}")[0].endswith("Update the docs")
    assert github.branch_sha(repo, "main") == base_sha  # a PR, never a push to main

    # Docs the agent found current: no branch, no PR, no issue.
    util_sha, util = pushed({"util.py": "def f(): pass\n"}, "Add a helper")
    assert util.status_code == 201, util.text
    current = _intent(wired, util.json()["detail"], {"Succeeded", "Failed"})
    assert current["status"]["phase"] == "Succeeded", _show(current, wired)
    assert current["status"]["result"]["summary"] == "the docs are current: nothing to change"
    assert github.branch_sha(repo, f"lattice/docs-{util_sha[:12]}") is None
    with github.lock:
        assert len(github.repos[repo].pulls) == 1

    def lag_issues() -> list[dict[str, Any]]:
        with github.lock:
            return [
                dict(i)
                for i in github.repos[repo].issues.values()
                if "lattice-docs-lag" in [x["name"] for x in i["labels"]]
            ]

    numbers = []
    for n, text in enumerate(("ENGINE = 1\n", "ENGINE = 2\n")):
        _, lagging = pushed({"engine.py": text}, f"Change the engine {n}")
        assert lagging.status_code == 201, lagging.text
        done = _intent(wired, lagging.json()["detail"], {"Succeeded", "Failed"})
        assert done["status"]["phase"] == "Succeeded", _show(done, wired)
        assert "pullRequest" not in done["status"]["forge"]  # reported, nothing pushed
        numbers.extend(done["status"]["forge"]["issues"])
    [issue] = lag_issues()  # one open issue per lag: the second push commented on it
    assert numbers == [issue["number"], issue["number"]]
    assert issue["title"] == "Docs lag behind the code: README.md"
    assert "The engine's design in README.md predates engine.py" in issue["body"]
    [again] = _comments(github, repo, issue["number"])
    assert "The engine's design in README.md predates engine.py" in again
    intents = stack.cluster.custom.list_namespaced_custom_object(
        "lattice.dev", "v1alpha1", ns, "intents"
    )["items"]
    assert len([i for i in intents if i["metadata"]["name"].startswith("docs-")]) == 4


def test_a_health_remediation_opens_a_pull_request_through_a_pr_intent(
    wired: dict[str, Any], github: GitHubDouble
) -> None:
    """health_remediate with open_pr proposes a pr_create_from_plan Intent, which the
    namespace's policy classifies and gates like any other, and which opens the PR."""
    stack, repo, ns = wired["stack"], wired["repo"], wired["namespace"]
    stack.create(
        ns,
        {
            "apiVersion": "lattice.dev/v1alpha1",
            "kind": "Intent",
            "metadata": {"name": "remedy"},
            "spec": {
                "kind": "health_remediate",
                "summary": "Raise the cache limit after the failing check",
                "proposedBy": {"type": "system", "name": "cache-check"},
                "params": {
                    "healthRemediate": {
                        "remediation": "open_pr",
                        "repo": repo,
                        "plan": "Raise the cache limit",
                        "run": {
                            "spriteRef": {"name": "box"},
                            "command": AGENT_COMMAND,
                            "timeoutSeconds": 300,
                        },
                    }
                },
                "allowedActions": ["OPEN_PR"],
            },
        },
    )
    remedy = _intent(wired, "remedy", {"Succeeded", "Failed"})
    assert remedy["status"]["phase"] == "Succeeded", _show(remedy)
    assert remedy["status"]["forge"]["followup"] == "remedy-pr"
    child = _intent(wired, "remedy-pr", {"Succeeded", "Failed"})
    assert child["status"]["phase"] == "Succeeded", _show(child, wired)
    assert child["spec"]["kind"] == "pr_create_from_plan"
    assert child["metadata"]["ownerReferences"][0]["uid"] == remedy["metadata"]["uid"]
    # Classified and approved by the namespace's policy, as any Intent is.
    assert child["status"]["classification"]["rule"] == "the-rest"
    phases = [(e.get("from"), e["to"]) for e in child["status"]["auditLog"]]
    assert ("Classified", "Approved") in phases
    pr = child["status"]["forge"]["pullRequest"]
    with github.lock:
        pull = github.repos[repo].pulls[pr["number"]]
    assert pull["base"]["ref"] == "main"


def test_loop_5_a_failing_check_keeps_one_issue(
    failing_check: dict[str, Any], github: GitHubDouble
) -> None:
    stack, repo, ns = failing_check["stack"], failing_check["repo"], failing_check["namespace"]

    def health_issues() -> list[dict[str, Any]]:
        with github.lock:
            return [
                i
                for i in github.repos[repo].issues.values()
                if "lattice-health" in [x["name"] for x in i["labels"]]
            ]

    def reported(at_least: int) -> dict[str, Any] | None:
        hc = stack.get(ns, "healthchecks", "smoke")
        issue = ((hc.get("status") or {}).get("incident") or {}).get("issue") or {}
        return hc if issue.get("reportedFailures", 0) >= at_least else None

    hc = wait_for(lambda: reported(3), timeout=120, what="three failures reported")
    issue = hc["status"]["incident"]["issue"]
    [opened] = health_issues()  # one issue, however many failures
    assert opened["number"] == issue["number"]
    assert opened["state"] == "open"
    still = [c for c in _comments(github, repo, issue["number"]) if "Still failing" in c]
    assert len(still) >= 2
    assert len(still) == len(set(still))  # each failure reported once

    stack.cluster.kubectl(
        "patch",
        "healthcheck",
        "smoke",
        "-n",
        ns,
        "--type",
        "merge",
        "-p",
        '{"spec":{"probe":{"command":["true"]}}}',
    )

    def closed() -> bool:
        with github.lock:
            return github.repos[repo].issues[issue["number"]]["state"] == "closed"

    wait_for(closed, timeout=120, what="the issue closed")
    assert len(health_issues()) == 1
    assert any("passed again" in c for c in _comments(github, repo, issue["number"]))
