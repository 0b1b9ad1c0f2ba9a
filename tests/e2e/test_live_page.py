"""The live page in a real headless browser: it loads from the operator, authenticates with
a Kubernetes token, and shows a Run's phase changing while it runs."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lattice_devtools.localcluster.controlplane import free_port
from tests.support.browser import Page, chromium
from tests.support.cluster import Cluster
from tests.support.e2e_runs import apply_run, ready_sprite
from tests.support.sprites_server import LocalSprites
from tests.support.stack import Stack, operator_stack

ROLE = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: page-viewer, namespace: {ns}}}
rules:
- apiGroups: [lattice.dev]
  resources: [intents, runs, sprites]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: page-viewer, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: page-viewer}}
subjects:
- {{kind: ServiceAccount, name: page-viewer, namespace: {ns}}}
"""
ROW_PHASE = """(() => {
  const row = [...document.querySelectorAll('#runs tbody tr')]
    .find(r => r.dataset.name === %s);
  return row ? row.querySelector('td.phase').textContent : null;
})()"""


@pytest.fixture(scope="module")
def page_stack(
    cluster: Cluster, local_sprites: LocalSprites, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, str]]:
    port = free_port()
    log_dir: Path = tmp_path_factory.mktemp("operator-page")
    with operator_stack(cluster, local_sprites, log_dir, stream={"port": port}) as stack:
        yield stack, f"http://127.0.0.1:{port}"


async def phases_seen(page: Page, name: str, until: str, limit: float) -> list[str]:
    seen: list[str] = []
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        phase = await page.evaluate(ROW_PHASE % json.dumps(name))
        if phase and (not seen or seen[-1] != phase):
            seen.append(phase)
        if phase == until:
            return seen
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} never showed {until}; seen {seen}")


async def test_the_page_shows_a_run_changing_phase(
    page_stack: tuple[Stack, str], namespace: str, tmp_path: Path
) -> None:
    stack, url = page_stack
    page_html = await asyncio.to_thread(httpx.get, url, timeout=5)
    assert page_html.status_code == 200
    assert "default-src 'self'" in page_html.headers["Content-Security-Policy"]
    stack.cluster.kubectl("apply", "-f", "-", input=ROLE.format(ns=namespace))
    stack.cluster.kubectl("create", "serviceaccount", "page-viewer", "-n", namespace)
    token = stack.cluster.kubectl("create", "token", "page-viewer", "-n", namespace).stdout
    ready_sprite(stack, namespace)
    async with chromium(tmp_path / "profile") as page:
        await page.call("Page.navigate", url=f"{url}/?namespace={namespace}#token={token.strip()}")
        for _ in range(100):
            if await page.evaluate("document.getElementById('connection').dataset.state") == "live":
                break
            await asyncio.sleep(0.1)
        assert await page.evaluate("document.getElementById('connection').textContent") == "live"
        apply_run(stack, namespace, "shown", ["sh", "-c", "echo working; sleep 3; echo finished"])
        seen = await phases_seen(page, f"{namespace}/shown", "Succeeded", limit=90)
        shot = await page.screenshot(tmp_path / "live-page.png")
        last_line = await page.evaluate(
            "document.querySelector('#runs tbody tr[data-name]').lastChild.textContent"
        )
    assert "Running" in seen, seen
    assert seen[-1] == "Succeeded"
    assert seen.index("Running") < seen.index("Succeeded")
    assert last_line == "finished"
    assert shot.stat().st_size > 5_000  # a rendered page, not an empty image
    print(f"screenshot: {shot}")


async def test_the_page_without_a_token_asks_for_one(
    page_stack: tuple[Stack, str], tmp_path: Path
) -> None:
    _, url = page_stack
    async with chromium(tmp_path / "profile") as page:
        await page.call("Page.navigate", url=f"{url}/")
        for _ in range(50):
            if await page.evaluate("document.getElementById('login').hidden") is False:
                break
            await asyncio.sleep(0.1)
        assert await page.evaluate("document.getElementById('login').hidden") is False
        assert await page.evaluate("document.getElementById('connection').dataset.state") == (
            "denied"
        )
