"""A headless Chromium driven through its DevTools protocol (no Playwright needed)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import websockets

BINARIES = ("chromium-headless-shell", "chromium")


def find_chromium() -> str:
    for name in BINARIES:
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError("no headless Chromium: `make browser` installs the pinned one")


class Page:
    """One tab: navigate, evaluate JavaScript, take a screenshot."""

    def __init__(self, ws: Any) -> None:
        self._ws = ws
        self._ids = itertools.count(1)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        message_id = next(self._ids)
        await self._ws.send(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            reply = json.loads(await asyncio.wait_for(self._ws.recv(), 30))
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    async def screenshot(self, path: Path) -> Path:
        shot = await self.call("Page.captureScreenshot", format="png")
        await asyncio.to_thread(path.write_bytes, base64.b64decode(shot["data"]))
        return path


def _launch(profile: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start Chromium; its process and the DevTools WebSocket of its first tab."""
    proc = subprocess.Popen(
        [
            find_chromium(),
            "--headless",
            "--no-sandbox",  # root in a test: the setuid sandbox cannot be used
            "--disable-gpu",
            "--no-first-run",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "--window-size=1200,800",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # Its own process group: Chromium's zygote and renderers outlive a browser that is
        # only terminated, so the whole group is stopped.
        start_new_session=True,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        # Chromium creates the file, then writes its port and path: under load the file was
        # seen empty (exists is not written). Its first line, once complete, is the port.
        while not (port := written_port(port_file)):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("Chromium did not start its DevTools endpoint")
            time.sleep(0.1)
        while time.monotonic() < deadline:
            listing = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=5).json()
            pages = [t for t in listing if t.get("type") == "page"]
            if pages:
                return proc, str(pages[0]["webSocketDebuggerUrl"])
            time.sleep(0.1)
        raise AssertionError("Chromium has no tab")
    except BaseException:
        _stop(proc)
        raise


def written_port(port_file: Path) -> int | None:
    """The DevTools port once Chromium has written the file's first line whole."""
    try:
        text = port_file.read_text()
    except FileNotFoundError:
        return None
    first, newline, _ = text.partition("\n")
    return int(first) if newline and first.isdigit() else None


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    # Whatever of the group is still there (the browser's helpers) goes too.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@contextlib.asynccontextmanager
async def chromium(profile: Path) -> AsyncIterator[Page]:
    """A headless Chromium on 127.0.0.1 with a throwaway profile; stopped afterwards."""
    proc, url = await asyncio.to_thread(_launch, profile)
    try:
        async with websockets.connect(url, max_size=64 * 1024 * 1024) as ws:
            page = Page(ws)
            await page.call("Page.enable")
            await page.call("Runtime.enable")
            yield page
    finally:
        await asyncio.to_thread(_stop, proc)


__all__ = ["Page", "chromium", "find_chromium"]
