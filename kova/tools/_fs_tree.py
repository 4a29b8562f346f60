"""The directory tools, ``list_dir`` and ``search``, and the walk they share.

The walk never follows a symlink: each directory is opened relative to its parent's
descriptor with ``O_NOFOLLOW``, so nothing swapped in while it runs leads outside the
workspace. ``search`` applies the ``.gitignore`` files it meets on the way. The tools'
shared base and argument checks are in ``_fs``.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import stat
from typing import TYPE_CHECKING, ClassVar

import trio

from .._models import ToolAnnotations, ToolResult
from .._record import evolve
from ._fs import (
    _READ_ONLY,
    _FileTool,
    _integer,
    _is_binary,
    _parameters,
    _read_bytes,
    _string,
)
from ._workspace import PathRefused

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    import pathspec

    from .._models import JSONObject
    from ._workspace import Workspace

__all__ = ["ListDir", "Search"]

_MAX_LINE_CHARS = 300  # a search hit's line is cut here: minified files have megabyte lines


class ListDir(_FileTool, init=False):
    """``list_dir``: a directory's entries, to a depth."""

    name: ClassVar[str] = "list_dir"
    description: ClassVar[str] = (
        "List a directory. Directories end with '/', symlinks with '@'. depth 1 lists the "
        "directory itself; larger depths include subdirectories (indented). Long listings "
        "are cut off with a note."
    )
    parameters: ClassVar[JSONObject] = _parameters(
        {
            "path": {"type": "string", "description": "Directory, relative to the workspace."},
            "depth": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
        }
    )
    annotations: ClassVar[ToolAnnotations] = evolve(_READ_ONLY, title="List directory")

    async def _execute(self, arguments: JSONObject) -> ToolResult:
        raw = _string(arguments, "path", ".")
        depth = _integer(arguments, "depth") or 1
        workspace, real = await self._resolve(raw)
        lines, truncated = await trio.to_thread.run_sync(
            functools.partial(self._list, workspace, raw, real, depth), abandon_on_cancel=True
        )
        text = "\n".join(lines) if lines else "(empty directory)"
        if truncated:
            text += f"\n[truncated after {self.policy.max_entries} entries]"
        return ToolResult(content=text)

    def _list(
        self, workspace: Workspace, raw: str, real: Path, depth: int
    ) -> tuple[list[str], bool]:
        lines: list[str] = []
        limit = self.policy.max_entries
        for level, relative, entry in _walk(workspace, raw, real, depth=depth):
            if len(lines) >= limit:
                return lines, True
            suffix = ""
            if entry.is_symlink():
                suffix = "@"
            elif entry.is_dir(follow_symlinks=False):
                suffix = "/"
            lines.append(f"{'  ' * level}{relative.rsplit('/', 1)[-1]}{suffix}")
        return lines, False


def _walk(
    workspace: Workspace,
    raw: str,
    real: Path,
    *,
    depth: int,
    skip: Callable[[str, bool], bool] | None = None,
) -> Iterator[tuple[int, str, os.DirEntry[str]]]:
    """Entries under the checked directory ``real``, sorted, depth first, without following
    symlinks: each directory is opened relative to its parent's descriptor with
    ``O_NOFOLLOW``, so nothing swapped in during the walk leads outside. Protected paths and
    what ``skip(relative_path, is_dir)`` rejects are left out.

    Yields:
        ``(level, relative path, entry)``; ``level`` 0 is the directory itself.
    """
    top = workspace.open_directory(raw, real)
    try:
        yield from _walk_fd(workspace, raw, top, real, "", 0, depth, skip)
    finally:
        os.close(top)


def _walk_fd(
    workspace: Workspace,
    raw: str,
    fd: int,
    real: Path,
    prefix: str,
    level: int,
    depth: int,
    skip: Callable[[str, bool], bool] | None,
) -> Iterator[tuple[int, str, os.DirEntry[str]]]:
    with os.scandir(fd) as listing:
        entries = sorted(listing, key=lambda entry: entry.name)
    for entry in entries:
        relative = f"{prefix}{entry.name}"
        is_dir = entry.is_dir(follow_symlinks=False)
        try:
            workspace.check_protected(relative, real / entry.name)
        except PathRefused:
            continue
        if skip is not None and skip(relative, is_dir):
            continue
        yield level, relative, entry
        if is_dir and level + 1 < depth:
            try:
                child = os.open(entry.name, _DIRECTORY_FLAGS, dir_fd=fd)
            except OSError:  # unreadable, or swapped for a symlink since the listing
                continue
            try:
                yield from _walk_fd(
                    workspace,
                    raw,
                    child,
                    real / entry.name,
                    f"{relative}/",
                    level + 1,
                    depth,
                    skip,
                )
            finally:
                os.close(child)


_DIRECTORY_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_DIRECTORY", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


class _GitIgnore:
    """``.gitignore`` rules met during a walk, each applied below its own directory, with
    pathspec's ``GitIgnoreSpec`` (git's own matching rules, including its edge cases)."""

    def __init__(self) -> None:
        self._specs: list[tuple[str, pathspec.GitIgnoreSpec]] = []

    def add(self, directory: str, text: str) -> None:
        import pathspec  # only when a search meets a .gitignore

        spec = pathspec.GitIgnoreSpec.from_lines(text.splitlines())
        self._specs.append((directory, spec))

    def ignored(self, relative: str, is_dir: bool) -> bool:
        if relative == ".git" or relative.endswith("/.git"):
            return True
        for directory, spec in self._specs:
            if directory and not relative.startswith(directory):
                continue
            inner = relative[len(directory) :]
            if spec.match_file(f"{inner}/" if is_dir else inner):
                return True
        return False


def _read_gitignore(fd: int) -> str | None:
    # Never blocking (a FIFO named .gitignore opens at once), and only a regular file is read.
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        handle = os.open(".gitignore", flags, dir_fd=fd)
    except OSError:
        return None
    with os.fdopen(handle, "rb") as file:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            return None
        os.set_blocking(handle, True)
        return file.read(1_000_000).decode("utf-8", errors="replace")


class Search(_FileTool, init=False):
    """``search``: a regular expression over the workspace's text files."""

    name: ClassVar[str] = "search"
    description: ClassVar[str] = (
        "Search text files for a regular expression (Python syntax), line by line. Files "
        "ignored by .gitignore, binary files and .git are skipped. Returns 'path:line: text' "
        "per match; long results are cut off with a note."
    )
    parameters: ClassVar[JSONObject] = _parameters(
        {
            "pattern": {"type": "string", "description": "Regular expression."},
            "path": {"type": "string", "description": "Directory or file to search in."},
            "glob": {"type": "string", "description": "Only files matching this glob."},
            "ignore_case": {"type": "boolean", "default": False},
        },
        "pattern",
    )
    annotations: ClassVar[ToolAnnotations] = evolve(_READ_ONLY, title="Search files")

    async def _execute(self, arguments: JSONObject) -> ToolResult:
        pattern = _string(arguments, "pattern")
        raw = _string(arguments, "path", ".")
        glob = arguments.get("glob")
        ignore_case = arguments.get("ignore_case") is True
        try:
            regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            return ToolResult.error(f"invalid regular expression {pattern!r}: {exc}")
        workspace, real = await self._resolve(raw)
        # abandon_on_cancel: a search changes nothing, and a pathological regex must not hold
        # up the turn's cancellation (the thread finishes its file on its own).
        hits, truncated = await trio.to_thread.run_sync(
            functools.partial(
                self._search, workspace, raw, real, regex, glob if isinstance(glob, str) else None
            ),
            abandon_on_cancel=True,
        )
        if not hits:
            return ToolResult(content="no matches")
        text = "\n".join(hits)
        if truncated:
            text += "\n[truncated: more matches; narrow the pattern, path or glob]"
        return ToolResult(content=text)

    def _search(
        self, workspace: Workspace, raw: str, real: Path, regex: re.Pattern[str], glob: str | None
    ) -> tuple[list[str], bool]:
        hits: list[str] = []
        budget = self.policy.max_output_chars
        limit = self.policy.max_entries

        def add(hit: str) -> bool:
            nonlocal budget
            if len(hits) >= limit or len(hit) > budget:
                return False
            hits.append(hit)
            budget -= len(hit) + 1
            return True

        if not real.is_dir():  # one file
            for hit in self._search_file(workspace, raw, real, workspace.display(real), regex):
                if not add(hit):
                    return hits, True
            return hits, False

        ignore = _GitIgnore()
        top_ignore = _read_gitignore_at(workspace, raw, real)
        if top_ignore is not None:
            ignore.add("", top_ignore)
        prefix = workspace.display(real)
        prefix = "" if prefix == "." else f"{prefix}/"
        for _level, relative, entry in _walk(workspace, raw, real, depth=64, skip=ignore.ignored):
            if entry.is_dir(follow_symlinks=False):
                nested = _read_gitignore_at(workspace, raw, real / relative)
                if nested is not None:
                    ignore.add(f"{relative}/", nested)
                continue
            if not entry.is_file(follow_symlinks=False):
                continue
            if glob is not None and not fnmatch.fnmatch(
                relative if "/" in glob else entry.name, glob
            ):
                continue
            for hit in self._search_file(
                workspace, relative, real / relative, f"{prefix}{relative}", regex
            ):
                if not add(hit):
                    return hits, True
        return hits, False

    def _search_file(
        self, workspace: Workspace, raw: str, real: Path, shown: str, regex: re.Pattern[str]
    ) -> Iterator[str]:
        try:
            data, _size = _read_bytes(workspace, raw, real, self.policy.max_read_bytes)
        except (OSError, PathRefused):
            return
        if _is_binary(data):
            return
        text = data.decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if regex.search(line):
                if len(line) > _MAX_LINE_CHARS:
                    line = line[:_MAX_LINE_CHARS] + "..."
                yield f"{shown}:{number}: {line}"


def _read_gitignore_at(workspace: Workspace, raw: str, directory: Path) -> str | None:
    try:
        fd = workspace.open_directory(raw, directory)
    except (OSError, PathRefused):
        return None
    try:
        return _read_gitignore(fd)
    finally:
        os.close(fd)
