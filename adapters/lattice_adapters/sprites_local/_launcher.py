"""Start a sprite's processes in a private mount namespace.

Each process is forked, then (in the child, before exec) moves into a new mount namespace
with private propagation, bind-mounts the sprite's directory at `/workspace` and its
per-sprite directory at `/.sprite`, asks to be killed if the server dies, and changes into
its working directory. The host's `/workspace` and `/.sprite` stay empty mount points:
nothing is ever written there from the host side.

This needs the right to create mount namespaces (root, or CAP_SYS_ADMIN). Where that is
missing the launcher refuses to start, with the reason, instead of running commands in the
host's `/workspace`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import os
import signal
import subprocess
import tempfile
import termios
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

WORKSPACE = "/workspace"
DOT_SPRITE = "/.sprite"

_CLONE_NEWNS = 0x00020000
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_PR_SET_PDEATHSIG = 1


class LauncherError(RuntimeError):
    """The launcher cannot start sprite processes here (and says why)."""


class NamespaceLauncher:
    """Spawns processes that see a sprite's directories at /workspace and /.sprite."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        self._unshare = libc.unshare
        self._unshare.argtypes = [ctypes.c_int]
        self._mount = libc.mount
        self._mount.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_ulong,
            ctypes.c_void_p,
        ]
        self._prctl = libc.prctl
        self._prctl.argtypes = [ctypes.c_int, ctypes.c_ulong]

    def prepare_host(self) -> None:
        """Create the empty mount points and check that a namespace can be made here."""
        for point in (WORKSPACE, DOT_SPRITE):
            try:
                os.makedirs(point, mode=0o755, exist_ok=True)
            except OSError as exc:
                raise LauncherError(
                    f"sprites-local needs the mount point {point} on this host and cannot "
                    f"create it ({exc.strerror}); create it as root (an empty directory)"
                ) from None
        with tempfile.TemporaryDirectory(prefix="sprites-local-probe-") as probe:
            proc = self.spawn(
                ["true"],
                env={"PATH": "/usr/bin:/bin"},
                cwd=WORKSPACE,
                root=Path(probe),
                dot=Path(probe),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if proc.wait(timeout=30) != 0:
                raise LauncherError("sprites-local: the namespace probe command failed")

    def spawn(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str,
        root: Path,
        dot: Path,
        stdin: int | IO[Any] | None,
        stdout: int | IO[Any] | None,
        stderr: int | IO[Any] | None,
        tty: bool = False,
        executable: str | None = None,
    ) -> subprocess.Popen[bytes]:
        """Fork and exec `argv` inside a fresh mount namespace for the sprite.

        Raises `LauncherError` when the namespace or the bind mounts cannot be set up, and
        the usual `OSError` (FileNotFoundError, PermissionError) when exec fails.
        """
        err_read, err_write = os.pipe2(os.O_CLOEXEC)
        child_setup = self._child_setup(root, dot, cwd, tty, err_write)
        try:
            return subprocess.Popen(
                list(argv),
                executable=executable,
                env=dict(env),
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
                preexec_fn=child_setup,
                close_fds=True,
            )
        except subprocess.SubprocessError:
            os.close(err_write)
            err_write = -1
            reason = os.read(err_read, 4096).decode(errors="replace") or "unknown failure"
            raise LauncherError(_explain(reason)) from None
        finally:
            if err_write >= 0:
                os.close(err_write)
            os.close(err_read)

    def _child_setup(self, root: Path, dot: Path, cwd: str, tty: bool, err_fd: int) -> Any:
        # Everything the child needs is computed here: the child only makes syscalls.
        unshare, mount, prctl = self._unshare, self._mount, self._prctl
        root_b, dot_b = os.fsencode(root), os.fsencode(dot)
        workspace_b, dot_sprite_b = WORKSPACE.encode(), DOT_SPRITE.encode()

        def fail(step: str, code: int) -> None:
            os.write(err_fd, f"{step}: {os.strerror(code)} (errno {code})".encode())
            raise OSError(code, step)

        def setup() -> None:
            if unshare(_CLONE_NEWNS) != 0:
                fail("unshare(CLONE_NEWNS)", ctypes.get_errno())
            if mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
                fail("make / a private mount", ctypes.get_errno())
            if mount(root_b, workspace_b, None, _MS_BIND | _MS_REC, None) != 0:
                fail(f"bind-mount the sprite directory at {WORKSPACE}", ctypes.get_errno())
            if mount(dot_b, dot_sprite_b, None, _MS_BIND | _MS_REC, None) != 0:
                fail(f"bind-mount the per-sprite directory at {DOT_SPRITE}", ctypes.get_errno())
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if tty:
                try:
                    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
                except OSError as exc:
                    fail("acquire the controlling terminal", exc.errno or errno.EIO)
            try:
                os.chdir(cwd)
            except OSError as exc:
                fail(f"chdir {cwd}", exc.errno or errno.ENOENT)

        return setup


def _explain(reason: str) -> str:
    if "unshare" in reason or "mount" in reason.lower():
        return (
            f"sprites-local cannot isolate sprite processes: {reason}. Creating a private "
            "mount namespace and bind mounts needs root (or CAP_SYS_ADMIN); refusing to run "
            "sprite commands in the host's /workspace"
        )
    return f"sprites-local could not start the process: {reason}"


def working_dir_error(reason: str) -> bool:
    """Whether a launcher error was caused by a missing or unusable working directory."""
    return reason.startswith("sprites-local could not start the process: chdir")


__all__ = ["DOT_SPRITE", "WORKSPACE", "LauncherError", "NamespaceLauncher", "working_dir_error"]
