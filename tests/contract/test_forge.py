"""The forge port against the local GitHub (every request checked against GitHub's OpenAPI
description) and, when LATTICE_GITHUB_TOKEN and LATTICE_GITHUB_REPO are set, against real
GitHub: the same tests, on a scratch repository you own (they open issues, comments, a
branch and a pull request there)."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from lattice_adapters.github import AppInstallationTokens, GitHubForge, StaticToken
from lattice_adapters.sprites import RetryPolicy
from lattice_operator.forge.bundles import check_bundle
from lattice_operator.ports.errors import (
    RateLimited,
    TransportError,
    Unauthorized,
)
from tests.support.clock import FakeClock
from tests.support.github.server import GitHubDouble, github_double
from tests.support.github.sprite_git import sprite_work

REAL_SKIP = "set LATTICE_GITHUB_TOKEN and LATTICE_GITHUB_REPO (owner/name of a scratch repo)"


@dataclass
class ForgeTarget:
    kind: str
    repo: str
    forge: GitHubForge
    double: GitHubDouble | None

    def local(self) -> GitHubDouble:
        if self.double is None:
            pytest.skip("needs the local GitHub (faults, or seeding its state)")
        return self.double


@pytest.fixture(scope="module")
def double(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitHubDouble]:
    with github_double(tmp_path_factory.mktemp("github"), token="contract-token") as gh:
        gh.create_repo("octo/app")
        yield gh


@pytest.fixture(params=["local", "real"])
async def target(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ForgeTarget]:
    fast = RetryPolicy(max_attempts=3, base_delay=0.05, deadline=10, max_retry_after=2)
    if request.param == "real":
        token, repo = os.environ.get("LATTICE_GITHUB_TOKEN"), os.environ.get("LATTICE_GITHUB_REPO")
        if not token or not repo:
            pytest.skip(REAL_SKIP)
        forge = GitHubForge(StaticToken(token), workdir=tmp_path / "git", retry=fast)
        yield ForgeTarget("real", repo, forge, None)
    else:
        gh: GitHubDouble = request.getfixturevalue("double")
        forge = GitHubForge(
            StaticToken("contract-token"),
            api_url=gh.api_url,
            git_url=gh.git_url,
            workdir=tmp_path / "git",
            retry=fast,
        )
        before = len(gh.violations)
        yield ForgeTarget("local", "octo/app", forge, gh)
        assert gh.violations[before:] == []  # every request was one GitHub knows
    await forge.aclose()


async def _issue(target: ForgeTarget) -> int:
    if target.double is not None:
        return int(target.double.open_issue(target.repo, "Contract", "body", "alice")["number"])
    issue = await target.forge.create_issue(
        target.repo, "lattice contract test", "scratch", key=f"contract-{secrets.token_hex(4)}"
    )
    return issue.number


async def test_an_issue_is_read_commented_once_and_labelled(target: ForgeTarget) -> None:
    number = await _issue(target)
    issue = await target.forge.get_issue(target.repo, number)
    assert issue.number == number
    assert issue.state == "open"
    key = f"contract-{secrets.token_hex(4)}"
    first = await target.forge.create_comment(target.repo, number, "Triage: looks good", key=key)
    again = await target.forge.create_comment(target.repo, number, "Triage: looks good", key=key)
    assert again.id == first.id
    mine = [c for c in await target.forge.list_comments(target.repo, number) if c.key == key]
    assert len(mine) == 1
    assert mine[0].body.startswith("Triage: looks good")
    assert "triage" in await target.forge.add_labels(target.repo, number, ["triage"])
    assert "triage" in await target.forge.add_labels(target.repo, number, ["triage"])
    await target.forge.remove_label(target.repo, number, "triage")
    await target.forge.remove_label(target.repo, number, "triage")  # absent: success
    assert "triage" not in (await target.forge.get_issue(target.repo, number)).labels


async def test_an_issue_with_a_key_is_opened_once(target: ForgeTarget) -> None:
    key = f"health-{secrets.token_hex(4)}"
    first = await target.forge.create_issue(
        target.repo, "check failing", "details", labels=["lattice-health"], key=key
    )
    again = await target.forge.create_issue(
        target.repo, "check failing", "details", labels=["lattice-health"], key=key
    )
    assert again.number == first.number
    found = await target.forge.find_issue(target.repo, key, label="lattice-health")
    assert found is not None
    assert found.number == first.number
    await target.forge.update_issue(target.repo, first.number, state="closed")


async def test_a_sprites_branch_is_pushed_and_a_pull_request_opened_once(
    target: ForgeTarget, tmp_path: Path
) -> None:
    workspace = await target.forge.prepare_workspace(target.repo, "main")
    assert workspace.base_sha == await target.forge.branch_sha(target.repo, "main")
    branch = f"lattice/contract-{secrets.token_hex(3)}"
    data = sprite_work(
        tmp_path / "sprite",
        workspace.bundle,
        "main",
        branch,
        {"fix.txt": "fixed\n"},
        base_sha=workspace.base_sha,
    )
    facts = await target.forge.inspect_bundle(target.repo, data, workspace.base_sha)
    verdict = check_bundle(facts, branch=branch, base_branch="main", base_sha=workspace.base_sha)
    assert verdict.ok, verdict.reason
    assert verdict.sha is not None
    await target.forge.push_branch(target.repo, data, branch=branch, sha=verdict.sha, expected=None)
    await target.forge.push_branch(target.repo, data, branch=branch, sha=verdict.sha, expected=None)
    assert await target.forge.branch_sha(target.repo, branch) == verdict.sha
    pr = await target.forge.open_pull_request(
        target.repo, title="Fix", body="from a sprite", head=branch, base="main"
    )
    again = await target.forge.open_pull_request(
        target.repo, title="Fix", body="from a sprite", head=branch, base="main"
    )
    assert again.number == pr.number
    assert pr.head_ref == branch
    assert pr.base_ref == "main"
    assert (await target.forge.get_pull_request(target.repo, pr.number)).head_sha == verdict.sha
    if target.double is not None:
        log = target.double.git_log(target.repo, branch)
        assert log[0].endswith(f"work on {branch}")
        assert len(log) == 2
        assert target.double.branch_sha(target.repo, "main") == workspace.base_sha


async def test_a_branch_that_rewrites_history_or_carries_the_base_is_refused(
    target: ForgeTarget, tmp_path: Path
) -> None:
    workspace = await target.forge.prepare_workspace(target.repo, "main")
    branch = f"lattice/bad-{secrets.token_hex(3)}"
    rewritten = sprite_work(
        tmp_path / "a",
        workspace.bundle,
        "main",
        branch,
        {"x": "1"},
        base_sha=workspace.base_sha,
        rewrite=True,
    )
    facts = await target.forge.inspect_bundle(target.repo, rewritten, workspace.base_sha)
    verdict = check_bundle(facts, branch=branch, base_branch="main", base_sha=workspace.base_sha)
    assert verdict.rule == "not_based_on_expected"
    with_main = sprite_work(
        tmp_path / "b",
        workspace.bundle,
        "main",
        branch,
        {"x": "1"},
        base_sha=workspace.base_sha,
        extra_refs=("main",),
    )
    facts = await target.forge.inspect_bundle(target.repo, with_main, workspace.base_sha)
    verdict = check_bundle(facts, branch=branch, base_branch="main", base_sha=workspace.base_sha)
    assert verdict.rule == "other_refs"
    assert "refs/heads/main" in verdict.reason
    as_main = check_bundle(facts, branch="main", base_branch="main", base_sha=workspace.base_sha)
    assert as_main.rule == "base_rewrite"
    garbage = await target.forge.inspect_bundle(target.repo, b"not a bundle", workspace.base_sha)
    assert (
        check_bundle(garbage, branch=branch, base_branch="main", base_sha=workspace.base_sha).rule
        == "unreadable"
    )
    assert await target.forge.branch_sha(target.repo, branch) is None  # nothing was pushed
    assert await target.forge.branch_sha(target.repo, "main") == workspace.base_sha


async def test_a_comment_whose_answer_was_lost_is_not_written_twice(target: ForgeTarget) -> None:
    gh = target.local()
    number = await _issue(target)
    gh.fail_next("POST", rf"/issues/{number}/comments$", 502, after=True)
    with pytest.raises(TransportError):
        await target.forge.create_comment(target.repo, number, "once", key="lost-answer")
    await target.forge.create_comment(target.repo, number, "once", key="lost-answer")
    assert [c.key for c in await target.forge.list_comments(target.repo, number)] == ["lost-answer"]


async def test_rate_limits_are_waited_out_or_reported_with_retry_after(
    target: ForgeTarget,
) -> None:
    gh = target.local()
    number = await _issue(target)
    gh.rate_limit_next("GET", rf"/issues/{number}$", secondary=True, retry_after=1)
    assert (await target.forge.get_issue(target.repo, number)).number == number
    gh.rate_limit_next("GET", rf"/issues/{number}$", secondary=False, retry_after=3600)
    with pytest.raises(RateLimited) as caught:
        await target.forge.get_issue(target.repo, number)
    assert caught.value.code == "primary"
    assert caught.value.retry_after is not None
    assert caught.value.retry_after > 3000
    gh.fail_next("GET", rf"/issues/{number}$", 500, times=1)
    assert (await target.forge.get_issue(target.repo, number)).number == number  # retried


async def test_a_bad_token_and_an_unreachable_github_are_classified(
    target: ForgeTarget, tmp_path: Path
) -> None:
    gh = target.local()
    bad = GitHubForge(
        StaticToken("wrong"), api_url=gh.api_url, git_url=gh.git_url, workdir=tmp_path / "bad"
    )
    with pytest.raises(Unauthorized) as denied:
        await bad.get_issue(target.repo, 1)
    assert denied.value.failure_class == "operator_required"
    gone = GitHubForge(
        StaticToken("t"),
        api_url="http://127.0.0.1:9/api/v3",
        git_url=gh.git_url,
        workdir=tmp_path / "gone",
        retry=RetryPolicy(max_attempts=2, base_delay=0.01, deadline=2),
    )
    with pytest.raises(TransportError) as unreachable:
        await gone.get_issue(target.repo, 1)
    assert unreachable.value.retry_class == "safe_retry"


async def test_the_double_refuses_what_github_would_not_know(double: GitHubDouble) -> None:
    before = len(double.violations)
    async with httpx.AsyncClient(base_url=double.api_url, trust_env=False) as client:
        headers = {"Authorization": "token contract-token"}
        assert (
            await client.post(
                "/repos/octo/app/issues/1/comments", json={"text": "x"}, headers=headers
            )
        ).status_code == 422
        assert (
            await client.put(
                "/repos/octo/app/issues/1/comments", json={"body": "x"}, headers=headers
            )
        ).status_code == 422
        assert (await client.get("/repos/octo/app/isues", headers=headers)).status_code == 422
    found = double.violations[before:]
    del double.violations[before:]
    assert len(found) == 3
    assert "'body' is a required property" in found[0]
    assert "not allowed" in found[1]
    assert "no such path" in found[2]


async def test_app_installation_tokens_are_cached_and_refreshed_before_expiry(
    tmp_path: Path,
) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    with github_double(tmp_path / "gh", token="unused", app_id="4242", app_public_key=public) as gh:
        gh.create_repo("octo/app")
        issue = gh.open_issue("octo/app", "t", "b", "alice")
        clock = FakeClock(datetime.now(UTC))
        tokens = AppInstallationTokens(
            app_id="4242",
            private_key=private,
            installation_id=7,
            api_url=gh.api_url,
            clock=clock,
            refresh_margin=300,
        )
        forge = GitHubForge(
            tokens, api_url=gh.api_url, git_url=gh.git_url, workdir=tmp_path / "git"
        )
        for _ in range(3):
            await forge.get_issue("octo/app", issue["number"])
        assert tokens.issued == 1
        assert tokens.expires_at is not None
        clock.advance(3600 - 301)
        await forge.get_issue("octo/app", issue["number"])
        assert tokens.issued == 1
        clock.advance(2)  # now within the margin: refreshed before it expires
        await forge.get_issue("octo/app", issue["number"])
        assert tokens.issued == 2
        assert len(gh.calls("apps/create-installation-access-token")) == 2
        assert timedelta(0) < tokens.expires_at - clock.now() <= timedelta(seconds=3600 + 5)
        workspace = await forge.prepare_workspace("octo/app", "main")  # git with the token too
        assert workspace.base_sha == gh.branch_sha("octo/app", "main")
        assert gh.violations == []
        await forge.aclose()
