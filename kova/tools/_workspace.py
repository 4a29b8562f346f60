"""Path containment for the file tools: resolve, check, then open what was checked.

Blocking code by design: every function here runs in a worker thread
(``trio.to_thread.run_sync``), called by the tools in ``_fs.py`` and ``_fs_tree.py``.

A path is checked twice. First its real path is computed with ``os.path.realpath``, which
resolves the symlinks of the deepest existing ancestor and leaves the part that does not exist
yet lexical (nothing that does not exist can be a symlink), and tested against the workspace
root and the protected paths. Then the file is opened with ``O_NOFOLLOW`` (so a symlink put in
place of the final component after the check fails to open) and the *opened* descriptor's real
path is read back (``/proc/self/fd`` on Linux, ``F_GETPATH`` on macOS, else an inode
comparison) and must be the path that was checked, which catches a directory higher up swapped
for a symlink in between. Writes go through a descriptor of the checked parent directory
(``openat``/``renameat``), so the rename lands in the directory that was checked; missing
parent directories are made through descriptors too (``mkdirat``, then ``openat`` with
``O_NOFOLLOW``), never by path.

Only regular files are opened: a named pipe, a device or a socket is refused before the open,
and the open never blocks (``O_NONBLOCK``). A file with more than one hard link is refused
unless the policy allows it: a hard link inside the workspace may name a file outside it or a
protected one, and no path check can see that.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .._record import Record

if TYPE_CHECKING:
    from ._policy import ToolPolicy

__all__ = ["PathRefused", "PendingWrite", "Workspace"]

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIRECTORY_FLAGS = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC
_F_GETPATH = 50  # macOS fcntl: the path of an open descriptor


class PathRefused(Exception):
    """A path the policy refuses; its message is what the model reads."""


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _inside(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, for a refusal."""
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


class Workspace(Record):
    """The policy's root and protected paths, resolved now (they may be symlinks themselves)."""

    root: Path | None
    protected: tuple[Path, ...]
    allow_hard_links: bool = False
    """Open files that have other hard links (see :attr:`ToolPolicy.allow_hard_links`)."""

    @classmethod
    def from_policy(cls, policy: ToolPolicy) -> Workspace:
        """Resolve ``policy``'s paths.

        Raises:
            PathRefused: the workspace root does not exist or is not a directory.
        """
        root = None
        if policy.workspace_root is not None:
            root = _real(policy.workspace_root)
            if not root.is_dir():
                raise PathRefused(f"the workspace root {policy.workspace_root} is not a directory")
        protected = tuple(
            dict.fromkeys([*policy.protected_paths, *map(_real, policy.protected_paths)])
        )
        return cls(root=root, protected=protected, allow_hard_links=policy.allow_hard_links)

    @property
    def base(self) -> Path:
        """Where relative paths resolve: the root, or the current directory when unconfined."""
        return self.root if self.root is not None else Path.cwd()

    def display(self, path: Path) -> str:
        """``path`` as the model should see it: relative to the root when confined."""
        if self.root is not None and _inside(path, self.root):
            relative = path.relative_to(self.root).as_posix()
            return relative or "."
        return str(path)

    def resolve(self, raw: str) -> Path:
        """The real path ``raw`` names, after checking it is allowed.

        Raises:
            PathRefused: empty or NUL-containing, outside the workspace (by ``..``, an absolute
                path or a symlink), or protected.
        """
        if not raw or "\0" in raw:
            raise PathRefused("the path must be a non-empty string without NUL characters")
        candidate = Path(raw)
        if not candidate.is_absolute():
            candidate = self.base / candidate
        lexical = Path(os.path.normpath(candidate))
        real = _real(candidate)
        if self.root is not None and not _inside(real, self.root):
            if _inside(lexical, self.root):
                raise PathRefused(
                    f"{raw!r} resolves through a symlink to {real}, outside the workspace"
                )
            raise PathRefused(f"{raw!r} is outside the workspace ({self.root})")
        self.check_protected(raw, lexical, real)
        return real

    def check_protected(self, raw: str, *paths: Path) -> None:
        """Refuse when any of ``paths`` is a protected path or inside one."""
        for path in paths:
            for protected in self.protected:
                if _inside(path, protected):
                    raise PathRefused(f"{raw!r} is a protected path; the file tools may not use it")

    def check(self, raw: str, real: Path) -> None:
        """Check an already real path (one found while walking a directory)."""
        if self.root is not None and not _inside(real, self.root):
            raise PathRefused(f"{raw!r} is outside the workspace ({self.root})")
        self.check_protected(raw, real)

    # -- opening what was checked ---------------------------------------------------------

    def open(self, raw: str, real: Path, flags: int) -> int:
        """Open the checked ``real`` path without following a symlink swapped in since.

        A file (not a directory) must be a regular file: a named pipe, a device or a socket
        is refused before it is opened, and the open itself never blocks (``O_NONBLOCK``: a
        FIFO swapped in after that check opens at once and is refused then), so a read
        never hangs on a FIFO with no writer. A file with other hard links is refused unless
        the policy allows them: its other name may be outside the workspace or protected.

        Raises:
            PathRefused: the path changed after the check; not a regular file; hard-linked.
            OSError: the usual reasons (missing, a directory, permissions...).
        """
        directory = bool(flags & _O_DIRECTORY)
        if not directory:
            self._check_kind(raw, real)
        try:
            fd = os.open(real, flags | _O_NOFOLLOW | _O_CLOEXEC | (0 if directory else _O_NONBLOCK))
        except OSError as exc:
            if os.path.islink(real):
                raise PathRefused(
                    f"{raw!r} became a symlink after it was checked; refusing to follow it"
                ) from exc
            raise
        try:
            self._verify(raw, real, fd)
            if not directory:
                self._check_file(raw, os.fstat(fd))
                os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _check_kind(self, raw: str, real: Path) -> None:
        try:
            info = os.stat(real, follow_symlinks=False)
        except OSError:
            return  # missing: the open says so
        if not stat.S_ISREG(info.st_mode) and not stat.S_ISLNK(info.st_mode):
            raise PathRefused(f"{raw!r} is {_kind(info.st_mode)}; only regular files are used")

    def _check_file(self, raw: str, info: os.stat_result) -> None:
        if not stat.S_ISREG(info.st_mode):
            raise PathRefused(f"{raw!r} is {_kind(info.st_mode)}; only regular files are used")
        if info.st_nlink > 1 and not self.allow_hard_links:
            raise PathRefused(
                f"{raw!r} has {info.st_nlink} hard links; a hard-linked file is refused (its "
                "other names may be outside the workspace or protected). "
                "ToolPolicy(allow_hard_links=True) allows it"
            )

    def _verify(self, raw: str, real: Path, fd: int) -> None:
        opened = _descriptor_path(fd)
        if opened is not None:
            if opened != real:
                raise PathRefused(
                    f"{raw!r} changed after it was checked (now {opened}); refusing it"
                )
            self.check(raw, opened)
            return
        # No way to name the descriptor: compare it with what the checked path names now.
        try:
            now = os.stat(real, follow_symlinks=False)
        except OSError as exc:
            raise PathRefused(f"{raw!r} changed after it was checked; refusing it") from exc
        here = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (here.st_dev, here.st_ino):
            raise PathRefused(f"{raw!r} changed after it was checked; refusing it")

    def open_directory(self, raw: str, real: Path) -> int:
        """A descriptor of the checked directory ``real`` (see :meth:`open`)."""
        return self.open(raw, real, os.O_RDONLY | _O_DIRECTORY)

    def open_parent(self, raw: str, directory: Path) -> int:
        """A descriptor of the checked directory ``directory``, creating the directories
        missing on the way through descriptors only: the deepest existing one is opened and
        checked, then each missing one is made in it (``mkdirat``) and opened from it with
        ``O_NOFOLLOW``, never by path. A symlink swapped in for any of them during the call
        therefore fails to open instead of leading outside the workspace."""
        missing: list[str] = []
        existing = directory
        while not os.path.lexists(existing):
            if existing.parent == existing:
                break
            missing.append(existing.name)
            existing = existing.parent
        fd = self.open_directory(raw, existing)
        try:
            for name in reversed(missing):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
                try:
                    child = os.open(name, _DIRECTORY_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise PathRefused(
                        f"{raw!r}: the directory {name!r} changed while it was created "
                        "(a symlink or a file took its place); refusing it"
                    ) from exc
                os.close(fd)
                fd = child
                existing = existing / name
                self._verify(raw, existing, fd)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def prepare_write(self, raw: str, real: Path, data: bytes) -> PendingWrite:
        """Write ``data`` to a temporary file beside ``real``, flushed to disk; the returned
        :class:`PendingWrite` renames it over the target (``commit``) or removes it
        (``close`` without ``commit``). Readers therefore see the old file or the new one,
        never a partial write. Missing parent directories are created first, through the
        checked directory's descriptor (:meth:`open_parent`)."""
        directory = self.open_parent(raw, real.parent)
        temporary = f".{real.name}.{secrets.token_hex(6)}.kova-tmp"
        created = False
        try:
            mode = 0o666 & ~_umask()
            with contextlib.suppress(FileNotFoundError):
                existing = os.stat(real.name, dir_fd=directory, follow_symlinks=False)
                if stat.S_ISREG(existing.st_mode):
                    mode = stat.S_IMODE(existing.st_mode)
                elif stat.S_ISDIR(existing.st_mode):
                    raise IsADirectoryError(f"{raw!r} is a directory")
                elif not stat.S_ISLNK(existing.st_mode):
                    raise PathRefused(
                        f"{raw!r} is {_kind(existing.st_mode)}; only regular files are written"
                    )
            fd = os.open(
                temporary,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC,
                0o600,
                dir_fd=directory,
            )
            created = True
            try:
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fchmod(fd, mode)
                os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException:
            if created:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=directory)
            os.close(directory)
            raise
        return PendingWrite(directory, temporary, real.name)


class PendingWrite:
    """A temporary file waiting to replace its target (see :meth:`Workspace.prepare_write`)."""

    __slots__ = ("committed", "directory", "target", "temporary")

    def __init__(self, directory: int, temporary: str, target: str) -> None:
        self.directory = directory
        self.temporary = temporary
        self.target = target
        self.committed = False

    def commit(self) -> None:
        """Rename the temporary file over the target, in the checked directory."""
        os.replace(
            self.temporary, self.target, src_dir_fd=self.directory, dst_dir_fd=self.directory
        )
        self.committed = True

    def close(self) -> None:
        """Remove the temporary file unless committed; close the directory descriptor."""
        if self.directory < 0:
            return
        try:
            if not self.committed:
                with contextlib.suppress(OSError):
                    os.unlink(self.temporary, dir_fd=self.directory)
        finally:
            os.close(self.directory)
            self.directory = -1


def _umask() -> int:
    # os.umask can only be read by setting it; set it back at once. A worker thread racing
    # another os.umask call in the same process could see the wrong value: no worse than 0o022.
    current = os.umask(0o022)
    os.umask(current)
    return current


def _descriptor_path(fd: int) -> Path | None:
    """The real path of an open descriptor, where the platform can say."""
    if sys.platform == "darwin":  # pragma: no cover - not the CI platform
        import fcntl

        with contextlib.suppress(OSError):
            name = fcntl.fcntl(fd, _F_GETPATH, b"\0" * 1024)
            return Path(os.fsdecode(name.rstrip(b"\0")))
        return None
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    if target.endswith(" (deleted)") or not target.startswith("/"):
        return None
    return Path(target)
