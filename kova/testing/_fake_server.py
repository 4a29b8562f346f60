"""What kova's scripted fake API servers share, so each one holds only its wire format.

Every fake (OpenAI, Anthropic, Gemini, Ollama, Bedrock) records each request, serves on
loopback through :func:`~kova.testing._http_server.serve_http`, asks its script with the
kova values it decoded from the wire, and streams a scripted reply through an encoder of
its own, cut or held the way the :class:`~kova.testing.StreamReply` says. Those parts live
here; a fake keeps its routes, its error bodies and its :class:`StreamEncoder`.
"""

from __future__ import annotations

import inspect
import json
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, ParamSpec, Protocol, TypeVar

import trio

from .._groups import lone_exceptions
from .._models import ChatRequest, ErrorEvent, ToolUse, ToolUseDelta, ToolUseEnd, ToolUseStart
from .._record import set_field
from ._http_server import FakeResponse, FakeStream, RecordedRequest, serve_http
from ._script import (
    ErrorReply,
    ScriptExhaustedError,
    ScriptRequest,
    StreamReply,
    as_script,
    stream_events,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping, Sequence

    from .._models import InferenceConfig, Message, ModelResponse, StreamEvent, ToolDefinition
    from ._script import Reply, Script, ScriptLike

__all__ = [
    "DecodedChat",
    "FakeServer",
    "StreamEncoder",
    "WholeToolCalls",
    "opener",
    "script_request",
    "scripted_stream",
]


class FakeServer:
    """The base of the fake servers: :meth:`serve` records every request in
    :attr:`requests`, then answers it with the server's own ``_route``, which asks
    :attr:`script` for each chat reply (:meth:`_reply`).

    A fake server is mutable state (what it received, the ids it handed out): a plain
    slotted class, each subclass with its own ``__init__`` that calls this one. Every fake
    takes ``host`` and ``port`` last: where :meth:`serve` listens unless told otherwise."""

    __slots__ = ("base_url", "host", "port", "requests", "script")

    requests: list[RecordedRequest]
    """Every request received, in arrival order."""
    base_url: str
    """``http://127.0.0.1:<port>`` once serving (``""`` before)."""
    script: Script
    """The replies to chat requests."""
    host: str
    """The address :meth:`serve` listens on unless told otherwise (loopback by default)."""
    port: int
    """The port :meth:`serve` listens on unless told otherwise (0, the default: a free one)."""

    def __init__(self, script: ScriptLike, *, host: str, port: int) -> None:
        self.requests = []
        self.base_url = ""
        self.script = as_script(script)
        self.host = host
        self.port = port

    def __repr__(self) -> str:
        where = self.base_url or "not serving"
        return f"{type(self).__name__}({where}, {len(self.requests)} requests)"

    async def serve(
        self,
        *,
        host: str | None = None,
        port: int | None = None,
        task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until cancelled; ``await nursery.start(server.serve)`` returns the base URL
        (``http://127.0.0.1:<port>``) once the socket listens (port 0 picks a free port;
        ``host`` and ``port`` default to the server's own)."""
        host = self.host if host is None else host
        port = self.port if port is None else port
        async with trio.open_nursery() as nursery:
            url: str = await nursery.start(partial(serve_http, self._record, host=host, port=port))
            self.base_url = url
            task_status.started(url)

    async def _record(self, request: RecordedRequest) -> FakeResponse | FakeStream:
        self.requests.append(request)
        return await self._route(request)

    async def _route(self, request: RecordedRequest) -> FakeResponse | FakeStream:
        raise NotImplementedError

    async def _reply(self, asked: ScriptRequest) -> Reply:
        """The script's reply to ``asked``; a script with none left answers with a 500 of
        type ``script_exhausted`` (its message says how often it was asked)."""
        try:
            return await self.script.next_reply(asked)
        except ScriptExhaustedError as exc:
            return ErrorReply(status_code=500, message=str(exc), error_type="script_exhausted")


_Server = TypeVar("_Server", bound=FakeServer)
_Arguments = ParamSpec("_Arguments")


def opener(
    server_class: Callable[_Arguments, _Server], name: str, label: str
) -> Callable[_Arguments, AbstractAsyncContextManager[_Server]]:
    """The ``open_*_server`` function called ``name``: it takes ``server_class``'s own
    arguments (help(), ``inspect.signature`` and type checkers show them, so the two never
    drift apart) and serves the server they make for the duration of the block, on its
    ``host`` and ``port``; cancelled when the block leaves (``label`` names the server in the
    cancel reason). A lone exception leaves the block as itself, never in an
    ``ExceptionGroup``."""

    @asynccontextmanager
    async def open_server(
        *args: _Arguments.args, **kwargs: _Arguments.kwargs
    ) -> AsyncIterator[_Server]:
        server = server_class(*args, **kwargs)
        with lone_exceptions():
            async with trio.open_nursery() as nursery:
                await nursery.start(server.serve)
                try:
                    yield server
                finally:
                    nursery.cancel_scope.cancel(reason=f"fake {label} server closing")

    made = getattr(server_class, "__name__", label)
    open_server.__name__ = open_server.__qualname__ = name
    open_server.__module__ = server_class.__module__
    open_server.__doc__ = (
        f"A :class:`{made}` serving for the duration of the block (arguments as its own):\n"
        f"``async with {name}(script) as server:``, then point a client at\n"
        "``server.base_url``; cancelled when the block leaves."
    )
    open_server.__signature__ = inspect.signature(server_class).replace(  # type: ignore[attr-defined]
        return_annotation=f"AbstractAsyncContextManager[{made}]"
    )
    return open_server


class DecodedChat(Protocol):
    """A chat request read back from the wire (a :class:`~kova.providers.ChatRequest`, or a
    fake's ``wire.*.DecodedRequest`` that also keeps what only its format has)."""

    @property
    def messages(self) -> Sequence[Message]: ...

    @property
    def tools(self) -> Sequence[ToolDefinition]: ...

    @property
    def config(self) -> InferenceConfig: ...


def script_request(
    decoded: DecodedChat, *, stream: bool, recorded: RecordedRequest
) -> ScriptRequest:
    """What the script is asked for a decoded chat request; kept on ``recorded`` (the
    request as received) as its :attr:`~RecordedRequest.decoded`."""
    asked = ScriptRequest(
        request=ChatRequest(messages=decoded.messages, tools=decoded.tools, config=decoded.config),
        stream=stream,
    )
    set_field(recorded, "decoded", asked)
    return asked


class StreamEncoder(Protocol):
    """Writes kova stream events as one fake's streamed body."""

    def start(self) -> bytes:
        """What the body opens with (``b""``, nothing, unless a subclass says otherwise)."""
        return b""

    def encode(self, event: StreamEvent) -> bytes:
        """One event's bytes (``b""`` when the event shows up later, or never)."""
        ...

    def finish(self) -> bytes:
        """What a body that ended properly closes with (``b""`` for nothing)."""
        ...


def scripted_stream(
    reply: ModelResponse | StreamReply,
    encoder: StreamEncoder,
    *,
    headers: Mapping[str, str],
    hold: bool = False,
    events: Sequence[StreamEvent] | None = None,
) -> FakeStream:
    """The streamed body of ``reply``: its events (``events``, else
    :func:`~kova.testing.stream_events`) through ``encoder``, one chunk each.

    An :class:`~kova.providers.ErrorEvent` ends the body after its chunk. A ``cut_after`` drops the
    connection after that many events; with ``hold`` a ``hold_after`` sends that many and
    then stalls (see :class:`~kova.testing.StreamReply`). Otherwise the body ends with
    ``encoder.finish()``.
    """
    if events is None:
        events = stream_events(reply)
    cut_after = reply.cut_after if isinstance(reply, StreamReply) else None
    hold_after = reply.hold_after if hold and isinstance(reply, StreamReply) else None
    limit = hold_after if hold_after is not None else cut_after
    chunks = [encoder.start()]
    ended_by_error = False
    for event in events if limit is None else events[:limit]:
        chunks.append(encoder.encode(event))
        if isinstance(event, ErrorEvent):
            ended_by_error = True
            break
    cut = limit is not None and not ended_by_error
    if not cut and not ended_by_error:
        chunks.append(encoder.finish())
    return FakeStream(
        status=200,
        headers=headers,
        chunks=[chunk for chunk in chunks if chunk],
        cut=cut,
        hold=hold_after is not None,
    )


class WholeToolCalls:
    """Puts each streamed tool call back together, for the wire formats that send a call
    whole (Gemini, Ollama)."""

    __slots__ = ("_calls",)

    def __init__(self) -> None:
        self._calls: dict[int, tuple[ToolUseStart, list[str]]] = {}

    def take(self, event: ToolUseStart | ToolUseDelta | ToolUseEnd) -> ToolUse | None:
        """The whole call once ``event`` ends it, else ``None``."""
        match event:
            case ToolUseStart(index=index):
                self._calls[index] = (event, [])
            case ToolUseDelta(index=index, partial_json=piece):
                if index in self._calls:
                    self._calls[index][1].append(piece)
            case ToolUseEnd(index=index):
                start, pieces = self._calls.pop(index)
                call = ToolUse(
                    id="scripted",
                    name=start.name,
                    input=json.loads("".join(pieces) or "{}"),
                    provider_metadata=start.provider_metadata,
                )
                # The id as scripted, even one kova would refuse (a hostile server's "").
                set_field(call, "id", start.id)
                return call
        return None
