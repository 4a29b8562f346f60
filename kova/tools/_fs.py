"""The file tools: ``read_file``, ``write_file``, ``edit_file`` and ``patch_file`` here, and
the base every file tool shares, confined by a :class:`~kova.tools.ToolPolicy`. The
directory tools (``list_dir``, ``search``) are in ``_fs_tree``.

Blocking file I/O runs in worker threads. Reads that are cancelled are abandoned (their
result is discarded; nothing changes on disk). Writes are never abandoned: a cancelled write
waits for its thread, and the temporary file is renamed over the target only if the call was
not cancelled by then, so the old file is left intact.
"""

from __future__ import annotations

import functools
import os
import stat
from typing import TYPE_CHECKING, ClassVar

import trio

from .._models import ToolAnnotations, ToolResult
from .._record import Record, evolve, set_field
from ._patch import PatchError, apply_patch
from ._workspace import PathRefused, Workspace

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from .._models import JSONObject, JSONValue
    from ._policy import ToolPolicy

__all__ = ["EditFile", "PatchFile", "ReadFile", "WriteFile"]

_BINARY_PROBE = 8192

_READ_ONLY = ToolAnnotations(read_only=True, destructive=False, idempotent=True, open_world=False)
_CHANGES = ToolAnnotations(read_only=False, destructive=True, idempotent=False, open_world=False)
"""A tool that changes a file in place (applied twice, it changes it twice)."""

_FILE_PATH: JSONObject = {"type": "string", "description": "File path, relative to the workspace."}


def _parameters(properties: JSONObject, *required: str) -> JSONObject:
    """A file tool's parameters: an object of ``properties``, ``required`` among them, and
    nothing else."""
    schema: dict[str, JSONValue] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = [*required]
    schema["additionalProperties"] = False
    return schema


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


class _FileTool(Record):
    """What every file tool shares: the policy, and a workspace resolved per call."""

    policy: ToolPolicy

    def __init__(self, policy: ToolPolicy) -> None:
        set_field(self, "policy", policy)

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[JSONObject]
    annotations: ClassVar[ToolAnnotations]

    async def execute(self, arguments: JSONObject) -> ToolResult:
        """Run the tool; refusals and OS errors come back as error results."""
        try:
            return await self._execute(arguments)
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

    async def _execute(self, arguments: JSONObject) -> ToolResult:
        raise NotImplementedError

    async def _resolve(self, raw: str) -> tuple[Workspace, Path]:
        def resolve() -> tuple[Workspace, Path]:
            workspace = Workspace.from_policy(self.policy)
            return workspace, workspace.resolve(raw)

        return await trio.to_thread.run_sync(resolve, abandon_on_cancel=True)

    async def _write(self, workspace: Workspace, raw: str, real: Path, text: str) -> None:
        data = text.encode("utf-8")
        if len(data) > self.policy.max_write_bytes:
            raise PathRefused(
                f"the new content is {len(data)} bytes; the limit is {self.policy.max_write_bytes}"
            )
        # Never abandoned: a cancellation that arrives while a thread runs is delivered when
        # it returns. The rename happens only if none has arrived by then; otherwise the
        # temporary file is removed and the target is untouched.
        pending = await trio.to_thread.run_sync(
            functools.partial(workspace.prepare_write, raw, real, data), abandon_on_cancel=False
        )
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            await trio.to_thread.run_sync(pending.commit, abandon_on_cancel=False)
        finally:
            pending.close()  # two quick syscalls; fine to block for, even when cancelled

    async def _read(
        self, workspace: Workspace, raw: str, real: Path, limit: int
    ) -> tuple[bytes, int]:
        """Up to ``limit`` bytes of the checked file, and its size (abandoned on cancel)."""
        return await trio.to_thread.run_sync(
            functools.partial(_read_bytes, workspace, raw, real, limit), abandon_on_cancel=True
        )

    async def _rewrite(
        self, raw: str, change: Callable[[str], ToolResult | tuple[str, str]]
    ) -> ToolResult:
        """Read the text file ``raw``, ``change`` its text and write it back. ``change``
        returns the new text and what it did (``"replaced 2 occurrences in"``, followed by
        the file's path in the result), or an error result: then the file is not written."""
        workspace, real = await self._resolve(raw)
        limit = self.policy.max_write_bytes
        data, size = await self._read(workspace, raw, real, limit + 1)
        if size > limit or len(data) > limit:
            raise PathRefused(f"{raw!r} is {size} bytes; files over {limit} bytes are not edited")
        changed = change(_decode(raw, data))
        if isinstance(changed, ToolResult):
            return changed
        text, done = changed
        await self._write(workspace, raw, real, text)
        return ToolResult(content=f"{done} {workspace.display(real)}")


class ReadFile(_FileTool, init=False):
    """``read_file``: a text file, or a range of its lines."""

    name: ClassVar[str] = "read_file"
    description: ClassVar[str] = (
        "Read a UTF-8 text file. Optionally give start_line and end_line (1-based, inclusive) "
        "to read part of it. Large files are cut off with a note saying how to read the rest; "
        "binary files are refused."
    )
    parameters: ClassVar[JSONObject] = _parameters(
        {
            "path": _FILE_PATH,
            "start_line": {"type": "integer", "minimum": 1, "description": "First line."},
            "end_line": {"type": "integer", "minimum": 1, "description": "Last line."},
        },
        "path",
    )
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
        data, size = await self._read(workspace, raw, real, read_limit + 1)
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


class WriteFile(_FileTool, init=False):
    """``write_file``: create or replace a file, atomically."""

    name: ClassVar[str] = "write_file"
    description: ClassVar[str] = (
        "Create a text file, or replace its whole content. Missing parent directories are "
        "created. The write is atomic: readers see the old file or the new one."
    )
    parameters: ClassVar[JSONObject] = _parameters(
        {
            "path": _FILE_PATH,
            "content": {"type": "string", "description": "The complete new content."},
        },
        "path",
        "content",
    )
    # Writing the same content twice leaves the same file: idempotent, unlike an edit.
    annotations: ClassVar[ToolAnnotations] = evolve(_CHANGES, idempotent=True, title="Write file")

    async def _execute(self, arguments: JSONObject) -> ToolResult:
        raw = _string(arguments, "path")
        content = _string(arguments, "content")
        workspace, real = await self._resolve(raw)
        await self._write(workspace, raw, real, content)
        size = len(content.encode("utf-8"))
        return ToolResult(content=f"wrote {size} bytes to {workspace.display(real)}")


class EditFile(_FileTool, init=False):
    """``edit_file``: replace one exact, unique string."""

    name: ClassVar[str] = "edit_file"
    description: ClassVar[str] = (
        "Replace an exact string in a text file with another. old_string must occur exactly "
        "once (include surrounding lines to make it unique), unless replace_all is true."
    )
    parameters: ClassVar[JSONObject] = _parameters(
        {
            "path": _FILE_PATH,
            "old_string": {"type": "string", "minLength": 1, "description": "Text to replace."},
            "new_string": {"type": "string", "description": "Replacement text."},
            "replace_all": {"type": "boolean", "default": False},
        },
        "path",
        "old_string",
        "new_string",
    )
    annotations: ClassVar[ToolAnnotations] = evolve(_CHANGES, title="Edit file")

    async def _execute(self, arguments: JSONObject) -> ToolResult:
        raw = _string(arguments, "path")
        old = _string(arguments, "old_string")
        new = _string(arguments, "new_string")
        replace_all = arguments.get("replace_all") is True
        if not old:
            return ToolResult.error("old_string must not be empty")

        def replace(text: str) -> ToolResult | tuple[str, str]:
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
            done = f"replaced {count} occurrence{'s' if count > 1 else ''} in"
            return text.replace(old, new), done

        return await self._rewrite(raw, replace)


class PatchFile(_FileTool, init=False):
    """``patch_file``: apply a unified diff to one file, all hunks or none."""

    name: ClassVar[str] = "patch_file"
    description: ClassVar[str] = (
        "Apply a unified diff (hunks starting with '@@ -a,b +c,d @@') to one text file. "
        "Either every hunk applies or the file is left unchanged and the failing hunk is named."
    )
    parameters: ClassVar[JSONObject] = _parameters(
        {
            "path": _FILE_PATH,
            "diff": {"type": "string", "description": "The unified diff for this file."},
        },
        "path",
        "diff",
    )
    annotations: ClassVar[ToolAnnotations] = evolve(_CHANGES, title="Patch file")

    async def _execute(self, arguments: JSONObject) -> ToolResult:
        raw = _string(arguments, "path")
        diff = _string(arguments, "diff")

        def patch(text: str) -> ToolResult | tuple[str, str]:
            try:
                patched, hunks = apply_patch(text, diff)
            except PatchError as exc:
                return ToolResult.error(f"patch not applied to {raw!r}, file unchanged: {exc}")
            return patched, f"applied {hunks} hunk{'s' if hunks != 1 else ''} to"

        return await self._rewrite(raw, patch)
