"""Which request an oversized answer fails, on the streams that carry every answer (stdio's
lines, legacy SSE's events), when its id comes last (TypeScript servers' order) and the
message may never end (issue 44, item 5): the one request waiting when the message began, as
soon as the message goes over the limit; otherwise the id at its end, once it ends. Each
request is answered once.

Before, such an answer was reported only at its end: a line that never ended (200 MB
without a newline) left its call waiting for its whole timeout."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

from kova.mcp._stdio import LineFramer
from kova.mcp._wire import MESSAGE_TOO_LARGE, Oversize, SseFramer, TooLarge, Waiting

LIMIT = 1000
HEAD = b'{"result":{"content":[{"type":"text","text":"'


def _request(request_id: int) -> JSONRPCRequest:
    return JSONRPCRequest(jsonrpc="2.0", id=request_id, method="tools/call", params={})


def _id_last(request_id: int, size: int = 3 * LIMIT) -> bytes:
    return HEAD + b"x" * size + b'"}]},"jsonrpc":"2.0","id":' + str(request_id).encode() + b"}"


def _small(request_id: int) -> bytes:
    body = {"jsonrpc": "2.0", "id": request_id, "result": {"content": []}}
    return json.dumps(body).encode()


def _summary(items: list[object]) -> list[tuple[str, object]]:
    """(kind, id) of what went to the session: "too large", "answer" or "unreadable"."""
    out: list[tuple[str, object]] = []
    for item in items:
        if isinstance(item, TooLarge):
            item = item.answer
        if not isinstance(item, SessionMessage):
            out.append(("unreadable", None))
        elif isinstance(item.message, JSONRPCError):
            assert item.message.error.code == MESSAGE_TOO_LARGE
            assert f"limit of {LIMIT} bytes" in item.message.error.message
            out.append(("too large", item.message.id))
        else:
            assert isinstance(item.message, JSONRPCResponse)
            out.append(("answer", item.message.id))
    return out


class Stream:
    """One framer and the connection's waiting requests, as a transport drives them."""

    def __init__(self, kind: str, *waiting: int) -> None:
        self.waiting = Waiting()
        for request_id in waiting:
            self.waiting.sending(_request(request_id))
        self.kind = kind
        if kind == "stdio":
            self.framer: LineFramer | SseFramer = LineFramer(LIMIT, self.waiting)
        else:
            self.framer = SseFramer(Oversize(LIMIT, "SseTransport", waiting=self.waiting))

    def message(self, body: bytes) -> bytes:
        return body + b"\n" if self.kind == "stdio" else b"event: message\ndata: " + body + b"\n\n"

    def feed(self, data: bytes) -> list[tuple[str, object]]:
        items: list[object] = []
        for item in self.framer.feed(data):
            if not isinstance(item, TooLarge | SessionMessage | Exception):
                assert item.event == "message"  # a ServerSentEvent: read as the transport does
                from kova.mcp._wire import read_message

                item = read_message(item.data)
            self.waiting.read(item.answer if isinstance(item, TooLarge) else item)
            items.append(item)
        return _summary(items)


KINDS = ["stdio", "sse"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_one_waiting_request_fails_as_soon_as_its_answer_is_over_the_limit(kind: str) -> None:
    stream = Stream(kind, 5)
    whole = stream.message(_id_last(5))
    cut = whole.index(b'"jsonrpc"')  # everything but what names the request
    assert stream.feed(whole[:200]) == []
    assert stream.feed(whole[200:cut]) == [("too large", 5)]
    # When it ends, nothing is answered twice, and what follows is read as usual.
    assert stream.feed(whole[cut:] + stream.message(_small(6))) == [("answer", 6)]


@pytest.mark.parametrize("kind", KINDS)
def test_with_several_waiting_the_id_at_the_end_decides(kind: str) -> None:
    stream = Stream(kind, 5, 7)
    whole = stream.message(_id_last(7))
    cut = whole.index(b'"jsonrpc"')
    assert stream.feed(whole[:cut]) == []  # 5 or 7: not known yet
    assert stream.feed(whole[cut:]) == [("too large", 7)]
    assert stream.waiting.snapshot() == {5}


@pytest.mark.parametrize("kind", KINDS)
def test_a_request_sent_after_the_answer_began_is_not_what_it_answers(kind: str) -> None:
    stream = Stream(kind, 5)
    whole = stream.message(_id_last(5))
    cut = whole.index(b'"jsonrpc"')
    assert stream.feed(whole[:100]) == []
    stream.waiting.sending(_request(8))  # the answer began before the server could read it
    assert stream.feed(whole[100:cut]) == [("too large", 5)]
    assert stream.feed(whole[cut:]) == []
    assert stream.waiting.snapshot() == {8}


@pytest.mark.parametrize("kind", KINDS)
def test_a_cancelled_request_is_no_longer_waiting(kind: str) -> None:
    stream = Stream(kind, 5, 6)
    cancel = JSONRPCNotification(
        jsonrpc="2.0", method="notifications/cancelled", params={"requestId": 5}
    )
    stream.waiting.sending(cancel)
    whole = stream.message(_id_last(6))
    cut = whole.index(b'"jsonrpc"')
    assert stream.feed(whole[:cut]) == [("too large", 6)]


@pytest.mark.parametrize("kind", KINDS)
def test_an_oversized_message_that_is_no_answer_fails_nothing(kind: str) -> None:
    stream = Stream(kind, 5)
    notification = json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x" * 3000}}
    ).encode()
    whole = stream.message(notification)
    assert stream.feed(whole[:-5]) == []
    assert stream.feed(whole[-5:]) == [("unreadable", None)]
    assert stream.waiting.snapshot() == {5}


@pytest.mark.parametrize("kind", KINDS)
def test_a_message_that_only_mentions_a_result_is_not_taken_for_an_answer(kind: str) -> None:
    """A server request or notification written with its method last, whose params hold a
    "result": not an answer, so the one waiting request is not failed for it."""
    stream = Stream(kind, 5)
    body = b'{"params":{"result":"' + b"x" * 3000 + b'"},"method":"notifications/x"}'
    whole = stream.message(body)
    assert stream.feed(whole[:-5]) == []
    assert stream.feed(whole[-5:]) == [("unreadable", None)]
    assert stream.waiting.snapshot() == {5}


@settings(max_examples=80, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=8),
    waiting=st.sampled_from([(1,), (1, 2), (2,), (1, 2, 3)]),
)
def test_every_request_is_answered_once_however_the_bytes_arrive(
    kind: str, cuts: list[int], waiting: tuple[int, ...]
) -> None:
    """An oversized answer to 1 or 2 (id last), then the small answers of the others: each
    waiting request gets exactly one answer, the oversized one the error, whatever the
    reads."""
    stream = Stream(kind, *waiting)
    big = waiting[-1] if len(waiting) < 3 else 2
    data = stream.message(_id_last(big)) + b"".join(
        stream.message(_small(other)) for other in waiting if other != big
    )
    bounds = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    seen = [item for a, b in itertools.pairwise(bounds) for item in stream.feed(data[a:b])]
    assert sorted(seen, key=str) == sorted(
        [("too large", big), *(("answer", other) for other in waiting if other != big)], key=str
    )
    assert stream.waiting.snapshot() == set()
