"""The stdio transport's pipes: kova's own reader and writer around the ``mcp`` package's
process handling.

Why not the package's ``stdio_client`` whole: its reader joins the pending text with every
new chunk before splitting on newlines, which is quadratic in the length of a line (a 50 MB
message cost ~22 CPU seconds and ~320 MB, and the caller saw a bare timeout), and it has no
size limit. Its writer cannot say whether a message reached the child either, so a call made
just after the child died looked as if it "may have run". Here:

* the reader frames lines in linear time and enforces :attr:`StdioTransport.max_message_bytes
  <kova.mcp.StdioTransport.max_message_bytes>`: a longer message is discarded as it arrives
  (memory stays bounded) and the request it answers fails at once with a JSON-RPC error that
  names the limit (:data:`~kova.mcp._wire.MESSAGE_TOO_LARGE`);
* the writer knows when a write failed because the child is gone: that request never reached
  the server, and it is answered in its place with kova's "not delivered" error
  (:data:`NOT_DELIVERED`), so the connection actor sends it again on
  the next session (or reports it unavailable) instead of "may or may not have run".

Spawning the child (its own process group, the safe environment) and stopping it (close
stdin, wait, terminate the tree, reap) are the package's, through its private helpers, as its
own ``stdio_client`` uses them.
"""

from __future__ import annotations

import contextlib
import signal
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import mcp_types as mt
import trio
from mcp.client import stdio as mcp_stdio  # private helpers below: the package's own spawn/stop
from mcp.shared.message import SessionMessage

from .._json import dumps, utf8_safe
from ._stdin_ledger import StdinLedger, pipe_fd
from ._wire import HEAD, NOT_DELIVERED, Oversize, Waiting, read_message

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping
    from pathlib import Path
    from typing import TextIO

    from ._wire import SessionWatch

__all__ = ["LineFramer", "describe_exit", "message_line", "not_delivered_answer", "open_stdio"]

_READ_SIZE = 65536
_EXIT_WAIT = 1.0
"""Seconds to wait, once the child's stdout has ended, for its exit status (it has almost
always exited by then: the pipe closes when its last thread does)."""


class LineFramer:
    """Newline-delimited JSON-RPC messages from the child's stdout, in linear time, each at
    most ``limit`` bytes. ``waiting`` (the transport's) tells which request an oversized
    answer is for when its id comes last and its line may never end (see
    :class:`~kova.mcp._wire.Oversize`)."""

    __slots__ = ("_buffer", "_head", "_oversize", "_scanned", "_skipping", "_tail", "limit")

    def __init__(self, limit: int, waiting: Waiting | None = None) -> None:
        self.limit = limit
        self._oversize = Oversize(limit, "StdioTransport", waiting=waiting)
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no newline
        self._skipping = False  # inside an oversized message: drop up to its newline
        self._head = b""  # an oversized message's first bytes
        self._tail = b""  # the last bytes dropped of it

    def feed(self, chunk: bytes) -> list[SessionMessage | Exception]:
        """The messages (or parse errors, as values) completed by ``chunk``."""
        out: list[SessionMessage | Exception] = []
        buffer = self._buffer
        # A message that begins in this chunk answers none of the requests sent after it.
        began = not buffer and not self._skipping
        buffer += chunk
        start = 0
        while True:
            end = buffer.find(b"\n", max(start, self._scanned))
            if end < 0:
                break
            began = True
            line = bytes(buffer[start:end])
            start = end + 1
            self._scanned = start
            if self._skipping:
                # The end of an oversized message: reported now unless it was when it went
                # over the limit (TypeScript servers write the id last, so a large answer's
                # head does not hold it).
                self._skipping = False
                self._report(self._oversize.ended(self._head, (self._tail + line)[-HEAD:]), out)
            elif len(line) > self.limit:
                self._oversize.begin()
                self._report(self._oversize.over(line[:HEAD]), out)
                self._report(self._oversize.ended(line[:HEAD], line[-HEAD:]), out)
            elif line.strip():
                out.append(read_message(line))
        del buffer[:start]
        self._scanned = len(buffer)
        if began and buffer:
            self._oversize.begin()
        if len(buffer) > self.limit:
            if not self._skipping:
                self._head = bytes(buffer[:HEAD])
                self._report(self._oversize.over(self._head), out)
            self._skipping = True
            self._tail = bytes(buffer[-HEAD:])
            buffer.clear()
            self._scanned = 0
        return out

    @staticmethod
    def _report(
        answer: SessionMessage | Exception | None, out: list[SessionMessage | Exception]
    ) -> None:
        if answer is not None:
            out.append(answer)


def message_line(message: Any) -> bytes:
    """``message`` as one line of JSON. pydantic's writer refuses a lone surrogate (half an
    emoji a model streamed into a tool's arguments) with an error that would end the writer
    and the connection; such a message is written by :mod:`kova._json` instead, the
    surrogate as its ``\\uXXXX`` escape, as kova sends it to a provider."""
    try:
        data = message.model_dump_json(by_alias=True, exclude_unset=True)
    except ValueError:  # pydantic_core.PydanticSerializationError
        data = dumps(message.model_dump(by_alias=True, exclude_unset=True, mode="json"))
    return utf8_safe(data).encode() + b"\n"


def describe_exit(status: int) -> str:
    """``"exited with status 3"``, or for a negative status (the process was killed by that
    signal) ``"was killed by signal 9 (SIGKILL)"``."""
    if status >= 0:
        return f"exited with status {status}"
    try:
        name = f" ({signal.Signals(-status).name})"
    except ValueError:
        name = ""
    return f"was killed by signal {-status}{name}"


def not_delivered_answer(request_id: int | str, reason: str) -> SessionMessage:
    """kova's :data:`NOT_DELIVERED` answer to the request ``request_id``, for the session."""
    error = mt.ErrorData(code=NOT_DELIVERED, message=reason, data={"kova": "not-delivered"})
    return SessionMessage(mt.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _not_delivered(message: Any, reason: str) -> SessionMessage | None:
    if not isinstance(message, mt.JSONRPCRequest):
        return None
    return not_delivered_answer(message.id, reason)


class _Child(Protocol):
    """The child to start: what :func:`open_stdio` reads of a
    :class:`~kova.mcp.StdioTransport`."""

    @property
    def command(self) -> str: ...

    @property
    def args(self) -> tuple[str, ...]: ...

    @property
    def env(self) -> Mapping[str, str] | None: ...

    @property
    def cwd(self) -> str | Path | None: ...

    @property
    def max_message_bytes(self) -> int: ...


async def _child_gone(
    process: Any, watch: SessionWatch, ledger: StdinLedger, to_session: Any
) -> None:
    """Say how the child ended (its exit status, not the mcp package's "Connection closed")
    before the session sees the end of the stream and fails the requests in flight with that
    reason; what it left in its stdin it never read is answered as not delivered."""
    watch.dead_since = trio.current_time()
    with trio.move_on_after(_EXIT_WAIT):
        await process.wait()
    if process.returncode is None:
        return
    reason = f"the MCP server process {describe_exit(process.returncode)}"
    watch.exit_reason = reason
    watch.on_gone(reason)
    for request_id in ledger.never_read():
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await to_session.send(not_delivered_answer(request_id, f"{reason} before reading it"))


@asynccontextmanager
async def open_stdio(
    transport: _Child, errlog: TextIO, watch: SessionWatch | None = None
) -> AsyncIterator[Any]:
    """Start the child and yield the ``mcp`` package's pair of message streams over its
    pipes. Leaving stops the child (the package's shutdown sequence), also on cancellation.
    ``watch.dead_since`` is set when the child is seen gone (its stdout ended, or a write to
    its stdin failed): a request started after that never reached it."""
    env = mcp_stdio.get_default_environment() | dict(transport.env or {})
    command = await mcp_stdio._get_executable_command(transport.command)
    process = await mcp_stdio._create_platform_compatible_process(
        command=command, args=list(transport.args), env=env, errlog=errlog, cwd=transport.cwd
    )
    assert process.stdin is not None
    assert process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    waiting = Waiting()
    framer = LineFramer(transport.max_message_bytes, waiting)
    ledger = StdinLedger(pipe_fd(stdin))

    async def read_stdout() -> None:
        delivering = True
        async with to_session:
            try:
                while True:
                    chunk = await stdout.receive(_READ_SIZE)
                    if not delivering:
                        continue  # keep the pipe drained so the child can exit
                    for item in framer.feed(chunk):
                        waiting.read(item)
                        try:
                            await to_session.send(item)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            delivering = False
                            break
            except (
                anyio.EndOfStream,
                anyio.ClosedResourceError,
                anyio.BrokenResourceError,
                ConnectionError,
                OSError,
            ):
                # The child closed stdout (it exited), or we are shutting down.
                if watch is not None and watch.dead_since is None:
                    await _child_gone(process, watch, ledger, to_session)

    async def write_stdin() -> None:
        broken: str | None = None
        async with from_session:
            async for session_message in from_session:
                message = session_message.message
                if broken is None:
                    data = message_line(message)
                    request_id = message.id if isinstance(message, mt.JSONRPCRequest) else None
                    waiting.sending(message)
                    ledger.sending(len(data))
                    try:
                        await stdin.send(data)
                        ledger.sent(len(data), request_id)
                        continue
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
                        broken = f"the MCP server's stdin is closed (the process ended): {exc!r}"
                        if watch is not None and watch.dead_since is None:
                            watch.dead_since = trio.current_time()
                # The child is gone: this request never reached it.
                answer = _not_delivered(message, broken)
                if answer is not None:
                    waiting.read(answer)
                    try:
                        await to_session.send(answer)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return

    async with anyio.create_task_group() as task_group:
        task_group.start_soon(read_stdout)
        task_group.start_soon(write_stdin)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                await mcp_stdio._stop_server_process(process)
            task_group.cancel_scope.cancel()
