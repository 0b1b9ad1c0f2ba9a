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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from lattice_devtools.sprites_local._container import (
    NAMESPACES,
    ContainerError,
    SpriteContainer,
    enter_pid_namespace,
    leave_pid_namespace,
)
from lattice_devtools.sprites_local._netns import CLONE_NEWNET, NetnsError
from lattice_devtools.sprites_local._network import SpriteNetwork

WORKSPACE = "/workspace"
DOT_SPRITE = "/.sprite"
SHM = "/dev/shm"

_CLONE_NEWNS = 0x00020000
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_RDONLY = 1
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38


@dataclass(frozen=True)
class Confinement:
    """What keeps a sprite's processes to themselves (None: the launcher's bare mode).

    Each sprite runs under a user of its own (never root: no capabilities, no set-uid
    escalation), sees a /proc that shows only its own processes, has a /tmp of its own,
    finds the host's home directories empty, and is held in its control groups (CPU,
    memory and process limits; killed as a whole).
    """

    uid: int
    gid: int
    tmp: Path
    """The sprite's own directory, mounted at /tmp."""
    cgroup_procs: tuple[str, ...] = ()
    """`cgroup.procs` files the process joins before it runs the command."""
    hide: tuple[str, ...] = field(default=("/root", "/home", "/var/tmp", "/run/user"))
    """Host directories covered with an empty tmpfs."""
    share: tuple[str, ...] = ()
    """Host directories shown again, read-only, inside the hidden ones (the Python that
    runs `lattice`, so that `lattice mcp --sprite` works in a sprite)."""
    container: SpriteContainer | None = None
    """The sprite's runc container: processes enter it instead of a namespace of their own
    (its root, /proc, /tmp and mounts are the container's)."""
    network: SpriteNetwork | None = None
    """The sprite's network namespace (the container joins it; sandboxed processes enter
    it): loopback and the egress proxy only."""

    def with_groups(self, procs: Sequence[str]) -> Confinement:
        return replace(self, cgroup_procs=tuple(procs))


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
        self._setns = libc.setns
        self._setns.argtypes = [ctypes.c_int, ctypes.c_int]
        self._prctl = libc.prctl
        self._prctl.argtypes = [
            ctypes.c_int,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
        ]

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
        confinement: Confinement | None = None,
        shm: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        """Fork and exec `argv` inside a fresh mount namespace for the sprite.

        Raises `LauncherError` when the namespace or the bind mounts cannot be set up, and
        the usual `OSError` (FileNotFoundError, PermissionError) when exec fails.
        """
        container = confinement.container if confinement is not None else None
        network = confinement.network if confinement is not None else None
        try:
            netns = network.ensure() if network is not None else None
            if container is not None:
                container.ensure(netns)
        except (ContainerError, NetnsError) as exc:
            raise LauncherError(str(exc)) from None
        err_read, err_write = os.pipe2(os.O_CLOEXEC)
        child_setup = self._child_setup(
            root, dot, cwd, tty, err_write, confinement, shm, -1 if netns is None else netns
        )
        own_pid_ns = enter_pid_namespace(container.ns_fds["pid"]) if container else -1
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
            if own_pid_ns >= 0:
                leave_pid_namespace(own_pid_ns)
            if err_write >= 0:
                os.close(err_write)
            os.close(err_read)

    def _child_setup(
        self,
        root: Path,
        dot: Path,
        cwd: str,
        tty: bool,
        err_fd: int,
        confinement: Confinement | None,
        shm: Path | None,
        netns: int,
    ) -> Any:
        # Everything the child needs is computed here: the child only makes syscalls.
        unshare, mount, prctl, setns = self._unshare, self._mount, self._prctl, self._setns
        root_b, dot_b = os.fsencode(root), os.fsencode(dot)
        shm_b = os.fsencode(shm) if shm is not None else b""
        workspace_b, dot_sprite_b = WORKSPACE.encode(), DOT_SPRITE.encode()
        c = confinement
        tmp_b = os.fsencode(c.tmp) if c else b""
        hidden = [h.encode() for h in c.hide if os.path.isdir(h)] if c else []
        shared = [s.encode() for s in c.share if os.path.isdir(s)] if c else []
        procs = list(c.cgroup_procs) if c else []
        entries = (
            [(name, c.container.ns_fds[name], flag) for name, flag in NAMESPACES]
            if c is not None and c.container is not None
            else []
        )

        def fail(step: str, code: int) -> None:
            os.write(err_fd, f"{step}: {os.strerror(code)} (errno {code})".encode())
            raise OSError(code, step)

        def enter() -> None:
            # Into the running container, as `runc exec` does: its groups (host paths, so
            # first), its namespaces (the mount namespace last: it changes the root).
            join_groups()
            for name, fd, flag in entries:
                if setns(fd, flag) != 0:
                    fail(f"enter the container's {name} namespace", ctypes.get_errno())
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            become_user()
            if tty:
                try:
                    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
                except OSError as exc:
                    fail("acquire the controlling terminal", exc.errno or errno.EIO)
            try:
                os.chdir(cwd)
            except OSError as exc:
                fail(f"chdir {cwd}", exc.errno or errno.ENOENT)

        def join_groups() -> None:
            for procs_file in procs:
                try:
                    fd = os.open(procs_file, os.O_WRONLY)
                    try:
                        os.write(fd, b"0")
                    finally:
                        os.close(fd)
                except OSError as exc:
                    fail(f"join the control group {procs_file}", exc.errno or errno.EPERM)

        def become_user() -> None:
            assert c is not None
            if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
                fail("set no_new_privs", ctypes.get_errno())
            try:
                os.setgroups([])
                os.setgid(c.gid)
                os.setuid(c.uid)
            except OSError as exc:
                fail(f"become user {c.uid}", exc.errno or errno.EPERM)

        def setup() -> None:
            if entries:
                enter()  # the container's network namespace is among its entries
                return
            if netns >= 0 and setns(netns, CLONE_NEWNET) != 0:
                fail("enter the sprite's network namespace", ctypes.get_errno())
            if unshare(_CLONE_NEWNS) != 0:
                fail("unshare(CLONE_NEWNS)", ctypes.get_errno())
            if mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
                fail("make / a private mount", ctypes.get_errno())
            if mount(root_b, workspace_b, None, _MS_BIND | _MS_REC, None) != 0:
                fail(f"bind-mount the sprite directory at {WORKSPACE}", ctypes.get_errno())
            if mount(dot_b, dot_sprite_b, None, _MS_BIND | _MS_REC, None) != 0:
                fail(f"bind-mount the per-sprite directory at {DOT_SPRITE}", ctypes.get_errno())
            if shm_b and mount(shm_b, SHM.encode(), None, _MS_BIND | _MS_REC, None) != 0:
                fail(f"bind-mount the sprite's {SHM}", ctypes.get_errno())
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if c is not None:
                confine()
            if tty:
                try:
                    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
                except OSError as exc:
                    fail("acquire the controlling terminal", exc.errno or errno.EIO)
            try:
                os.chdir(cwd)
            except OSError as exc:
                fail(f"chdir {cwd}", exc.errno or errno.ENOENT)

        def confine() -> None:
            assert c is not None
            # Shared directories are held open before anything covers them (the sprite's
            # /tmp, a tmpfs): the mount then takes them through /proc/self/fd, from below.
            held: list[tuple[bytes, int]] = []
            for path in shared:
                try:
                    held.append((path, os.open(path, os.O_PATH | os.O_DIRECTORY)))
                except OSError as exc:
                    fail(f"open {path.decode()}", exc.errno or errno.EIO)
            if mount(tmp_b, b"/tmp", None, _MS_BIND | _MS_REC, None) != 0:
                fail("bind-mount the sprite's /tmp", ctypes.get_errno())
            for path in hidden:
                tmpfs_flags = _MS_NOSUID | _MS_NODEV
                if mount(b"tmpfs", path, b"tmpfs", tmpfs_flags, b"mode=755,size=64k") != 0:
                    fail(f"cover {path.decode()}", ctypes.get_errno())
            for path, fd in held:
                try:
                    os.makedirs(path, exist_ok=True)  # in the tmpfs that hides its parent
                except OSError as exc:
                    fail(f"make the mount point {path.decode()}", exc.errno or errno.EIO)
                source = f"/proc/self/fd/{fd}".encode()
                if mount(source, path, None, _MS_BIND | _MS_REC, None) != 0:
                    fail(f"share {path.decode()}", ctypes.get_errno())
                ro = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
                if mount(None, path, None, ro, None) != 0:
                    fail(f"make {path.decode()} read-only", ctypes.get_errno())
                os.close(fd)
            # A proc of its own that shows no process of another user (the server, the
            # control plane, other sprites).
            flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
            if mount(b"proc", b"/proc", b"proc", flags, b"hidepid=invisible") != 0:
                fail("mount a private /proc", ctypes.get_errno())
            join_groups()
            become_user()

        return setup


class ConfinedLauncher:
    """The launcher with one sprite's confinement applied to everything it spawns."""

    def __init__(
        self,
        launcher: NamespaceLauncher,
        confinement: Confinement | None,
        shm: Path | None = None,
    ) -> None:
        self.launcher = launcher
        self.confinement = confinement
        self.shm = shm
        """The sprite's own directory mounted at /dev/shm (never in a checkpoint)."""

    def own(self, fd: int) -> None:
        """Give the sprite's user a pipe or terminal its process uses (as a login gives a
        user its terminal): a program can then reopen its own stdout, say through
        /proc/<pid>/fd/1, as it could on a machine of its own."""
        if self.confinement is not None:
            os.fchown(fd, self.confinement.uid, self.confinement.gid)

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
        return self.launcher.spawn(
            argv,
            env=env,
            cwd=cwd,
            root=root,
            dot=dot,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            tty=tty,
            executable=executable,
            confinement=self.confinement,
            shm=self.shm,
        )


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


__all__ = [
    "DOT_SPRITE",
    "SHM",
    "WORKSPACE",
    "ConfinedLauncher",
    "Confinement",
    "LauncherError",
    "NamespaceLauncher",
    "working_dir_error",
]
