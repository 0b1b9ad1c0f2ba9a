"""Each sprite a runc container: a Debian root of its own, its own PID, IPC, UTS, network
and mount namespaces, and a writable layer that belongs to the sprite.

runc creates the container once per waking (`runc run -d`): its init (`tini`, which reaps
what sessions leave behind) holds the namespaces, on an overlay of the shared read-only
root filesystem (`hack/build-sprite-rootfs.sh`) and the sprite's own writable layer
(`fs/upper`). Session and service processes then *enter* the container, as `runc exec`
does (setns into its namespaces before exec), but forked by the server itself: the server
keeps their pipes, terminal, exit status and process group as for any child, and an exec
costs a fork and five setns calls instead of a runc process.

On disk, beside the sprite's other directories (`<state>/sprites/<name>/fs/`):

    config.json   the OCI runtime spec runc reads
    upper/        the sprite's writable layer (everything outside /workspace it changes)
    work/         overlayfs scratch
    merged/       the overlay, mounted while the container runs

Network: the container joins the sprite's own network namespace (`_netns`: loopback only,
made by the server, nothing routed out of it); the egress proxy listening inside it is the
sprite's only way out (`_egress`).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import json
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from lattice_devtools.sprites_local._netns import CLONE_NEWNET, namespace_path

_log = logging.getLogger("lattice_devtools.sprites_local")

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
_MNT_DETACH = 2
NAMESPACES = (
    ("ipc", CLONE_NEWIPC),
    ("uts", CLONE_NEWUTS),
    ("net", CLONE_NEWNET),
    ("mnt", CLONE_NEWNS),
)
"""Entered by the child, in this order (the mount namespace last: it changes the root)."""

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_void_p,
]


class ContainerError(RuntimeError):
    """A sprite's container cannot be started (and why)."""


def setns(fd: int, flag: int) -> None:
    if _libc.setns(fd, flag) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"setns: {os.strerror(code)}")


def find_rootfs() -> Path | None:
    """The root filesystem `hack/build-sprite-rootfs.sh` built last (its `current` file),
    or `LATTICE_SPRITE_ROOTFS`."""
    explicit = os.environ.get("LATTICE_SPRITE_ROOTFS")
    if explicit:
        return Path(explicit)
    cache = Path(os.environ.get("LATTICE_CACHE") or Path.home() / ".cache" / "lattice-operator")
    pointer = cache / "sprite-rootfs" / "current"
    try:
        return Path(pointer.read_text().strip())
    except OSError:
        return None


@dataclass(frozen=True)
class ContainerSettings:
    """What every sprite container of one server shares."""

    runc: str
    """The runc binary."""
    rootfs: Path
    """The read-only lower layer: a root filesystem with /bin/sh and /usr/bin/tini."""
    state: Path
    """runc's own state directory (`--root`)."""
    key: str
    """Names this server's containers apart from another server's on the same host."""

    def check(self) -> None:
        """Say what is missing before any sprite needs it."""
        runc = shutil.which(self.runc)
        if runc is None:
            raise ContainerError(
                f"runc ({self.runc}) is not installed: sprites run in runc containers "
                "(hack/apt-pinned.sh installs the pinned one)"
            )
        for needed in ("bin/sh", "usr/bin/tini"):
            if not (self.rootfs / needed).exists():
                raise ContainerError(
                    f"{self.rootfs} is not a sprite root filesystem (no /{needed}): build it "
                    "with `make sprite-rootfs` (hack/build-sprite-rootfs.sh) or pass --rootfs"
                )
        self.state.mkdir(parents=True, exist_ok=True)
        self.state.chmod(0o700)

    def container_id(self, sprite: str) -> str:
        return f"sprite-{self.key}-{sprite}"


@dataclass(frozen=True)
class Mounts:
    """A sprite's host directories as the container sees them."""

    workspace: Path
    dot: Path
    shm: Path
    shared: tuple[str, ...]
    """Host directories shown read-only at the same path (the server's Python)."""


class SpriteContainer:
    """One sprite's container: started on waking, stopped when the sprite goes cold."""

    def __init__(
        self,
        settings: ContainerSettings,
        sprite: str,
        directory: Path,
        mounts: Mounts,
        *,
        uid: int,
        hostname: str,
        cgroup_procs: tuple[str, ...],
    ) -> None:
        self.settings = settings
        self.id = settings.container_id(sprite)
        self.dir = directory
        self.upper = directory / "upper"
        self.work = directory / "work"
        self.merged = directory / "merged"
        self.mounts = mounts
        self.uid = uid
        self.hostname = hostname
        self.cgroup_procs = cgroup_procs
        self.init_pid: int | None = None
        self.ns_fds: dict[str, int] = {}
        for sub in (self.upper, self.work, self.merged):
            sub.mkdir(parents=True, exist_ok=True)

    # -- state ----------------------------------------------------------------------------
    def running(self) -> bool:
        pid = self.init_pid
        if pid is None:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        # A recycled pid is not our init: its mount namespace would differ.
        return self._same_init(pid)

    def _in_namespace(self, netns: int | None) -> bool:
        fd = self.ns_fds.get("net")
        if netns is None or fd is None:
            return netns is None
        return os.fstat(fd).st_ino == os.fstat(netns).st_ino

    def _same_init(self, pid: int) -> bool:
        fd = self.ns_fds.get("pid")
        if fd is None:
            return False
        try:
            return os.stat(f"/proc/{pid}/ns/pid").st_ino == os.fstat(fd).st_ino
        except OSError:
            return False

    # -- lifecycle ------------------------------------------------------------------------
    def ensure(self, netns: int | None = None) -> None:
        """Start the container unless it runs in the network namespace `netns` (a
        descriptor; None: a namespace of its own, loopback only). Blocking: a few tens of
        milliseconds."""
        if self.running() and self._in_namespace(netns):
            return
        self.stop()
        self._mount_overlay()
        try:
            self._write_spec(netns)
            self._prepare_root()
            self._run()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Kill the container (its init takes every process in it along) and unmount."""
        runc = [self.settings.runc, "--root", str(self.settings.state)]
        if self.init_pid is not None and self.running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.init_pid, 9)
        subprocess.run(
            [*runc, "delete", "--force", self.id],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        for fd in self.ns_fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.ns_fds = {}
        self.init_pid = None
        self.unmount()

    def unmount(self) -> None:
        while os.path.ismount(self.merged):
            if _libc.umount2(os.fsencode(self.merged), _MNT_DETACH) != 0:
                code = ctypes.get_errno()
                _log.warning("cannot unmount %s: %s", self.merged, os.strerror(code))
                return

    def _mount_overlay(self) -> None:
        options = (
            f"lowerdir={self.settings.rootfs},upperdir={self.upper},workdir={self.work}"
        ).encode()
        if _libc.mount(b"overlay", os.fsencode(self.merged), b"overlay", 0, options) != 0:
            code = ctypes.get_errno()
            raise ContainerError(
                f"cannot mount the sprite's root filesystem (overlay on {self.merged}): "
                f"{os.strerror(code)}"
            )

    def _prepare_root(self) -> None:
        """A name for the sprite's user, so `id`, `whoami` and git know who it is."""
        passwd = self.merged / "etc" / "passwd"
        if passwd.is_symlink() or not passwd.is_file():
            return
        text = passwd.read_text()
        if f":{self.uid}:" not in text:
            entry = f"sprite:x:{self.uid}:{self.uid}:sprite:/.sprite/home:/bin/bash\n"
            passwd.write_text(text + ("" if text.endswith("\n") else "\n") + entry)
        group = self.merged / "etc" / "group"
        if group.is_file() and not group.is_symlink():
            text = group.read_text()
            if f":{self.uid}:" not in text:
                group.write_text(
                    text + ("" if text.endswith("\n") else "\n") + f"sprite:x:{self.uid}:\n"
                )

    def _write_spec(self, netns: int | None) -> None:
        (self.dir / "config.json").write_text(json.dumps(self.spec(netns), indent=1))

    def spec(self, netns: int | None = None) -> dict[str, object]:
        """The OCI runtime spec: runc's defaults, our mounts, the sprite's network
        namespace (joined by path; runc makes a loopback-only one when None)."""
        m = self.mounts
        bind = ["rbind", "nosuid", "nodev"]
        mounts: list[dict[str, object]] = [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {
                "destination": "/dev",
                "type": "tmpfs",
                "source": "tmpfs",
                "options": ["nosuid", "strictatime", "mode=755", "size=65536k"],
            },
            {
                "destination": "/dev/pts",
                "type": "devpts",
                "source": "devpts",
                "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"],
            },
            {
                "destination": "/dev/mqueue",
                "type": "mqueue",
                "source": "mqueue",
                "options": ["nosuid", "noexec", "nodev"],
            },
            {
                "destination": "/sys",
                "type": "sysfs",
                "source": "sysfs",
                "options": ["nosuid", "noexec", "nodev", "ro"],
            },
            {
                "destination": "/workspace",
                "type": "bind",
                "source": str(m.workspace),
                "options": [*bind, "rw"],
            },
            {
                "destination": "/.sprite",
                "type": "bind",
                "source": str(m.dot),
                "options": [*bind, "rw"],
            },
            {
                "destination": "/dev/shm",
                "type": "bind",
                "source": str(m.shm),
                "options": [*bind, "rw"],
            },
        ]
        if any(s == "/root" or s.startswith("/root/") for s in m.shared):
            # The shared Python below /root: an empty /root (runc keeps the image's 0755)
            # covers whatever the writable layer put there.
            mounts.append(
                {
                    "destination": "/root",
                    "type": "tmpfs",
                    "source": "tmpfs",
                    "options": ["nosuid", "nodev", "mode=755", "size=64k"],
                }
            )
        for shared in m.shared:
            mounts.append(
                {"destination": shared, "type": "bind", "source": shared, "options": [*bind, "ro"]}
            )
        pids_dir = Path(self.cgroup_procs[0]).parent if self.cgroup_procs else None
        network: dict[str, str] = {"type": "network"}
        if netns is not None:
            network["path"] = namespace_path(netns)
        linux: dict[str, object] = {
            "namespaces": [*({"type": t} for t in ("pid", "ipc", "uts", "mount")), network],
            "maskedPaths": [
                "/proc/acpi",
                "/proc/asound",
                "/proc/kcore",
                "/proc/keys",
                "/proc/latency_stats",
                "/proc/timer_list",
                "/proc/timer_stats",
                "/proc/sched_debug",
                "/sys/firmware",
                "/proc/scsi",
            ],
            "readonlyPaths": [
                "/proc/bus",
                "/proc/fs",
                "/proc/irq",
                "/proc/sys",
                "/proc/sysrq-trigger",
            ],
        }
        if pids_dir is not None and "/pids/" in str(pids_dir):
            # runc puts the init below the sprite's own group (the limits hold for it).
            linux["cgroupsPath"] = str(pids_dir).split("/pids", 1)[1] + "/init"
        return {
            "ociVersion": "1.0.2",
            "process": {
                "terminal": False,
                "user": {"uid": 0, "gid": 0},
                "args": ["/usr/bin/tini", "-s", "--", "/bin/sleep", "infinity"],
                "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"],
                "cwd": "/",
                "capabilities": {k: ["CAP_KILL"] for k in ("bounding", "effective", "permitted")},
                "noNewPrivileges": True,
            },
            "root": {"path": str(self.merged), "readonly": False},
            "hostname": self.hostname,
            "mounts": mounts,
            "linux": linux,
        }

    def _run(self) -> None:
        runc = [self.settings.runc, "--root", str(self.settings.state)]
        pid_file = self.dir / "init.pid"
        pid_file.unlink(missing_ok=True)
        # The detached init inherits runc's stdio: a pipe would never reach EOF, so runc
        # writes to a file, read back only when it fails.
        log = self.dir / "runc.log"
        with open(log, "wb") as out:
            done = subprocess.run(
                [
                    *runc,
                    "run",
                    "--detach",
                    "--bundle",
                    str(self.dir),
                    "--pid-file",
                    str(pid_file),
                    self.id,
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                check=False,
                timeout=60,
            )
        if done.returncode != 0:
            reason = log.read_text(errors="replace").strip().splitlines()
            raise ContainerError(
                f"runc could not start the sprite's container: {reason[-1] if reason else '?'}"
            )
        pid = int(pid_file.read_text().strip())
        fds: dict[str, int] = {}
        try:
            for name in ("pid", "ipc", "uts", "net", "mnt"):
                fds[name] = os.open(f"/proc/{pid}/ns/{name}", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            for fd in fds.values():
                os.close(fd)
            raise ContainerError(f"the container's init went away: {exc.strerror}") from None
        self.ns_fds = fds
        self.init_pid = pid
        self._join_groups(pid)

    def _join_groups(self, pid: int) -> None:
        """The init and its child into the sprite's groups of every controller (runc's
        cgroupsPath can name one path, and the controllers' trees differ here)."""
        members = {pid}
        with contextlib.suppress(OSError, ValueError):
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            members.update(int(c) for c in children)
        for procs in self.cgroup_procs:
            for member in members:
                try:
                    Path(procs).write_text(str(member))
                except OSError as exc:
                    if exc.errno != errno.ESRCH:
                        raise ContainerError(
                            f"cannot put the container's init in {procs}: {exc.strerror}"
                        ) from None


def enter_pid_namespace(fd: int) -> int:
    """Make this thread's next children start in the container's PID namespace; returns a
    descriptor of our own, for `leave_pid_namespace`."""
    own = os.open("/proc/thread-self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    try:
        setns(fd, CLONE_NEWPID)
    except OSError:
        os.close(own)
        raise
    return own


def leave_pid_namespace(own: int) -> None:
    try:
        setns(own, CLONE_NEWPID)
    finally:
        os.close(own)


__all__ = [
    "NAMESPACES",
    "ContainerError",
    "ContainerSettings",
    "Mounts",
    "SpriteContainer",
    "enter_pid_namespace",
    "find_rootfs",
    "leave_pid_namespace",
    "setns",
]
