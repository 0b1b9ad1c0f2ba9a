"""git's own smart HTTP (`git http-backend`, run as CGI) behind the double's aiohttp server:
pushes are real, and the tests inspect the pushed commits in the bare repositories."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from aiohttp import web


async def http_backend(request: web.Request, project_root: Path, user: str) -> web.Response:
    """Answer one smart-HTTP request for a repository under `project_root`."""
    path_info = "/" + request.match_info["path"]
    body = await request.read()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "GIT_PROJECT_ROOT": str(project_root),
        "GIT_HTTP_EXPORT_ALL": "1",
        "PATH_INFO": path_info,
        "QUERY_STRING": request.query_string,
        "REQUEST_METHOD": request.method,
        "CONTENT_TYPE": request.headers.get("Content-Type", ""),
        "CONTENT_LENGTH": str(len(body)),
        "REMOTE_USER": user,
        "REMOTE_ADDR": "127.0.0.1",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(project_root),
    }
    if "Content-Encoding" in request.headers:
        env["HTTP_CONTENT_ENCODING"] = request.headers["Content-Encoding"]
    if "Git-Protocol" in request.headers:
        env["GIT_PROTOCOL"] = request.headers["Git-Protocol"]
    process = await asyncio.create_subprocess_exec(
        "git",
        "http-backend",
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(body), 60)
    head, _, payload = out.partition(b"\r\n\r\n")
    if not _:
        head, _, payload = out.partition(b"\n\n")
    status = 200
    headers: dict[str, str] = {}
    for line in head.decode("latin-1").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.strip().split()[0])
        elif name:
            headers[name.strip()] = value.strip()
    if process.returncode != 0 and status == 200:
        return web.Response(status=500, text=err.decode("utf-8", "replace"))
    return web.Response(status=status, body=payload, headers=headers)


def git(*args: str, cwd: Path | None = None) -> str:
    """Run git synchronously (setting up and inspecting the double's repositories)."""
    import subprocess

    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(cwd or "/tmp"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Octo Cat",
        "GIT_AUTHOR_EMAIL": "octocat@example.com",
        "GIT_COMMITTER_NAME": "Octo Cat",
        "GIT_COMMITTER_EMAIL": "octocat@example.com",
    }
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    )
    return out.stdout.strip()
