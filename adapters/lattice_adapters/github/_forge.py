"""`GitHubForge`: the forge port over githubkit (REST) and the operator's own git.

Requests are githubkit's typed calls (their bodies checked by its models before sending);
answers are read into the port's small models. githubkit's own retries are off: retries
follow the port's retry classes (`call_with_retry`): reads after transport errors and
timeouts, anything after a rate limit whose Retry-After is short enough to wait out, and
writes never blindly (each write is preceded by a read of its idempotency key).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx
from githubkit import GitHub
from githubkit.exception import GitHubException

from lattice_adapters.github._auth import SourceAuth, TokenSource
from lattice_adapters.github._errors import translate
from lattice_adapters.github._git import GitMirror
from lattice_adapters.sprites import RetryPolicy, call_with_retry
from lattice_operator.clock import Clock, SystemClock
from lattice_operator.ports.errors import InvalidRequest, NotFound
from lattice_operator.ports.forge import (
    BundleFacts,
    ForgeComment,
    ForgeIssue,
    ForgePullRequest,
    ForgeReview,
    ForgeReviewComment,
    ForgeUser,
    PreparedWorkspace,
    marker,
)

T = TypeVar("T")
DEFAULT_API_URL = "https://api.github.com"
MAX_PAGES = 20
"""Lists are read 100 at a time, at most this many pages (2,000 items)."""


def _body(response: Any) -> Any:
    """The answer's JSON, as sent (read into the port's models by the callers)."""
    return response.raw_response.json()


def _split(repo: str) -> tuple[str, str]:
    owner, _, name = repo.partition("/")
    if not owner or not name or "/" in name:
        raise InvalidRequest(f"repository must be owner/name, not {repo!r}")
    return owner, name


def _user(data: Any) -> ForgeUser | None:
    if not isinstance(data, dict) or not data.get("login"):
        return None
    return ForgeUser(login=str(data["login"]), type=str(data.get("type") or "User"))


def issue_of(data: dict[str, Any]) -> ForgeIssue:
    labels = tuple(
        str(label["name"] if isinstance(label, dict) else label) for label in data.get("labels", [])
    )
    return ForgeIssue(
        number=int(data["number"]),
        title=str(data.get("title") or ""),
        body=str(data.get("body") or ""),
        state="closed" if data.get("state") == "closed" else "open",
        labels=labels,
        user=_user(data.get("user")),
        html_url=str(data.get("html_url") or ""),
    )


def comment_of(data: dict[str, Any]) -> ForgeComment:
    return ForgeComment(
        id=int(data["id"]),
        body=str(data.get("body") or ""),
        user=_user(data.get("user")),
        html_url=str(data.get("html_url") or ""),
    )


def pull_of(data: dict[str, Any]) -> ForgePullRequest:
    head, base = data.get("head") or {}, data.get("base") or {}
    return ForgePullRequest(
        number=int(data["number"]),
        title=str(data.get("title") or ""),
        body=str(data.get("body") or ""),
        state="closed" if data.get("state") == "closed" else "open",
        head_ref=str(head.get("ref") or ""),
        head_sha=str(head.get("sha") or ""),
        base_ref=str(base.get("ref") or ""),
        html_url=str(data.get("html_url") or ""),
    )


def review_of(data: dict[str, Any]) -> ForgeReview:
    return ForgeReview(
        id=int(data["id"]),
        state=str(data.get("state") or ""),
        body=str(data.get("body") or ""),
        user=_user(data.get("user")),
        commit_id=data.get("commit_id"),
    )


def review_comment_of(data: dict[str, Any]) -> ForgeReviewComment:
    return ForgeReviewComment(
        id=int(data["id"]),
        body=str(data.get("body") or ""),
        path=str(data.get("path") or ""),
        line=data.get("line"),
        pull_request_review_id=data.get("pull_request_review_id"),
        user=_user(data.get("user")),
    )


class GitHubForge:
    """The `Forge` port for one GitHub (github.com, or GHES / a test double at `api_url`)."""

    def __init__(
        self,
        source: TokenSource,
        *,
        api_url: str = DEFAULT_API_URL,
        git_url: str = "https://github.com/{repo}.git",
        workdir: Path,
        retry: RetryPolicy | None = None,
        clock: Clock | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 30.0,
        sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        self._source = source
        self._clock = clock or SystemClock()
        self._retry = retry or RetryPolicy(max_attempts=4, deadline=60.0, max_retry_after=30.0)
        self._sleep = sleep
        self._gh = GitHub(
            SourceAuth(source),
            base_url=api_url.rstrip("/") + "/",
            auto_retry=False,
            http_cache=False,
            timeout=timeout,
            async_transport=transport,
            user_agent="lattice-operator",
        )
        self._git = GitMirror(
            workdir, remote_url=lambda repo: git_url.format(repo=repo), token=source.token
        )
        self.requests = 0
        """REST requests sent (attempts included)."""

    async def _call(
        self, doing: str, request: Callable[[], Awaitable[T]], *, idempotent: bool
    ) -> T:
        async def attempt() -> T:
            self.requests += 1
            try:
                return await request()
            except GitHubException as exc:
                raise translate(exc, doing) from None

        extra: dict[str, Any] = {"sleep": self._sleep} if self._sleep else {}
        return await call_with_retry(
            self._retry, attempt, idempotent=idempotent, clock=self._clock, **extra
        )

    async def _pages(
        self, doing: str, page: Callable[[int], Awaitable[Any]]
    ) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for number in range(1, MAX_PAGES + 1):
            response = await self._call(doing, lambda n=number: page(n), idempotent=True)  # type: ignore[misc]
            batch = _body(response)
            items.extend(batch)
            if len(batch) < 100:
                break
        return items

    # -- issues and comments ------------------------------------------------------------------

    async def get_issue(self, repo: str, number: int) -> ForgeIssue:
        owner, name = _split(repo)
        response = await self._call(
            f"reading {repo}#{number}",
            lambda: self._gh.rest.issues.async_get(owner, name, number),
            idempotent=True,
        )
        return issue_of(_body(response))

    async def find_issue(self, repo: str, key: str, *, label: str) -> ForgeIssue | None:
        owner, name = _split(repo)
        found = await self._pages(
            f"listing {repo}'s issues labelled {label}",
            lambda n: self._gh.rest.issues.async_list_for_repo(
                owner, name, state="open", labels=label, per_page=100, page=n
            ),
        )
        wanted = marker(key)
        for data in found:
            if wanted in str(data.get("body") or "") and "pull_request" not in data:
                return issue_of(data)
        return None

    async def create_issue(
        self, repo: str, title: str, body: str, *, labels: Sequence[str] = (), key: str
    ) -> ForgeIssue:
        if labels:
            existing = await self.find_issue(repo, key, label=labels[0])
            if existing is not None:
                return existing
        owner, name = _split(repo)
        response = await self._call(
            f"opening an issue in {repo}",
            lambda: self._gh.rest.issues.async_create(
                owner, name, title=title, body=f"{body}\n\n{marker(key)}", labels=list(labels)
            ),
            idempotent=False,
        )
        return issue_of(_body(response))

    async def update_issue(
        self, repo: str, number: int, *, body: str | None = None, state: str | None = None
    ) -> ForgeIssue:
        owner, name = _split(repo)
        fields: dict[str, Any] = {}
        if body is not None:
            fields["body"] = body
        if state is not None:
            fields["state"] = state
        response = await self._call(
            f"updating {repo}#{number}",
            lambda: self._gh.rest.issues.async_update(owner, name, number, data=fields),  # type: ignore[call-overload]
            idempotent=True,
        )
        return issue_of(_body(response))

    async def list_comments(self, repo: str, number: int) -> list[ForgeComment]:
        owner, name = _split(repo)
        found = await self._pages(
            f"listing comments of {repo}#{number}",
            lambda n: self._gh.rest.issues.async_list_comments(
                owner, name, number, per_page=100, page=n
            ),
        )
        return [comment_of(c) for c in found]

    async def create_comment(self, repo: str, number: int, body: str, *, key: str) -> ForgeComment:
        for comment in await self.list_comments(repo, number):
            if comment.key == key:
                return comment  # written by an earlier attempt
        owner, name = _split(repo)
        response = await self._call(
            f"commenting on {repo}#{number}",
            lambda: self._gh.rest.issues.async_create_comment(
                owner, name, number, body=f"{body}\n\n{marker(key)}"
            ),
            idempotent=False,
        )
        return comment_of(_body(response))

    async def add_labels(self, repo: str, number: int, labels: Sequence[str]) -> list[str]:
        owner, name = _split(repo)
        response = await self._call(
            f"labelling {repo}#{number}",
            lambda: self._gh.rest.issues.async_add_labels(owner, name, number, labels=list(labels)),
            idempotent=True,  # adding a label twice leaves one
        )
        return [str(label["name"]) for label in _body(response)]

    async def remove_label(self, repo: str, number: int, label: str) -> None:
        owner, name = _split(repo)
        try:
            await self._call(
                f"unlabelling {repo}#{number}",
                lambda: self._gh.rest.issues.async_remove_label(owner, name, number, label),
                idempotent=True,
            )
        except NotFound:
            return

    # -- pull requests ------------------------------------------------------------------------

    async def get_pull_request(self, repo: str, number: int) -> ForgePullRequest:
        owner, name = _split(repo)
        response = await self._call(
            f"reading pull request {repo}#{number}",
            lambda: self._gh.rest.pulls.async_get(owner, name, number),
            idempotent=True,
        )
        return pull_of(_body(response))

    async def open_pull_request(
        self, repo: str, *, title: str, body: str, head: str, base: str
    ) -> ForgePullRequest:
        owner, name = _split(repo)
        listed = await self._call(
            f"listing pull requests of {repo} from {head}",
            lambda: self._gh.rest.pulls.async_list(
                owner, name, state="open", head=f"{owner}:{head}", per_page=100
            ),
            idempotent=True,
        )
        for data in _body(listed):
            if (data.get("head") or {}).get("ref") == head:
                return pull_of(data)  # opened by an earlier attempt
        response = await self._call(
            f"opening a pull request in {repo} from {head}",
            lambda: self._gh.rest.pulls.async_create(
                owner, name, title=title, body=body, head=head, base=base
            ),
            idempotent=False,
        )
        return pull_of(_body(response))

    async def list_reviews(self, repo: str, number: int) -> list[ForgeReview]:
        owner, name = _split(repo)
        found = await self._pages(
            f"listing reviews of {repo}#{number}",
            lambda n: self._gh.rest.pulls.async_list_reviews(
                owner, name, number, per_page=100, page=n
            ),
        )
        return [review_of(r) for r in found]

    async def list_review_comments(
        self, repo: str, number: int, *, review_id: int | None = None
    ) -> list[ForgeReviewComment]:
        owner, name = _split(repo)
        if review_id is None:
            found = await self._pages(
                f"listing review comments of {repo}#{number}",
                lambda n: self._gh.rest.pulls.async_list_review_comments(
                    owner, name, number, per_page=100, page=n
                ),
            )
        else:
            found = await self._pages(
                f"listing comments of review {review_id} on {repo}#{number}",
                lambda n: self._gh.rest.pulls.async_list_comments_for_review(
                    owner, name, number, review_id, per_page=100, page=n
                ),
            )
        return [review_comment_of(c) for c in found]

    # -- branches and git ---------------------------------------------------------------------

    async def branch_sha(self, repo: str, branch: str) -> str | None:
        owner, name = _split(repo)
        try:
            response = await self._call(
                f"reading branch {branch} of {repo}",
                lambda: self._gh.rest.git.async_get_ref(owner, name, f"heads/{branch}"),
                idempotent=True,
            )
        except NotFound:
            return None
        return str((_body(response).get("object") or {}).get("sha") or "") or None

    async def prepare_workspace(self, repo: str, base_branch: str) -> PreparedWorkspace:
        return await self._git.prepare(repo, base_branch)

    async def inspect_bundle(self, repo: str, data: bytes, base_sha: str) -> BundleFacts:
        quarantine = f"incoming-{uuid.uuid4().hex[:12]}"
        return await self._git.inspect(repo, data, base_sha, quarantine)

    async def push_branch(
        self, repo: str, data: bytes, *, branch: str, sha: str, expected: str | None
    ) -> None:
        await self._git.push(repo, branch=branch, sha=sha, expected=expected)

    async def aclose(self) -> None:
        await self._source.aclose()


__all__ = ["DEFAULT_API_URL", "GitHubForge"]
