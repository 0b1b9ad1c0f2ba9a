"""Where GitHub's OpenAPI description and the webhook examples are (hack/github-fixtures.sh
installs them, pinned, with npm, into a cache outside the clone)."""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[3]


@functools.cache
def fixtures_dir() -> Path:
    out = subprocess.run(
        ["bash", str(REPO_ROOT / "hack" / "github-fixtures.sh")],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip().splitlines()[-1])


@functools.cache
def openapi() -> dict[str, Any]:
    """GitHub's REST API description (@octokit/openapi, api.github.com.json)."""
    data: dict[str, Any] = json.loads((fixtures_dir() / "api.github.com.json").read_text())
    return data


@functools.cache
def _webhook_examples() -> dict[str, list[dict[str, Any]]]:
    data = json.loads((fixtures_dir() / "webhooks.json").read_text())
    return {entry["name"]: entry["examples"] for entry in data}


def webhook_example(event: str, action: str | None = None, index: int = 0) -> dict[str, Any]:
    """A real payload of `event` (with `action`) from @octokit/webhooks-examples (a copy)."""
    found = [e for e in _webhook_examples()[event] if action is None or e.get("action") == action]
    if not found:
        raise KeyError(f"no example of {event}.{action}")
    return json.loads(json.dumps(found[index]))


def webhook_events() -> list[str]:
    return sorted(_webhook_examples())
