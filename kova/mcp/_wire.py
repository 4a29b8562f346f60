"""How kova reads a server's messages, the same on every transport.

Each transport frames messages its own way (stdio: one line each; legacy SSE and Streamable
HTTP: server-sent events, or one JSON body), and each frame goes through :func:`read_message`
here, under one size limit (:data:`DEFAULT_MAX_MESSAGE_BYTES`, per transport
``max_message_bytes``). So a hostile answer has one outcome whatever carried it:

* over the limit: discarded as it arrives (memory stays bounded) and the request it answers
  fails at once with :data:`MESSAGE_TOO_LARGE` naming the limit; the session goes on. Which
  request it answers is known from its head, or from the transport (a Streamable HTTP POST's
  own answer), or, when the id comes last (TypeScript servers' order) and the message may
  never end, from :class:`Waiting`: the one request that was waiting when it began
  (:class:`Oversize`);
* not UTF-8: each invalid byte sequence reads as U+FFFD, as the SSE standard decodes a stream;
* a lone surrogate escape (``"\\ud83d"``, half an emoji a tool cut in two): read as Python's
  ``json`` reads it, so the text reaches the model exactly as the server sent it;
* anything else unreadable (nested too deeply for any JSON reader, not JSON, not a JSON-RPC
  message): the request it answers fails at once with :data:`MESSAGE_UNREADABLE` saying why.

:class:`SseFramer` reads server-sent events from bytes in linear time under the limit; the
``mcp`` package's reader (httpx2's) stops the whole stream at its 1 MiB event limit, which
over legacy SSE ended the session and over Streamable HTTP looked like a lost connection.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import mcp_types as mt
from httpx2 import ServerSentEvent
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import SessionMessage

from .._json import loads

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "SessionWatch",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "HEAD",
    "HTTP_REFUSED",
    "MESSAGE_TOO_LARGE",
    "MESSAGE_UNREADABLE",
    "NOT_DELIVERED",
    "Oversize",
    "SseFramer",
    "TooLarge",
    "Waiting",
    "answer_in_place",
    "has_answer_id",
    "http_refusal",
    "read_message",
    "too_large_text",
]

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The default size limit of one message from the server, in bytes, on every transport."""

MESSAGE_TOO_LARGE = -32051
"""JSON-RPC code of the error kova puts in place of a server's answer that exceeded the
message size limit."""

MESSAGE_UNREADABLE = -32052
"""JSON-RPC code of the error kova puts in place of a server's answer it cannot read (nested
too deeply, not JSON, not a JSON-RPC message)."""

NOT_DELIVERED = -32050
"""JSON-RPC code of the error kova puts in place of a response when a request never reached
a live session (the server was unreachable, or no longer knew the session id).

The ``mcp`` package turns every HTTP failure of a POST into one of a handful of errors that
cannot tell "the server never saw it" from "the server may have run it". The connection
actor must tell them apart (a request that never ran may always be sent again), so the HTTP
layer answers such a request itself, with this code and ``data={"kova": "not-delivered"}``.
"""

HTTP_REFUSED = -32053
"""JSON-RPC code of the error kova puts in place of an HTTP error status answering a request
(a ``401`` the token refresh did not cure, say), naming the status: the ``mcp`` package
reported it as a bare -32603 "Server returned an error response"."""


def http_refusal(status: int, phrase: str, body: bytes) -> str:
    """The message for a request the server refused with HTTP ``status``."""
    text = f"the MCP server answered HTTP {status} {phrase}".rstrip()
    if status == 401:
        text += (
            ": it refused the credentials (a TokenProvider's token is refreshed once and "
            "the request sent again before this is reported)"
        )
    elif status == 403:
        text += ": the credentials are not allowed to do this"
    detail = body[:200].decode("utf-8", "replace").strip()
    return f"{text} ({detail})" if detail else text


HEAD = 512
"""Bytes of an oversized or unreadable message kept to find the id of the request it answers."""

_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
_LAST_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*}\s*$')
"""The id as the last member of a message: TypeScript servers write ``{"result": ...,
"jsonrpc": "2.0", "id": 3}``, so in a large answer it is in the tail, not the head."""


_ANSWER_HEAD = re.compile(rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"(?:result|error)"\s*:')
"""The start of an answer whose id comes later: ``{"result": ...`` (TypeScript servers'
order), or after ``"jsonrpc": "2.0"``."""


def too_large_text(limit: int, setting: str) -> str:
    """The error message for a message over ``limit`` (``setting`` names where to raise it)."""
    return (
        f"the MCP server sent a message over kova's limit of {limit} bytes "
        f"({setting}(max_message_bytes=...)); it was discarded"
    )


def has_answer_id(head: bytes) -> bool:
    """Whether ``head`` (a message's first bytes) shows the id of the request it answers."""
    return b'"method"' not in head and _ID.search(head) is not None


def answer_in_place(
    head: bytes,
    code: int,
    message: str,
    request_id: int | str | None = None,
    *,
    tail: bytes = b"",
) -> SessionMessage | Exception:
    """An error answering the request whose response began with ``head`` and could not be
    used, so that request fails now instead of waiting for its timeout. ``request_id`` is the
    request's id when the transport knows it (a Streamable HTTP POST's own answer). Otherwise
    the id is read from ``head``, or from ``tail`` (the message's last bytes) where servers
    that write it last put it; when ``head`` is not an answer to one of our requests (or
    its id is not where servers put it, first), the error is returned as a value: nobody
    waits for it by id, and the session reports it as unreadable."""
    if b'"method"' in head:
        return ValueError(message)
    if request_id is None:
        found = _ID.search(head) or _LAST_ID.search(tail)
        if found is None:
            return ValueError(message)
        request_id = _id_value(found.group(1))
    error = mt.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=mt.ErrorData(code=code, message=message)
    )
    return SessionMessage(error)


class Waiting:
    """The ids of one connection's requests that no answer has reached yet.

    On a stream that carries every answer (stdio's stdout, legacy SSE's event stream), an
    oversized answer whose id comes last names its request only at its end, which may never
    come (a server writing 200 MB without a newline): then the one request that was waiting
    when the message began is the one it answers (:class:`Oversize`). A request is waiting
    from before it is written until an answer with its id is read, or until it is cancelled
    (a server should not answer a cancelled request).
    """

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids: set[int | str] = set()

    def sending(self, message: object) -> None:
        """``message`` (a JSON-RPC message of the client's) is about to be written."""
        if isinstance(message, mt.JSONRPCRequest):
            self._ids.add(message.id)
        elif (
            isinstance(message, mt.JSONRPCNotification)
            and message.method == "notifications/cancelled"
        ):
            request_id = cancelled_request_id_from_params(message.params)
            if request_id is not None:
                self._ids.discard(request_id)

    def read(self, item: object) -> None:
        """``item`` (what the transport hands the session) was read: an answer ends a wait."""
        if isinstance(item, SessionMessage) and isinstance(
            item.message, mt.JSONRPCResponse | mt.JSONRPCError
        ):
            self._ids.discard(item.message.id)

    def snapshot(self) -> frozenset[int | str]:
        """The requests waiting now."""
        return frozenset(self._ids)


class Oversize:
    """What to hand the session for one stream's oversized messages, each reported once.

    :meth:`begin` when a message begins, :meth:`over` the moment it goes over the limit (its
    ``head``, the first bytes), :meth:`ended` if it ends (``tail``, its last bytes). The
    request it answers fails at :meth:`over` when it is known by then: the transport's
    ``request_id`` (a Streamable HTTP POST's own answer), the id in the head, or, for an
    answer whose head holds no id, the one request that was waiting when the message began
    (``waiting``); otherwise at :meth:`ended`, by the id in the tail.
    """

    __slots__ = ("_candidates", "_early", "_request_id", "_waiting", "limit", "setting")

    def __init__(
        self,
        limit: int,
        setting: str,
        *,
        waiting: Waiting | None = None,
        request_id: int | str | None = None,
    ) -> None:
        self.limit = limit
        self.setting = setting
        self._waiting = waiting
        self._request_id = request_id
        self._candidates: frozenset[int | str] = frozenset()
        self._early: int | str | None = None

    def begin(self) -> None:
        """A message begins: a request sent after this cannot be what it answers."""
        if self._waiting is not None:
            self._candidates = self._waiting.snapshot()
        self._early = None

    def over(self, head: bytes) -> SessionMessage | Exception | None:
        """The message went over the limit: the answer failing its request, if it is known
        now (``None``: wait for :meth:`ended`)."""
        request_id = self._request_id
        if request_id is None and not has_answer_id(head):
            if b'"method"' in head or _ANSWER_HEAD.match(head) is None:
                return None  # not an answer, or not yet known to be one
            if len(self._candidates) != 1:
                return None
            (request_id,) = self._candidates
        answer = answer_in_place(head, MESSAGE_TOO_LARGE, self._text(), request_id)
        if isinstance(answer, SessionMessage):
            self._early = answer.message.id  # type: ignore[union-attr]
            return answer
        return None

    def ended(self, head: bytes, tail: bytes) -> SessionMessage | Exception | None:
        """The oversized message ended: the answer failing its request, unless :meth:`over`
        gave it (an id in the tail that names another request is answered too)."""
        early, self._early = self._early, None
        if early is None:
            return answer_in_place(
                head, MESSAGE_TOO_LARGE, self._text(), self._request_id, tail=tail
            )
        found = _LAST_ID.search(tail)
        if found is None or _id_value(found.group(1)) == early:
            return None
        return answer_in_place(head, MESSAGE_TOO_LARGE, self._text(), _id_value(found.group(1)))

    def _text(self) -> str:
        return too_large_text(self.limit, self.setting)


def _id_value(raw: bytes) -> int | str:
    return int(raw) if raw[:1] != b'"' else raw[1:-1].decode("utf-8", "replace")


def read_message(
    data: bytes | str, request_id: int | str | None = None
) -> SessionMessage | Exception:
    """One message from the server, by the rules in this module's docstring."""
    try:
        return SessionMessage(mt.jsonrpc_message_adapter.validate_json(data, by_name=False))
    except ValueError as exc:
        return _unreadable(data, exc, request_id)


def _unreadable(
    data: bytes | str, error: ValueError, request_id: int | str | None
) -> SessionMessage | Exception:
    """A message pydantic's JSON reader refused: invalid UTF-8 (read again with U+FFFD in
    place of each bad sequence), a lone surrogate (pydantic refuses it, Python's reader keeps
    it), or something kova cannot read at all."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    try:
        value = loads(text)
    except ValueError as exc:  # not JSON, or nested too deeply (JsonNestingError)
        reason = str(exc)
    else:
        try:
            return SessionMessage(mt.jsonrpc_message_adapter.validate_python(value, by_name=False))
        except ValueError:
            reason = str(error).splitlines()[0]
    message = f"the MCP server sent a message kova cannot read ({reason[:200]}); it was discarded"
    head = data[:HEAD] if isinstance(data, bytes) else text[:HEAD].encode("utf-8", "replace")
    tail = data[-HEAD:] if isinstance(data, bytes) else text[-HEAD:].encode("utf-8", "replace")
    return answer_in_place(head, MESSAGE_UNREADABLE, message, request_id, tail=tail)


class TooLarge:
    """An event whose data went over the limit, discarded: ``answer`` is what to hand the
    session for it (from the framer's :class:`Oversize`), the error answering its request or
    an error value when it answers none."""

    __slots__ = ("answer",)

    def __init__(self, answer: SessionMessage | Exception) -> None:
        self.answer = answer


_LINE_END = re.compile(rb"\r\n|\r|\n")


class SseFramer:
    """Server-sent events from a byte stream in linear time, each at most ``limit`` bytes of
    data (``oversize.limit``); a longer event is dropped as it arrives and reported as
    :class:`TooLarge` once (as soon as it goes over the limit if ``oversize`` knows the
    request it answers then, else when it ends), and the events after it are read as usual.
    Data is decoded as UTF-8 with U+FFFD for invalid bytes, as the SSE standard says."""

    __slots__ = (
        "_buffer",
        "_data",
        "_event",
        "_head",
        "_id",
        "_oversize",
        "_pending",
        "_retry",
        "_size",
        "_skip_line",
        "_tail",
        "_too_large",
        "limit",
    )

    def __init__(self, oversize: Oversize) -> None:
        self._oversize = oversize
        self.limit = oversize.limit
        self._buffer = bytearray()
        self._skip_line = False  # inside an over-long line: drop up to its end
        self._id = ""
        self._next_event()

    def _next_event(self) -> None:
        """Ready for the next event (the last event id stays, as the SSE standard says)."""
        self._event = ""
        self._data: list[bytes] = []
        self._size = 0
        self._retry: int | None = None
        self._pending = False
        self._too_large = False
        self._head = b""
        self._tail = b""

    def feed(self, chunk: bytes) -> list[ServerSentEvent | TooLarge]:
        """The events completed by ``chunk``."""
        out: list[ServerSentEvent | TooLarge] = []
        buffer = self._buffer
        scan = len(buffer)
        buffer += chunk
        start = 0
        # A CR at the very end may be the first half of a CRLF: wait for the next chunk.
        for match in _LINE_END.finditer(buffer, max(0, scan - 1)):
            if match.end() == len(buffer) and match.group() == b"\r":
                break
            line = bytes(buffer[start : match.start()])
            start = match.end()
            if self._skip_line:
                self._skip_line = False
                self._tail = (self._tail + line)[-HEAD:]
                continue
            event = self._line(line)
            if event is not None:
                out.append(event)
        del buffer[:start]
        if len(buffer) > self.limit + 16:  # a line longer than any event may be
            early = self._overflow(bytes(buffer[:HEAD]))
            if early is not None:
                out.append(early)
            self._tail = bytes(buffer[-HEAD:])
            buffer.clear()
            self._skip_line = True
        return out

    def _overflow(self, head: bytes) -> TooLarge | None:
        """The event went over the limit: its answer now, if the request is known."""
        self._begin()
        answer = None
        if not self._too_large:
            self._too_large = True
            data_head = head.partition(b":")[2].lstrip(b" ") if head.startswith(b"data") else b""
            self._head = (b"".join(self._data) + data_head)[:HEAD]
            answer = self._oversize.over(self._head)
        self._data = []
        self._size = 0
        return None if answer is None else TooLarge(answer)

    def _begin(self) -> None:
        if not self._pending:
            self._pending = True
            self._oversize.begin()

    def _line(self, line: bytes) -> ServerSentEvent | TooLarge | None:
        if not line:
            return self._dispatch()
        if line[:1] == b":":
            return None
        field, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if field == b"data":
            self._begin()
            if self._too_large:
                self._tail = (self._tail + value)[-HEAD:]
                return None
            self._size += len(value) + 1
            if self._size > self.limit:
                early = self._overflow(b"data:" + value[:HEAD])
                self._tail = value[-HEAD:]
                return early
            self._data.append(value)
        elif field == b"event":
            self._event = value.decode("utf-8", "replace")
            self._begin()
        elif field == b"id":
            if b"\0" not in value:
                self._id = value.decode("utf-8", "replace")
                self._begin()
        elif field == b"retry" and value.isdigit():
            self._retry = int(value)
            self._begin()
        return None

    def _dispatch(self) -> ServerSentEvent | TooLarge | None:
        if not self._pending:
            return None
        event: ServerSentEvent | TooLarge | None
        if self._too_large:
            answer = self._oversize.ended(self._head, self._tail)
            event = None if answer is None else TooLarge(answer)
        else:
            data = b"\n".join(self._data).decode("utf-8", "replace")
            event = ServerSentEvent(
                event=self._event or "message", data=data, id=self._id, retry=self._retry
            )
        self._next_event()
        return event


class SessionWatch:
    """Callbacks from kova's HTTP layer to the connection actor, for one connection."""

    __slots__ = ("dead_since", "exit_reason", "gone", "on_gone")

    def __init__(self, *, on_gone: Callable[[str], None]) -> None:
        self.on_gone = on_gone
        """The session is gone: the server answered 404 (or 400 naming the session) for our
        ``Mcp-Session-Id``, or it could not be reached at all. Called with the reason."""
        self.gone = False
        self.dead_since: float | None = None
        """stdio: when (trio's clock) the child was seen gone; a request started later never
        reached it."""
        self.exit_reason: str | None = None
        """stdio: how the child ended (``"the MCP server process exited with status 3"``),
        also when it ended during ``initialize``, before the actor listens."""
