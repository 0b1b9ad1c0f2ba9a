"""A local GitHub for the tests: REST on 127.0.0.1, every request checked against GitHub's
OpenAPI description (a request GitHub would not know fails the test), state kept like
GitHub keeps it (issues, comments, labels, pull requests, reviews, review comments), and
git's own smart HTTP for pushes.

    with github_double(tmp_path, token="t") as gh:
        gh.create_repo("octo/app")
        forge = GitHubForge(StaticToken("t"), api_url=gh.api_url, git_url=gh.git_url, ...)
        ...
        assert gh.violations == []

It runs on its own thread (its own event loop), so synchronous and asynchronous tests can
use it alike; the state is guarded by one lock. `fail_next` injects GitHub's failures
(5xx, primary and secondary rate limits with their headers).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import re
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jwt
from aiohttp import web

from tests.support.github.git_http import git, http_backend
from tests.support.github.openapi_check import github_check

_ids = itertools.count(1_000_001)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def user(login: str, kind: str = "User") -> dict[str, Any]:
    uid = abs(hash(login)) % 10_000_000
    return {
        "login": login,
        "id": uid,
        "node_id": f"U_{uid}",
        "type": kind,
        "site_admin": False,
        "html_url": f"https://github.com/{login}",
        "url": f"https://api.github.com/users/{login}",
        "avatar_url": "",
    }


@dataclass
class Fault:
    method: str
    path: re.Pattern[str]
    status: int
    times: int
    headers: dict[str, str]
    message: str
    after: bool = False
    """Carry the request out, then answer the failure (a write that happened anyway)."""


@dataclass
class RepoState:
    full_name: str
    git_dir: Path
    next_number: int = 1
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    reviews: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    review_comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    def repository(self) -> dict[str, Any]:
        owner, name = self.full_name.split("/")
        return {
            "id": abs(hash(self.full_name)) % 10_000_000,
            "node_id": "R_1",
            "name": name,
            "full_name": self.full_name,
            "private": False,
            "owner": user(owner, "Organization"),
            "html_url": f"https://github.com/{self.full_name}",
            "default_branch": "main",
        }


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    operation: str | None
    status: int


class GitHubDouble:
    def __init__(
        self,
        root: Path,
        *,
        token: str,
        app_id: str | None = None,
        app_public_key: str | None = None,
        installation_token_ttl: float = 3600.0,
        bot: str = "lattice-bot[bot]",
    ) -> None:
        self.root = root
        self.git_root = root / "git"
        self.git_root.mkdir(parents=True, exist_ok=True)
        self.tokens = {token}
        self.app_id = app_id
        self.app_public_key = app_public_key
        self.installation_token_ttl = installation_token_ttl
        self.installation_tokens: list[tuple[str, datetime]] = []
        self.bot = bot
        self.repos: dict[str, RepoState] = {}
        self.violations: list[str] = []
        self.requests: list[Recorded] = []
        self.faults: list[Fault] = []
        self.lock = threading.RLock()
        self._check = github_check()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v3"

    @property
    def git_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/git/{{repo}}.git"

    def start(self) -> None:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            app = web.Application(client_max_size=64 * 1024 * 1024)
            app.router.add_route("*", "/api/v3/{tail:.*}", self._api)
            app.router.add_route("*", "/git/{path:.*}", self._git)
            self._runner = web.AppRunner(app, access_log=None)
            loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            server = site._server
            assert server is not None
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="github-double", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("the GitHub double did not start")

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)

    # -- what the tests set up and look at ------------------------------------------------

    def create_repo(self, full_name: str, files: dict[str, str] | None = None) -> RepoState:
        git_dir = self.git_root / f"{full_name}.git"
        git_dir.parent.mkdir(parents=True, exist_ok=True)
        git("init", "--quiet", "--bare", "--initial-branch=main", str(git_dir))
        git("config", "http.receivepack", "true", cwd=git_dir)
        work = self.root / "seed" / full_name
        git("init", "--quiet", "--initial-branch=main", str(work))
        for name, text in (files or {"README.md": f"# {full_name}\n"}).items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(text)
        git("add", "-A", cwd=work)
        git("commit", "--quiet", "-m", "initial commit", cwd=work)
        git("push", "--quiet", str(git_dir), "main", cwd=work)
        with self.lock:
            state = RepoState(full_name, git_dir)
            self.repos[full_name] = state
            return state

    def commit_to(self, repo: str, branch: str, files: dict[str, str], message: str) -> str:
        """A person's commit of `files` on `branch` (a fast-forward push, or a new branch
        from main); its sha."""
        work = self.root / "seed" / repo
        start = branch if self.branch_sha(repo, branch) else "main"
        git("fetch", "--quiet", str(self.repos[repo].git_dir), start, cwd=work)
        git("checkout", "--quiet", "-B", branch, "FETCH_HEAD", cwd=work)
        for name, text in files.items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(text)
        git("add", "-A", cwd=work)
        git("commit", "--quiet", "-m", message, cwd=work)
        git("push", "--quiet", str(self.repos[repo].git_dir), f"{branch}:{branch}", cwd=work)
        return git("rev-parse", "HEAD", cwd=work).strip()

    def branch_sha(self, repo: str, branch: str) -> str | None:
        try:
            return (
                git(
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    f"refs/heads/{branch}",
                    cwd=self.repos[repo].git_dir,
                )
                or None
            )
        except Exception:
            return None

    def git_log(self, repo: str, ref: str) -> list[str]:
        out = git("log", "--format=%H %s", ref, cwd=self.repos[repo].git_dir)
        return out.splitlines()

    def fail_next(
        self,
        method: str,
        path: str,
        status: int,
        *,
        times: int = 1,
        headers: dict[str, str] | None = None,
        message: str = "injected",
        after: bool = False,
    ) -> None:
        with self.lock:
            self.faults.append(
                Fault(method, re.compile(path), status, times, headers or {}, message, after)
            )

    def rate_limit_next(
        self, method: str, path: str, *, secondary: bool, retry_after: int = 1
    ) -> None:
        if secondary:
            self.fail_next(
                method,
                path,
                403,
                headers={"Retry-After": str(retry_after)},
                message="You have exceeded a secondary rate limit.",
            )
        else:
            reset = int(time.time()) + retry_after
            self.fail_next(
                method,
                path,
                403,
                headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)},
                message="API rate limit exceeded",
            )

    def calls(self, operation: str) -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests if r.operation == operation]

    def open_issue(
        self, repo: str, title: str, body: str, login: str, labels: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        with self.lock:
            return self._new_issue(self.repos[repo], title, body, login, list(labels))

    def add_comment(self, repo: str, number: int, body: str, login: str) -> dict[str, Any]:
        with self.lock:
            return self._new_comment(self.repos[repo], number, body, login)

    def add_label(self, repo: str, number: int, label: str) -> None:
        with self.lock:
            issue = self.repos[repo].issues[number]
            if label not in [x["name"] for x in issue["labels"]]:
                issue["labels"].append(self._label(label))

    def submit_review(
        self,
        repo: str,
        pr: int,
        *,
        state: str,
        body: str,
        login: str,
        comments: list[tuple[str, int, str]] = (),  # type: ignore[assignment]
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        with self.lock:
            state_ = self.repos[repo]
            pull = state_.pulls[pr]
            review = {
                "id": next(_ids),
                "node_id": "PRR_1",
                "user": user(login),
                "body": body,
                "state": state,
                "commit_id": pull["head"]["sha"],
                "submitted_at": _now(),
                "html_url": f"{pull['html_url']}#pullrequestreview",
                "pull_request_url": pull["url"],
                "author_association": "MEMBER",
                "_links": {"html": {"href": ""}, "pull_request": {"href": ""}},
            }
            state_.reviews.setdefault(pr, []).append(review)
            made = []
            for path, line, text in comments:
                comment = {
                    "id": next(_ids),
                    "node_id": "PRRC_1",
                    "pull_request_review_id": review["id"],
                    "diff_hunk": "@@",
                    "path": path,
                    "line": line,
                    "body": text,
                    "user": user(login),
                    "commit_id": pull["head"]["sha"],
                    "original_commit_id": pull["head"]["sha"],
                    "created_at": _now(),
                    "updated_at": _now(),
                    "html_url": "",
                    "url": "",
                    "pull_request_url": pull["url"],
                    "author_association": "MEMBER",
                }
                state_.review_comments.setdefault(pr, []).append(comment)
                made.append(comment)
            return review, made

    # -- the API --------------------------------------------------------------------------

    def _authorised(self, request: web.Request) -> str | None:
        header = request.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() in ("token", "bearer") and value in self.tokens:
            return value
        with self.lock:
            now = datetime.now(UTC)
            for token, expires in self.installation_tokens:
                if value == token and now < expires:
                    return value
        return None

    async def _api(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        raw = await request.read()
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                self.violations.append(f"{request.method} {path}: body is not JSON")
                return web.json_response({"message": "Problems parsing JSON"}, status=400)
        query = dict(request.query)
        checked = self._check.check(request.method, path, query, body, bool(raw))
        with self.lock:
            if checked.problems:
                self.violations.extend(checked.problems)
            fault = next(
                (
                    f
                    for f in self.faults
                    if f.times > 0 and f.method == request.method and f.path.search(path)
                ),
                None,
            )
        status = 0
        try:
            if checked.problems:
                status = 422
                return web.json_response(
                    {"message": "Invalid request", "errors": checked.problems}, status=422
                )
            if fault is not None and not fault.after:
                with self.lock:
                    fault.times -= 1
                status = fault.status
                return web.json_response(
                    {"message": fault.message}, status=fault.status, headers=fault.headers
                )
            answer = await self._answer(
                request, checked.operation_id or "", checked.path_params, query, body
            )
            if fault is not None and fault.after:
                with self.lock:
                    fault.times -= 1
                status = fault.status
                return web.json_response({"message": fault.message}, status=fault.status)
            status = answer.status
            return answer
        finally:
            with self.lock:
                self.requests.append(
                    Recorded(request.method, path, query, body, checked.operation_id, status)
                )

    async def _answer(
        self,
        request: web.Request,
        operation: str,
        params: dict[str, str],
        query: dict[str, str],
        body: Any,
    ) -> web.Response:
        if operation == "apps/create-installation-access-token":
            return self._installation_token(request)
        if self._authorised(request) is None:
            return web.json_response({"message": "Bad credentials"}, status=401)
        repo_name = f"{params.get('owner')}/{params.get('repo')}"
        with self.lock:
            repo = self.repos.get(repo_name)
            if repo is None:
                return web.json_response({"message": "Not Found"}, status=404)
            handler = getattr(self, "_op_" + operation.replace("/", "__").replace("-", "_"), None)
            if handler is None:
                self.violations.append(
                    f"{operation}: valid for GitHub, not implemented by the double"
                )
                return web.json_response({"message": "not implemented"}, status=501)
            return handler(repo, params, query, body or {})  # type: ignore[no-any-return]

    def _installation_token(self, request: web.Request) -> web.Response:
        header = request.headers.get("Authorization", "")
        if not header.startswith("Bearer ") or not self.app_public_key:
            return web.json_response(
                {"message": "A JSON web token could not be decoded"}, status=401
            )
        try:
            # The signature is what matters here; the tests move the App's clock by hand.
            claims = jwt.decode(
                header[7:],
                self.app_public_key,
                algorithms=["RS256"],
                options={"verify_exp": False, "verify_iat": False},
            )
        except jwt.PyJWTError as exc:
            return web.json_response({"message": f"bad JWT: {exc}"}, status=401)
        if str(claims.get("iss")) != self.app_id or claims["exp"] - claims["iat"] > 600:
            return web.json_response({"message": "bad JWT claims"}, status=401)
        token = "ghs_" + secrets.token_hex(16)
        expires = datetime.now(UTC) + timedelta(seconds=self.installation_token_ttl)
        with self.lock:
            self.installation_tokens.append((token, expires))
        return web.json_response(
            {
                "token": token,
                "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "permissions": {"issues": "write", "pull_requests": "write", "contents": "write"},
                "repository_selection": "all",
            },
            status=201,
        )

    # -- state helpers (lock held) --------------------------------------------------------

    def _label(self, name: str) -> dict[str, Any]:
        return {
            "id": abs(hash(name)) % 10_000_000,
            "node_id": "LA_1",
            "url": "",
            "name": name,
            "color": "ededed",
            "default": False,
            "description": None,
        }

    def _new_issue(
        self, repo: RepoState, title: str, body: str | None, login: str, labels: list[str]
    ) -> dict[str, Any]:
        number = repo.next_number
        repo.next_number += 1
        base = f"https://api.github.com/repos/{repo.full_name}/issues/{number}"
        issue = {
            "id": next(_ids),
            "node_id": "I_1",
            "number": number,
            "title": title,
            "body": body,
            "state": "open",
            "locked": False,
            "comments": 0,
            "labels": [self._label(x) for x in labels],
            "user": user(login),
            "assignees": [],
            "assignee": None,
            "milestone": None,
            "author_association": "MEMBER",
            "created_at": _now(),
            "updated_at": _now(),
            "closed_at": None,
            "url": base,
            "repository_url": "",
            "labels_url": "",
            "comments_url": f"{base}/comments",
            "events_url": "",
            "html_url": f"https://github.com/{repo.full_name}/issues/{number}",
        }
        repo.issues[number] = issue
        repo.comments[number] = []
        return issue

    def _new_comment(self, repo: RepoState, number: int, body: str, login: str) -> dict[str, Any]:
        issue = repo.issues[number]
        comment = {
            "id": next(_ids),
            "node_id": "IC_1",
            "body": body,
            "user": user(login),
            "created_at": _now(),
            "updated_at": _now(),
            "author_association": "MEMBER",
            "issue_url": issue["url"],
            "url": "",
            "html_url": f"{issue['html_url']}#issuecomment-{len(repo.comments[number]) + 1}",
        }
        repo.comments[number].append(comment)
        issue["comments"] += 1
        return comment

    @staticmethod
    def _page(items: list[dict[str, Any]], query: dict[str, str]) -> list[dict[str, Any]]:
        per_page = int(query.get("per_page", 30))
        page = int(query.get("page", 1))
        return items[(page - 1) * per_page : page * per_page]

    # -- operations (named after GitHub's operationId) -----------------------------------

    def _op_issues__get(self, repo: RepoState, p: dict[str, str], q: Any, b: Any) -> web.Response:
        issue = repo.issues.get(int(p["issue_number"]))
        if issue is None:
            return web.json_response({"message": "Not Found"}, status=404)
        return web.json_response(issue)

    def _op_issues__create(
        self, repo: RepoState, p: Any, q: Any, b: dict[str, Any]
    ) -> web.Response:
        labels = [x if isinstance(x, str) else x["name"] for x in b.get("labels", [])]
        issue = self._new_issue(repo, str(b["title"]), b.get("body"), self.bot, labels)
        return web.json_response(issue, status=201)

    def _op_issues__update(
        self, repo: RepoState, p: dict[str, str], q: Any, b: dict[str, Any]
    ) -> web.Response:
        issue = repo.issues.get(int(p["issue_number"]))
        if issue is None:
            return web.json_response({"message": "Not Found"}, status=404)
        for key in ("title", "body", "state"):
            if key in b:
                issue[key] = b[key]
        issue["updated_at"] = _now()
        return web.json_response(issue)

    def _op_issues__list_for_repo(
        self, repo: RepoState, p: Any, q: dict[str, str], b: Any
    ) -> web.Response:
        state = q.get("state", "open")
        wanted = [x for x in q.get("labels", "").split(",") if x]
        found = [
            i
            for i in repo.issues.values()
            if (state == "all" or i["state"] == state)
            and all(w in [x["name"] for x in i["labels"]] for w in wanted)
        ]
        return web.json_response(self._page(found, q))

    def _op_issues__list_comments(
        self, repo: RepoState, p: dict[str, str], q: dict[str, str], b: Any
    ) -> web.Response:
        number = int(p["issue_number"])
        if number not in repo.issues:
            return web.json_response({"message": "Not Found"}, status=404)
        return web.json_response(self._page(repo.comments[number], q))

    def _op_issues__create_comment(
        self, repo: RepoState, p: dict[str, str], q: Any, b: dict[str, Any]
    ) -> web.Response:
        number = int(p["issue_number"])
        if number not in repo.issues:
            return web.json_response({"message": "Not Found"}, status=404)
        return web.json_response(
            self._new_comment(repo, number, str(b["body"]), self.bot), status=201
        )

    def _op_issues__add_labels(
        self, repo: RepoState, p: dict[str, str], q: Any, b: Any
    ) -> web.Response:
        issue = repo.issues.get(int(p["issue_number"]))
        if issue is None:
            return web.json_response({"message": "Not Found"}, status=404)
        names = b.get("labels", []) if isinstance(b, dict) else b
        for name in names:
            name = name if isinstance(name, str) else name["name"]
            if name not in [x["name"] for x in issue["labels"]]:
                issue["labels"].append(self._label(name))
        return web.json_response(issue["labels"])

    def _op_issues__remove_label(
        self, repo: RepoState, p: dict[str, str], q: Any, b: Any
    ) -> web.Response:
        issue = repo.issues.get(int(p["issue_number"]))
        names = [x["name"] for x in issue["labels"]] if issue else []
        if issue is None or p["name"] not in names:
            return web.json_response({"message": "Label does not exist"}, status=404)
        issue["labels"] = [x for x in issue["labels"] if x["name"] != p["name"]]
        return web.json_response(issue["labels"])

    def _pull_json(self, repo: RepoState, pull: dict[str, Any]) -> dict[str, Any]:
        sha = self.branch_sha(repo.full_name, pull["head"]["ref"]) or pull["head"]["sha"]
        pull["head"]["sha"] = sha
        return pull

    def _op_pulls__create(self, repo: RepoState, p: Any, q: Any, b: dict[str, Any]) -> web.Response:
        head, base = str(b["head"]).split(":")[-1], str(b["base"])
        head_sha = self.branch_sha(repo.full_name, head)
        base_sha = self.branch_sha(repo.full_name, base)
        if head_sha is None or base_sha is None:
            return web.json_response(
                {
                    "message": "Validation Failed",
                    "errors": [{"resource": "PullRequest", "field": "head", "code": "invalid"}],
                },
                status=422,
            )
        owner = repo.full_name.split("/")[0]
        for pull in repo.pulls.values():
            if pull["state"] == "open" and pull["head"]["ref"] == head:
                return web.json_response(
                    {
                        "message": "Validation Failed",
                        "errors": [
                            {
                                "resource": "PullRequest",
                                "code": "custom",
                                "message": f"A pull request already exists for {owner}:{head}.",
                            }
                        ],
                    },
                    status=422,
                )
        issue = self._new_issue(repo, str(b.get("title") or head), b.get("body"), self.bot, [])
        number = issue["number"]
        issue["pull_request"] = {"url": "", "html_url": ""}
        owner = repo.full_name.split("/")[0]
        pull = {
            "id": next(_ids),
            "node_id": "PR_1",
            "number": number,
            "state": "open",
            "title": issue["title"],
            "body": issue["body"],
            "user": user(self.bot, "Bot"),
            "head": {
                "ref": head,
                "sha": head_sha,
                "label": f"{owner}:{head}",
                "repo": repo.repository(),
                "user": user(owner),
            },
            "base": {
                "ref": base,
                "sha": base_sha,
                "label": f"{owner}:{base}",
                "repo": repo.repository(),
                "user": user(owner),
            },
            "html_url": f"https://github.com/{repo.full_name}/pull/{number}",
            "url": f"https://api.github.com/repos/{repo.full_name}/pulls/{number}",
            "draft": False,
            "merged": False,
            "created_at": _now(),
            "updated_at": _now(),
        }
        repo.pulls[number] = pull
        return web.json_response(pull, status=201)

    def _op_pulls__get(self, repo: RepoState, p: dict[str, str], q: Any, b: Any) -> web.Response:
        pull = repo.pulls.get(int(p["pull_number"]))
        if pull is None:
            return web.json_response({"message": "Not Found"}, status=404)
        return web.json_response(self._pull_json(repo, pull))

    def _op_pulls__list(self, repo: RepoState, p: Any, q: dict[str, str], b: Any) -> web.Response:
        state = q.get("state", "open")
        head = q.get("head", "").split(":")[-1]
        found = [
            self._pull_json(repo, x)
            for x in repo.pulls.values()
            if (state == "all" or x["state"] == state) and (not head or x["head"]["ref"] == head)
        ]
        return web.json_response(self._page(found, q))

    def _op_pulls__list_reviews(
        self, repo: RepoState, p: dict[str, str], q: dict[str, str], b: Any
    ) -> web.Response:
        return web.json_response(self._page(repo.reviews.get(int(p["pull_number"]), []), q))

    def _op_pulls__list_review_comments(
        self, repo: RepoState, p: dict[str, str], q: dict[str, str], b: Any
    ) -> web.Response:
        return web.json_response(self._page(repo.review_comments.get(int(p["pull_number"]), []), q))

    def _op_pulls__list_comments_for_review(
        self, repo: RepoState, p: dict[str, str], q: dict[str, str], b: Any
    ) -> web.Response:
        review = int(p["review_id"])
        found = [
            c
            for c in repo.review_comments.get(int(p["pull_number"]), [])
            if c["pull_request_review_id"] == review
        ]
        return web.json_response(self._page(found, q))

    def _op_git__get_ref(self, repo: RepoState, p: dict[str, str], q: Any, b: Any) -> web.Response:
        ref = p["ref"]
        sha = (
            self.branch_sha(repo.full_name, ref.removeprefix("heads/"))
            if ref.startswith("heads/")
            else None
        )
        if sha is None:
            return web.json_response({"message": "Not Found"}, status=404)
        return web.json_response(
            {
                "ref": f"refs/{ref}",
                "node_id": "REF_1",
                "url": "",
                "object": {"type": "commit", "sha": sha, "url": ""},
            }
        )

    # -- git ------------------------------------------------------------------------------

    async def _git(self, request: web.Request) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        token = None
        if header.startswith("Basic "):
            with contextlib.suppress(ValueError):
                token = base64.b64decode(header[6:]).decode().partition(":")[2]
        if token is None or (
            token not in self.tokens
            and not any(token == t and datetime.now(UTC) < e for t, e in self.installation_tokens)
        ):
            return web.Response(
                status=401, headers={"WWW-Authenticate": 'Basic realm="GitHub"'}, text="denied"
            )
        return await http_backend(request, self.git_root, "x-access-token")


@contextlib.contextmanager
def github_double(root: Path, **kwargs: Any) -> Iterator[GitHubDouble]:
    double = GitHubDouble(root, **kwargs)
    double.start()
    try:
        yield double
    finally:
        double.stop()
