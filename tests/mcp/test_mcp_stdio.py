"""kova's stdio pipes (issue 28, items 8 and 11): linear line framing with a documented size
limit that fails the request it answers with an error naming the limit, and calls made after
the child died are known not to have reached it (sent again on the respawned server, never
"may or may not have run")."""

from __future__ import annotations

import itertools
import json
import os
import signal
import sys

import psutil
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage
from mcp_fixtures import SERVER
from mcp_types import JSONRPCError, JSONRPCResponse

import kova
from kova.mcp import McpClient, StdioTransport
from kova.mcp._stdio import DEFAULT_MAX_MESSAGE_BYTES, MESSAGE_TOO_LARGE, LineFramer

GUARD = 60


def _line(request_id: int, text: str) -> bytes:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {"content": [{"type": "text", "text": text}]},
    }
    return json.dumps(body).encode() + b"\n"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=400), max_size=10))
def test_framing_does_not_depend_on_how_reads_split_the_bytes(cuts: list[int]) -> None:
    data = _line(1, "a") + b"\n" + _line(2, "é€😀" * 20) + _line(3, "b")
    bounds = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    framer = LineFramer(DEFAULT_MAX_MESSAGE_BYTES)
    items = [item for a, b in itertools.pairwise(bounds) for item in framer.feed(data[a:b])]
    ids = [item.message.id for item in items if isinstance(item, SessionMessage)]
    assert ids == [1, 2, 3]


def test_an_oversized_answer_fails_its_request_and_the_next_message_is_read() -> None:
    framer = LineFramer(1000)
    huge = _line(7, "x" * 5000)
    items: list[object] = []
    for start in range(0, len(huge), 300):  # arrives in pieces: reported once, early
        items.extend(framer.feed(huge[start : start + 300]))
    items.extend(framer.feed(_line(8, "after")))
    assert len(items) == 2
    error, after = items
    assert isinstance(error, SessionMessage)
    assert isinstance(error.message, JSONRPCError)
    assert error.message.id == 7
    assert error.message.error.code == MESSAGE_TOO_LARGE
    assert "limit of 1000 bytes" in error.message.error.message
    assert isinstance(after, SessionMessage)
    assert isinstance(after.message, JSONRPCResponse)
    assert after.message.id == 8


def test_an_oversized_message_that_is_not_an_answer_is_reported_unreadable() -> None:
    framer = LineFramer(100)
    notification = json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x" * 500}}
    ).encode()
    (item,) = framer.feed(notification + b"\n")
    assert isinstance(item, ValueError)
    assert "limit of 100 bytes" in str(item)


def test_fifty_megabytes_in_one_line_keep_memory_bounded() -> None:
    framer = LineFramer(1_000_000)
    head = b'{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"'
    chunk = b"x" * 65536
    items = framer.feed(head)
    for _ in range(50 * 16):  # 50 MiB in 64 KiB reads
        items += framer.feed(chunk)
        assert len(framer._buffer) <= 1_000_000 + 65536
    items += framer.feed(b'"}]}}\n' + _line(4, "ok"))
    assert [type(item.message).__name__ for item in items if isinstance(item, SessionMessage)] == [
        "JSONRPCError",
        "JSONRPCResponse",
    ]


def test_max_message_bytes_must_be_a_positive_int() -> None:
    with pytest.raises(ValueError, match="max_message_bytes must be a positive int"):
        StdioTransport(sys.executable, max_message_bytes=0)


def _server(**options: object) -> StdioTransport:
    return StdioTransport(sys.executable, args=[str(SERVER), "stdio"], **options)  # type: ignore[arg-type]


async def test_a_message_over_the_limit_is_a_clear_error_and_the_connection_stays() -> None:
    with trio.fail_after(GUARD):
        async with McpClient.connect(_server(max_message_bytes=100_000)) as client:
            with pytest.raises(kova.McpError) as caught:
                await client.tools_call("big", {"size": 300_000})
            assert caught.value.code == MESSAGE_TOO_LARGE
            assert "limit of 100000 bytes" in str(caught.value)
            assert "max_message_bytes" in str(caught.value)
            assert (await client.tools_call("big", {"size": 1000})).text == "x" * 1000
            assert client.state.session == 1


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE  # a zombie is dead
    except psutil.NoSuchProcess:
        return False


async def test_calls_made_after_the_child_died_are_sent_to_the_new_one() -> None:
    with trio.fail_after(GUARD):
        async with McpClient.connect(_server()) as client:
            pid = int((await client.tools_call("pid")).text)
            os.kill(pid, signal.SIGKILL)
            while _alive(pid):  # noqa: ASYNC110 - a process has no event to wait on
                await trio.sleep(0.001)
            # Until kova has seen the child gone (its stdout ended), the OS may still take
            # writes to its stdin (seen here: eight requests written ~10 ms after the kill),
            # and such a request may have reached it. From then on, none can have.
            while client.state.status == "connected" and client.state.session == 1:  # noqa: ASYNC110
                await trio.sleep(0.001)
            results: list[str] = []

            async def call(tag: str) -> None:
                # write_after is not annotated: were it thought sent, it could not be replayed.
                result = await client.tools_call("write_after", {"seconds": 0, "tag": tag})
                results.append(result.text)

            async with trio.open_nursery() as nursery:
                for number in range(8):
                    nursery.start_soon(call, str(number))
            assert sorted(results) == sorted(f"wrote {n}" for n in range(8))
            assert int((await client.tools_call("pid")).text) != pid
