"""File operations that cannot leave a sprite's root, whatever the sprite does meanwhile.

The file API runs as root on the host while the sprite's own processes change the same
tree: a path checked component by component and then opened again can meet a symlink the
sprite swapped in between. Here every open starts from a descriptor of the root and goes
through `openat2` with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: a symlink anywhere on the way,
or a `..` that would climb out, fails the call (ELOOP, EXDEV) instead of being followed. The
operation itself then works on descriptors (`dir_fd`), never on a host path again.

Paths given here are already resolved the way the sprite sees them (`_paths.host_path`:
symlinks inside /workspace followed, relative to the root): if one of them is a symlink by
the time it is opened, the sprite changed it and the request is refused.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

_SYS_OPENAT2 = 437  # the same number on x86_64 and aarch64
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_RESOLVE = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
NAME_MAX = 255


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long


def openat2(dirfd: int, path: str, flags: int, mode: int = 0) -> int:
    """openat2(2) confined beneath `dirfd`, following no symlink; raises OSError."""
    how = _OpenHow(flags | os.O_CLOEXEC, mode, _RESOLVE)
    fd = _syscall(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_int(dirfd),
        ctypes.c_char_p(os.fsencode(path or ".")),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return int(fd)


def available() -> bool:
    """Whether this kernel has openat2 (Linux 5.6 and later)."""
    try:
        os.close(openat2(os.open("/", os.O_RDONLY | os.O_DIRECTORY), ".", os.O_RDONLY))
    except OSError as exc:
        return exc.errno != errno.ENOSYS
    return True


class Confined:
    """A sprite's root directory, opened once; every path below it is opened through it."""

    def __init__(self, root: Path, owner: tuple[int, int] | None = None) -> None:
        self.root = root
        self.owner = owner
        """(uid, gid) given to directories made on the way; None leaves them root's."""

    @contextlib.contextmanager
    def _root_fd(self) -> Iterator[int]:
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            yield fd
        finally:
            os.close(fd)

    def relative(self, host: Path) -> str:
        """`host` (under the root) as a path relative to it ('' for the root itself)."""
        rel = host.relative_to(self.root).as_posix()
        return "" if rel == "." else rel

    @contextlib.contextmanager
    def open(self, host: Path, flags: int, mode: int = 0) -> Iterator[int]:
        """A descriptor of `host`, opened beneath the root without following symlinks."""
        with self._root_fd() as root:
            fd = openat2(root, self.relative(host), flags, mode)
        try:
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def parent(self, host: Path, *, create: bool = False) -> Iterator[tuple[int, str]]:
        """(descriptor of the directory holding `host`, its last name). With `create`,
        missing directories are made on the way (each one confined too)."""
        rel = self.relative(host)
        if not rel:
            raise OSError(errno.EPERM, "the sprite root has no parent", str(host))
        parts = rel.split("/")
        with self._root_fd() as root:
            current = os.dup(root)
        try:
            for part in parts[:-1]:
                try:
                    nxt = openat2(current, part, os.O_RDONLY | os.O_DIRECTORY)
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=current)
                    nxt = openat2(current, part, os.O_RDONLY | os.O_DIRECTORY)
                    if self.owner is not None:
                        os.fchown(nxt, *self.owner)
                os.close(current)
                current = nxt
            yield current, parts[-1]
        finally:
            os.close(current)


def open_log(root: Path, path: Path) -> int:
    """A log file under `root` opened for appending (directories made on the way): the sprite
    can write below `root`, so a symlink it planted there is refused, not followed."""
    with Confined(root).parent(path, create=True) as (directory, name):
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.open(name, flags, 0o644, dir_fd=directory)


def read_confined(root: Path, path: Path, limit: int = 16 * 1024 * 1024) -> bytes:
    """The last `limit` bytes of a regular file under `root`; b"" when it is missing (a
    symlink or anything but a regular file is not read)."""
    try:
        with Confined(root).open(path, os.O_RDONLY | os.O_NONBLOCK) as fd:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return b""
            return os.pread(fd, limit, max(0, info.st_size - limit))
    except (FileNotFoundError, NotADirectoryError):
        return b""
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EXDEV):
            return b""
        raise


def read_confined_at(root: Path, path: Path, offset: int, limit: int = 1024 * 1024) -> bytes:
    """At most `limit` bytes of a regular file under `root` from `offset` (a log being
    followed); b"" when it is missing, shorter, or not a regular file."""
    try:
        with Confined(root).open(path, os.O_RDONLY | os.O_NONBLOCK) as fd:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return b""
            return os.pread(fd, limit, offset)
    except (FileNotFoundError, NotADirectoryError):
        return b""
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EXDEV):
            return b""
        raise


def lstat_at(dirfd: int, name: str) -> os.stat_result:
    return os.stat(name, dir_fd=dirfd, follow_symlinks=False)


def is_dir_at(dirfd: int, name: str) -> bool:
    try:
        return stat.S_ISDIR(lstat_at(dirfd, name).st_mode)
    except FileNotFoundError:
        return False


def copy_file_at(
    src_dir: int, src: str, dst_dir: int, dst: str, owner: tuple[int, int] | None = None
) -> int:
    """Copy a regular file between directory descriptors; the destination name is replaced
    (a symlink there is replaced, never followed). Returns the bytes copied."""
    fd_in = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=src_dir)
    try:
        info = os.fstat(fd_in)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", src)
        temp = f".sl-{os.urandom(8).hex()}.tmp"
        fd_out = os.open(
            temp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            stat.S_IMODE(info.st_mode) & 0o1777,
            dir_fd=dst_dir,
        )
        total = 0
        try:
            if owner is not None:
                os.fchown(fd_out, *owner)
            while chunk := os.read(fd_in, 1 << 20):
                os.write(fd_out, chunk)
                total += len(chunk)
            os.utime(fd_out, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(fd_out)
        try:
            os.replace(temp, dst, src_dir_fd=dst_dir, dst_dir_fd=dst_dir)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dst_dir)
            raise
        return total
    finally:
        os.close(fd_in)


def copy_tree_at(
    src_dir: int, src: str, dst_dir: int, dst: str, owner: tuple[int, int] | None = None
) -> int:
    """Copy a directory tree between descriptors: symlinks copied as links, an existing
    destination directory reused (a symlink there is refused). Returns the bytes copied."""
    total = 0
    fd_src = os.open(
        src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=src_dir
    )
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(dst, 0o755, dir_fd=dst_dir)
        fd_dst = os.open(
            dst, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dst_dir
        )
        try:
            if owner is not None:
                os.fchown(fd_dst, *owner)
            with os.scandir(fd_src) as entries:
                for entry in entries:
                    info = entry.stat(follow_symlinks=False)
                    if stat.S_ISLNK(info.st_mode):
                        target = os.readlink(entry.name, dir_fd=fd_src)
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(entry.name, dir_fd=fd_dst)
                        os.symlink(target, entry.name, dir_fd=fd_dst)
                        if owner is not None:
                            os.chown(entry.name, *owner, dir_fd=fd_dst, follow_symlinks=False)
                    elif stat.S_ISDIR(info.st_mode):
                        total += copy_tree_at(fd_src, entry.name, fd_dst, entry.name, owner)
                    elif stat.S_ISREG(info.st_mode):
                        total += copy_file_at(fd_src, entry.name, fd_dst, entry.name, owner)
        finally:
            os.close(fd_dst)
    finally:
        os.close(fd_src)
    return total


def walk_at(dirfd: int) -> Iterator[tuple[str, os.stat_result]]:
    """(relative path, lstat) of everything below a directory descriptor, sorted."""
    found: list[tuple[str, os.stat_result]] = []

    def visit(fd: int, prefix: str) -> None:
        with os.scandir(fd) as entries:
            for entry in entries:
                info = entry.stat(follow_symlinks=False)
                path = f"{prefix}{entry.name}"
                found.append((path, info))
                if stat.S_ISDIR(info.st_mode):
                    child = os.open(
                        entry.name,
                        os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                        dir_fd=fd,
                    )
                    try:
                        visit(child, path + "/")
                    finally:
                        os.close(child)

    visit(dirfd, "")
    yield from sorted(found, key=lambda item: item[0])


__all__ = [
    "NAME_MAX",
    "Confined",
    "available",
    "copy_file_at",
    "copy_tree_at",
    "is_dir_at",
    "lstat_at",
    "open_log",
    "openat2",
    "read_confined",
    "read_confined_at",
    "walk_at",
]
