"""The file tools: ``read_file``, ``list_dir``, ``search``, ``edit_file``, ``write_file`` and
``patch_file``, confined by a :class:`~kova.tools.ToolPolicy`.

Blocking file I/O runs in worker threads. Reads that are cancelled are abandoned (their
result is discarded; nothing changes on disk). Writes are never abandoned: a cancelled write
waits for its thread, and the temporary file is renamed over the target only if the call was
not cancelled by then, so the old file is left intact.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import stat
from typing import TYPE_CHECKING, ClassVar, TypeVar

import attrs
import trio

from .._models import ToolAnnotations, ToolResult
from .._record import evolve
from ._patch import PatchError, apply_patch
from ._workspace import PathRefused, Workspace

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator
    from pathlib import Path

    import pathspec

    from .._models import JSONObject
    from ._policy import ToolPolicy

__all__ = ["EditFile", "ListDir", "PatchFile", "ReadFile", "Search", "WriteFile"]

T = TypeVar("T")

_BINARY_PROBE = 8192
_MAX_LINE_CHARS = 300  # a search hit's line is cut here: minified files have megabyte lines

_READ_ONLY = ToolAnnotations(read_only=True, destructive=False, idempotent=True, open_world=False)


async def _in_thread(function: Callable[[], T], *, abandon_on_cancel: bool) -> T:
    return await trio.to_thread.run_sync(function, abandon_on_cancel=abandon_on_cancel)


async def _guarded(run: Callable[[], Awaitable[ToolResult]]) -> ToolResult:
    """Turn the refusals and OS errors of a file operation into in-band error results."""
    try:
        return await run()
    except PathRefused as exc:
        return ToolResult.error(f"refused: {exc}")
    except FileNotFoundError as exc:
        return ToolResult.error(f"not found: {exc.filename or exc}")
    except IsADirectoryError as exc:
        return ToolResult.error(f"{exc.filename or exc} is a directory")
    except NotADirectoryError as exc:
        return ToolResult.error(f"{exc.filename or exc} is not a directory")
    except PermissionError as exc:
        return ToolResult.error(f"permission denied: {exc.filename or exc}")
    except OSError as exc:
        return ToolResult.error(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))


def _is_binary(data: bytes) -> bool:
    return b"\0" in data[:_BINARY_PROBE]


def _decode(raw: str, data: bytes) -> str:
    if _is_binary(data):
        raise PathRefused(f"{raw!r} is a binary file ({len(data)} bytes); only text is supported")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PathRefused(f"{raw!r} is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _read_bytes(workspace: Workspace, raw: str, real: Path, limit: int) -> tuple[bytes, int]:
    """Up to ``limit`` bytes of the checked file, and its size."""
    fd = workspace.open(raw, real, os.O_RDONLY)
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise PathRefused(f"{raw!r} is not a regular file")
        return file.read(limit), info.st_size


def _string(arguments: JSONObject, key: str, default: str | None = None) -> str:
    value = arguments.get(key, default)
    if not isinstance(value, str):
        raise PathRefused(f"{key!r} must be a string")
    return value


def _integer(arguments: JSONObject, key: str) -> int | None:
    value = arguments.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise PathRefused(f"{key!r} must be an integer")
    return value


@attrs.frozen
class _FileTool:
    """What every file tool shares: the policy, and a workspace resolved per call."""

    policy: ToolPolicy

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[JSONObject]
    annotations: ClassVar[ToolAnnotations]

    async def execute(self, arguments: JSONObject) -> ToolResult:
        """Run the tool; refusals and OS errors come back as error results."""
        return await _guarded(functools.partial(self._execute, arguments))

    async def _execute(self, arguments: JSONObject) -> ToolResult:
        raise NotImplementedError

    async def _resolve(self, raw: str) -> tuple[Workspace, Path]:
        def resolve() -> tuple[Workspace, Path]:
            workspace = Workspace.from_policy(self.policy)
            return workspace, workspace.resolve(raw)

        return await _in_thread(resolve, abandon_on_cancel=True)

    async def _write(self, workspace: Workspace, raw: str, real: Path, text: str) -> None:
        data = text.encode("utf-8")
        if len(data) > self.policy.max_write_bytes:
            raise PathRefused(
                f"the new content is {len(data)} bytes; the limit is {self.policy.max_write_bytes}"
            )
        # Never abandoned: a cancellation that arrives while a thread runs is delivered when
        # it returns. The rename happens only if none has arrived by then; otherwise the
        # temporary file is removed and the target is untouched.
        pending = await _in_thread(
            functools.partial(workspace.prepare_write, raw, real, data), abandon_on_cancel=False
        )
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            await _in_thread(pending.commit, abandon_on_cancel=False)
        finally:
            pending.close()  # two quick syscalls; fine to block for, even when cancelled

    async def _read_text(self, workspace: Workspace, raw: str, real: Path) -> str:
        limit = self.policy.max_write_bytes
        data, size = await _in_thread(
            functools.partial(_read_bytes, workspace, raw, real, limit + 1),
            abandon_on_cancel=True,
        )
        if size > limit or len(data) > limit:
            raise PathRefused(f"{raw!r} is {size} bytes; files over {limit} bytes are not edited")
        return _decode(raw, data)


@attrs.frozen
class ReadFile(_FileTool):
    """``read_file``: a text file, or a range of its lines."""

    name: ClassVar[str] = "read_file"
    description: ClassVar[str] = (
        "Read a UTF-8 text file. Optionally give start_line and end_line (1-based, inclusive) "
        "to read part of it. Large files are cut off with a note saying how to read the rest; "
        "binary files are refused."
    )
    parameters: ClassVar[JSONObject] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace."},
            "start_line": {"type": "integer", "minimum": 1, "description": "First line."},
            "end_line": {"type": "integer", "minimum": 1, "description": "Last line."},
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    annotations: ClassVar[ToolAnnotations] = evolve(_READ_ONLY, title="Read file")

    async def _execute(self, arguments: JSONObject) -> ToolResult:
        raw = _string(arguments, "path")
        start = _integer(arguments, "start_line")
        end = _integer(arguments, "end_line")
        if start is not None and end is not None and end < start:
            return ToolResult.error(f"end_line ({end}) is before start_line ({start})")
        workspace, real = await self._resolve(raw)
        limit = self.policy.max_read_bytes
        ranged = start is not None or end is not None
        # A line range may sit past the cap: read up to the write cap then, and cut the range.
        read_limit = max(limit, self.policy.max_write_bytes) if ranged else limit
        data, size = await _in_thread(
            functools.partial(_read_bytes, workspace, raw, real, read_limit + 1),
            abandon_on_cancel=True,
        )
        truncated = len(data) > read_limit
        if truncated:
            data = data[:read_limit]
            cut = data.rfind(b"\n")
            data = data[: cut + 1] if cut >= 0 else data
        if _is_binary(data):
            return ToolResult.error(
                f"{raw!r} is a binary file ({size} bytes); read_file returns text only"
            )
        text = data.decode("utf-8", errors="replace")
        lines = text.splitlines(keepends=True)
        if ranged:
            first = (start or 1) - 1
            last = end if end is not None else len(lines)
            if first >= len(lines):
                return ToolResult.error(
                    f"start_line {first + 1} is past the end of {raw!r} ({len(lines)} lines)"
                )
            chosen = lines[first:last]
            body = "".join(chosen)
            if len(body.encode()) > limit:
                body = body.encode()[:limit].decode("utf-8", errors="ignore")
                body = body[: body.rfind("\n") + 1] or body
                shown = body.count("\n")
                return ToolResult(
                    content=f"{body}\n[truncated at {limit} bytes: lines {first + 1}-"
                    f"{first + shown} shown; continue with start_line={first + shown + 1}]"
                )
            return ToolResult(content=body)
        if truncated:
            return ToolResult(
                content=f"{text}\n[truncated: {raw!r} is {size} bytes; {len(lines)} lines shown; "
                f"continue with start_line={len(lines) + 1}]"
            )
        return ToolResult(content=text)


@attrs.frozen
class ListDir(_FileTool):
    """``list_dir``: a directory's entries, to a depth."""

    name: ClassVar[str] = "list_dir"
    description: ClassVar[str] = (
        "List a directory. Directories end with '/', symlinks with '@'. depth 1 lists the "
        "directory itself; larger depths include subdirectories (indented). Long listings "
        "are cut off with a note."
    )
    parameters: ClassVar[JSONObject] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Directory, relative to the workspace."},
            "depth": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
        },
        "additionalProperties": False,
    }
    annotations: ClassVar[ToolAnnotations] = evolve(_READ_ONLY, title="List directory")

    async def _execute(self, arguments: JSONObject) -> ToolResult:
        raw = _string(arguments, "path", ".")
        depth = _integer(arguments, "depth") or 1
        workspace, real = await self._resolve(raw)
        lines, truncated = await _in_thread(
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
    try:
        handle = os.open(".gitignore", os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), dir_fd=fd)
    except OSError:
        return None
    with os.fdopen(handle, "rb") as file:
        return file.read(1_000_000).decode("utf-8", errors="replace")


@attrs.frozen
class Search(_FileTool):
    """``search``: a regular expression over the workspace's text files."""

    name: ClassVar[str] = "search"
    description: ClassVar[str] = (
        "Search text files for a regular expression (Python syntax), line by line. Files "
        "ignored by .gitignore, binary files and .git are skipped. Returns 'path:line: text' "
        "per match; long results are cut off with a note."
    )
    parameters: ClassVar[JSONObject] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression."},
            "path": {"type": "string", "description": "Directory or file to search in."},
            "glob": {"type": "string", "description": "Only files matching this glob."},
            "ignore_case": {"type": "boolean", "default": False},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
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
        hits, truncated = await _in_thread(
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


_WRITE_ANNOTATIONS = ToolAnnotations(
    read_only=False, destructive=True, idempotent=True, open_world=False
)


@attrs.frozen
class WriteFile(_FileTool):
    """``write_file``: create or replace a file, atomically."""

    name: ClassVar[str] = "write_file"
    description: ClassVar[str] = (
        "Create a text file, or replace its whole content. Missing parent directories are "
        "created. The write is atomic: readers see the old file or the new one."
    )
    parameters: ClassVar[JSONObject] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace."},
            "content": {"type": "string", "description": "The complete new content."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    annotations: ClassVar[ToolAnnotations] = evolve(_WRITE_ANNOTATIONS, title="Write file")

    async def _execute(self, arguments: JSONObject) -> ToolResult:
        raw = _string(arguments, "path")
        content = _string(arguments, "content")
        workspace, real = await self._resolve(raw)
        await self._write(workspace, raw, real, content)
        size = len(content.encode("utf-8"))
        return ToolResult(content=f"wrote {size} bytes to {workspace.display(real)}")


@attrs.frozen
class EditFile(_FileTool):
    """``edit_file``: replace one exact, unique string."""

    name: ClassVar[str] = "edit_file"
    description: ClassVar[str] = (
        "Replace an exact string in a text file with another. old_string must occur exactly "
        "once (include surrounding lines to make it unique), unless replace_all is true."
    )
    parameters: ClassVar[JSONObject] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace."},
            "old_string": {"type": "string", "minLength": 1, "description": "Text to replace."},
            "new_string": {"type": "string", "description": "Replacement text."},
            "replace_all": {"type": "boolean", "default": False},
        },
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": False,
    }
    annotations: ClassVar[ToolAnnotations] = ToolAnnotations(
        read_only=False, destructive=True, idempotent=False, open_world=False, title="Edit file"
    )

    async def _execute(self, arguments: JSONObject) -> ToolResult:
        raw = _string(arguments, "path")
        old = _string(arguments, "old_string")
        new = _string(arguments, "new_string")
        replace_all = arguments.get("replace_all") is True
        if not old:
            return ToolResult.error("old_string must not be empty")
        workspace, real = await self._resolve(raw)
        text = await self._read_text(workspace, raw, real)
        count = text.count(old)
        if count == 0:
            return ToolResult.error(
                f"old_string was not found in {raw!r} (0 matches); read the file and copy "
                "the text exactly, whitespace included"
            )
        if count > 1 and not replace_all:
            return ToolResult.error(
                f"old_string matches {count} times in {raw!r}; include more surrounding "
                "text to make it unique, or set replace_all"
            )
        await self._write(workspace, raw, real, text.replace(old, new))
        return ToolResult(
            content=f"replaced {count} occurrence{'s' if count > 1 else ''} in "
            f"{workspace.display(real)}"
        )


@attrs.frozen
class PatchFile(_FileTool):
    """``patch_file``: apply a unified diff to one file, all hunks or none."""

    name: ClassVar[str] = "patch_file"
    description: ClassVar[str] = (
        "Apply a unified diff (hunks starting with '@@ -a,b +c,d @@') to one text file. "
        "Either every hunk applies or the file is left unchanged and the failing hunk is named."
    )
    parameters: ClassVar[JSONObject] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace."},
            "diff": {"type": "string", "description": "The unified diff for this file."},
        },
        "required": ["path", "diff"],
        "additionalProperties": False,
    }
    annotations: ClassVar[ToolAnnotations] = ToolAnnotations(
        read_only=False, destructive=True, idempotent=False, open_world=False, title="Patch file"
    )

    async def _execute(self, arguments: JSONObject) -> ToolResult:
        raw = _string(arguments, "path")
        diff = _string(arguments, "diff")
        workspace, real = await self._resolve(raw)
        text = await self._read_text(workspace, raw, real)
        try:
            patched, hunks = apply_patch(text, diff)
        except PatchError as exc:
            return ToolResult.error(f"patch not applied to {raw!r}, file unchanged: {exc}")
        await self._write(workspace, raw, real, patched)
        return ToolResult(
            content=f"applied {hunks} hunk{'s' if hunks != 1 else ''} to {workspace.display(real)}"
        )
