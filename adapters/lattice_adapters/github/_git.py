"""git on the operator's side: a bare mirror per repository, bundles for sprites, a sprite's
bundle read into quarantine refs, and pushes that are never forced.

git runs as a subprocess with the token passed in its environment (GIT_CONFIG_*: an
`http.extraHeader`), never on its command line or in a remote URL, and with no credential
helper or prompt.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from lattice_adapters.github._auth import git_auth_header
from lattice_operator.ports.errors import (
    Conflict,
    InvalidRequest,
    NotFound,
    OperationFailed,
    Timeout,
    TransportError,
    Unauthorized,
)
from lattice_operator.ports.forge import BundleFacts, PreparedWorkspace

_SHA = re.compile(r"^[0-9a-f]{40}$")
_HEADER_LIMIT = 1 << 20
"""A bundle's header (prerequisites and refs) is read from its first MiB at most."""


class GitError(Exception):
    def __init__(self, args: tuple[str, ...], code: int, stderr: str) -> None:
        super().__init__(f"git {args[0] if args else ''} failed ({code}): {stderr.strip()[:500]}")
        self.code = code
        self.stderr = stderr


def parse_bundle_header(data: bytes) -> tuple[dict[str, str], tuple[str, ...]]:
    """(refs, prerequisites) from a v2/v3 bundle's header; ValueError if it is not one."""
    head = data[:_HEADER_LIMIT]
    lines = head.split(b"\n")
    if not lines or lines[0] not in (b"# v2 git bundle", b"# v3 git bundle"):
        raise ValueError("not a git bundle (v2 or v3)")
    refs: dict[str, str] = {}
    prerequisites: list[str] = []
    for raw in lines[1:]:
        if raw == b"":
            return refs, tuple(prerequisites)
        line = raw.decode("utf-8", "replace")
        if line.startswith("@"):  # v3 capabilities
            continue
        if line.startswith("-"):
            sha = line[1:].split(" ", 1)[0]
            if not _SHA.match(sha):
                raise ValueError(f"bad prerequisite line {line[:80]!r}")
            prerequisites.append(sha)
            continue
        sha, _, ref = line.partition(" ")
        if not _SHA.match(sha) or not ref:
            raise ValueError(f"bad ref line {line[:80]!r}")
        refs[ref] = sha
    raise ValueError("the bundle header does not end")


class GitMirror:
    """Bare mirrors of repositories under `root`, one lock per repository."""

    def __init__(
        self,
        root: Path,
        *,
        remote_url: Callable[[str], str],
        token: Callable[[], Awaitable[str]],
        timeout: float = 120.0,
    ) -> None:
        self._root = root
        self._remote_url = remote_url
        self._token = token
        self._timeout = timeout
        self._locks: dict[str, asyncio.Lock] = {}

    def _dir(self, repo: str) -> Path:
        digest = hashlib.sha256(repo.encode()).hexdigest()[:12]
        return self._root / f"{repo.replace('/', '--')}-{digest}.git"

    async def _git(
        self, *args: str, cwd: Path | None = None, remote: bool = False, stdin: bytes | None = None
    ) -> bytes:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self._root),
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "LC_ALL": "C",
        }
        if remote:
            header = git_auth_header(await self._token())
            env.update(
                GIT_CONFIG_COUNT="2",
                GIT_CONFIG_KEY_0="http.extraHeader",
                GIT_CONFIG_VALUE_0=header,
                GIT_CONFIG_KEY_1="credential.helper",
                GIT_CONFIG_VALUE_1="",
            )
        process = await asyncio.create_subprocess_exec(
            "git",
            *args,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(stdin), self._timeout)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise Timeout(f"git {args[0]} took longer than {self._timeout:.0f}s") from None
        if process.returncode != 0:
            raise GitError(args, process.returncode or 1, err.decode("utf-8", "replace"))
        return out

    @staticmethod
    def _remote_error(exc: GitError, doing: str) -> Exception:
        text = exc.stderr.lower()
        if "authentication failed" in text or " 401" in text or " 403" in text:
            return Unauthorized(f"{doing}: the forge refused the credential")
        if "not found" in text or " 404" in text:
            return NotFound(f"{doing}: {exc.stderr.strip()[:300]}")
        if "non-fast-forward" in text or "fetch first" in text or "rejected" in text:
            return Conflict(f"{doing}: {exc.stderr.strip()[:300]}")
        return TransportError(f"{doing}: {exc.stderr.strip()[:300]}")

    def _lock(self, repo: str) -> asyncio.Lock:
        return self._locks.setdefault(repo, asyncio.Lock())

    async def _fetch(self, repo: str) -> Path:
        path = self._dir(repo)
        if not (path / "HEAD").exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(prefix=".init-", dir=path.parent))
            await self._git("init", "--quiet", "--bare", str(scratch))
            os.replace(scratch, path)
        try:
            await self._git(
                "fetch",
                "--quiet",
                "--prune",
                self._remote_url(repo),
                "+refs/heads/*:refs/heads/*",
                cwd=path,
                remote=True,
            )
        except GitError as exc:
            raise self._remote_error(exc, f"fetching {repo}") from None
        return path

    async def prepare(self, repo: str, base_branch: str) -> PreparedWorkspace:
        async with self._lock(repo):
            path = await self._fetch(repo)
            try:
                sha = (await self._git("rev-parse", f"refs/heads/{base_branch}", cwd=path)).decode()
            except GitError:
                raise NotFound(f"{repo} has no branch {base_branch}") from None
            data = await self._git(
                "bundle", "create", "--quiet", "-", f"refs/heads/{base_branch}", cwd=path
            )
            return PreparedWorkspace(bundle=data, base_branch=base_branch, base_sha=sha.strip())

    async def inspect(self, repo: str, data: bytes, base_sha: str, quarantine: str) -> BundleFacts:
        try:
            refs, prerequisites = parse_bundle_header(data)
        except ValueError as exc:
            return BundleFacts(
                size=len(data), refs={}, prerequisites=(), verified=False, problem=str(exc)
            )
        async with self._lock(repo):
            path = self._dir(repo)
            if not (path / "HEAD").exists():
                path = await self._fetch(repo)
            with tempfile.TemporaryDirectory(prefix="lattice-bundle-") as tmp:
                file = Path(tmp) / "in.bundle"
                file.write_bytes(data)
                try:
                    await self._git("bundle", "verify", "--quiet", str(file), cwd=path)
                    # Into quarantine refs only: nothing under refs/heads changes.
                    await self._git(
                        "fetch",
                        "--quiet",
                        "--no-tags",
                        str(file),
                        *[f"+{ref}:refs/lattice/{quarantine}/{i}" for i, ref in enumerate(refs)],
                        cwd=path,
                    )
                except GitError as exc:
                    return BundleFacts(
                        size=len(data),
                        refs=refs,
                        prerequisites=prerequisites,
                        verified=False,
                        problem=exc.stderr.strip()[:300] or str(exc),
                    )
            descends: dict[str, bool] = {}
            commits: dict[str, int] = {}
            for ref, sha in refs.items():
                try:
                    await self._git("merge-base", "--is-ancestor", base_sha, sha, cwd=path)
                    descends[ref] = True
                except GitError:
                    descends[ref] = False
                try:
                    count = await self._git("rev-list", "--count", f"{base_sha}..{sha}", cwd=path)
                    commits[ref] = int(count.decode().strip() or 0)
                except (GitError, ValueError):
                    commits[ref] = -1
            return BundleFacts(
                size=len(data),
                refs=refs,
                prerequisites=prerequisites,
                verified=True,
                descends=descends,
                commits=commits,
            )

    async def push(self, repo: str, *, branch: str, sha: str, expected: str | None) -> None:
        if not _SHA.match(sha):
            raise InvalidRequest(f"not a commit id: {sha[:60]!r}")
        async with self._lock(repo):
            path = self._dir(repo)
            try:
                await self._git("cat-file", "-e", f"{sha}^{{commit}}", cwd=path)
            except GitError:
                raise NotFound(f"commit {sha} is not in the operator's copy of {repo}") from None
            url = self._remote_url(repo)
            try:
                listed = await self._git(
                    "ls-remote", "--heads", url, f"refs/heads/{branch}", cwd=path, remote=True
                )
            except GitError as exc:
                raise self._remote_error(exc, f"reading {repo}") from None
            now = listed.decode().split("\t", 1)[0].strip() or None
            if now == sha:
                return  # pushed already (a retried pass)
            if now != expected:
                raise Conflict(
                    f"branch {branch} of {repo} is at {now or 'nothing'}, "
                    f"expected {expected or 'nothing'}: not pushed"
                )
            try:
                # Never --force: the forge refuses anything but a fast-forward or a new branch.
                await self._git(
                    "push",
                    "--quiet",
                    "--no-verify",
                    url,
                    f"{sha}:refs/heads/{branch}",
                    cwd=path,
                    remote=True,
                )
            except GitError as exc:
                raise self._remote_error(exc, f"pushing {branch} to {repo}") from None

    async def forget(self, repo: str, quarantine: str) -> None:
        """Drop a sprite's quarantine refs (the objects go with git's own gc)."""
        path = self._dir(repo)
        with contextlib.suppress(GitError, OperationFailed):
            refs = await self._git(
                "for-each-ref", "--format=%(refname)", f"refs/lattice/{quarantine}/", cwd=path
            )
            for ref in refs.decode().split():
                await self._git("update-ref", "-d", ref, cwd=path)

    def remove_all(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)


__all__ = ["GitError", "GitMirror", "parse_bundle_header"]
