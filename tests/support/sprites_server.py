"""Start `lattice sprites-local` for a test and stop exactly that process afterwards.

    with sprites_server(tmp_path) as server:
        adapter = SpritesAdapter(server.credentials)
        server.set_faults(drop_before_exit=True)
        server.go_cold("box")

The server runs as a subprocess on a free 127.0.0.1 port with a throwaway state directory
and token (passed through the environment, never on the command line). Its log is kept in
`server.log_path` and printed when start-up fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

from lattice_adapters.sprites import SpritesCredentials

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class LocalSprites:
    """A running local Sprites server."""

    base_url: str
    token: str
    state_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes]

    @property
    def credentials(self) -> SpritesCredentials:
        return SpritesCredentials(token=SecretStr(self.token), api_url=self.base_url)

    def _admin(self, method: str, path: str, **kwargs: Any) -> Any:
        with httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=30,
            trust_env=False,
        ) as client:
            response = client.request(method, path, **kwargs)
            response.raise_for_status()
            return response.json()

    def set_faults(self, **switches: Any) -> dict[str, Any]:
        """Merge fault switches (see lattice_devtools.sprites_local._faults)."""
        result: dict[str, Any] = self._admin("POST", "/_local/faults", json=switches)
        return result

    def reset_faults(self) -> None:
        self._admin("DELETE", "/_local/faults")

    def go_cold(self, sprite: str) -> dict[str, Any]:
        """Make the sprite cold now: its sessions are lost without exit frames."""
        result: dict[str, Any] = self._admin("POST", f"/_local/sprites/{sprite}/cold")
        return result

    def drop_sockets(self, sprite: str, session: str | None = None) -> int:
        """Drop the exec sockets of a sprite (or one session) now; processes keep running."""
        params = {"session": session} if session else None
        result = self._admin("POST", f"/_local/sprites/{sprite}/drop", params=params)
        return int(result["dropped"])

    def describe(self, sprite: str) -> dict[str, Any]:
        """Internal state: status, session pids/pgids, service pids."""
        result: dict[str, Any] = self._admin("GET", f"/_local/sprites/{sprite}")
        return result

    def host_root(self, sprite: str) -> Path:
        """The host directory that the sprite's processes see as /workspace."""
        return self.state_dir / "sprites" / sprite / "root"

    def host_shm(self, sprite: str) -> Path:
        """The host directory that the sprite's processes see as /dev/shm."""
        return self.state_dir / "sprites" / sprite / "shm"


def _lattice_command() -> list[str]:
    script = Path(sys.executable).with_name("lattice")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from lattice_operator.cli import main; main()"]


@contextlib.contextmanager
def sprites_server(
    workdir: Path,
    *,
    warm_after: float = 30.0,
    cold_after: float = 600.0,
    scrollback: int = 64 * 1024,
    token: str | None = None,
    start_timeout: float = 30.0,
    keep_state: bool = False,
    extra: Sequence[str] = (),
) -> Iterator[LocalSprites]:
    """A local Sprites server for the duration of the block.

    The state directory (`workdir/state`) is removed afterwards unless `keep_state`, so a
    second server on the same `workdir` can show what survives a restart.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    state_dir = workdir / "state"
    ready = workdir / "ready.json"
    log_path = workdir / "sprites-local.log"
    ready.unlink(missing_ok=True)
    token = token or f"local/{secrets.token_hex(4)}/{secrets.token_urlsafe(24)}"
    command = [
        *_lattice_command(),
        "sprites-local",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--state-dir",
        str(state_dir),
        "--warm-after",
        str(warm_after),
        "--cold-after",
        str(cold_after),
        "--scrollback",
        str(scrollback),
        "--ready-file",
        str(ready),
        *extra,
    ]
    env = {**os.environ, "SPRITES_LOCAL_TOKEN": token}
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + start_timeout
        while not ready.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"sprites-local did not start (exit {process.poll()}):\n"
                    + log_path.read_text(errors="replace")[-4000:]
                )
            time.sleep(0.05)
        info = json.loads(ready.read_text())
        yield LocalSprites(
            base_url=str(info["url"]),
            token=token,
            state_dir=state_dir,
            log_path=log_path,
            process=process,
        )
    finally:
        _stop(process)
        if not keep_state:
            shutil.rmtree(state_dir, ignore_errors=True)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


__all__ = ["LocalSprites", "sprites_server"]
