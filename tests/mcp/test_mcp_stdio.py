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
from kova.mcp._stdio import LineFramer
from kova.mcp._wire import DEFAULT_MAX_MESSAGE_BYTES, MESSAGE_TOO_LARGE, MESSAGE_UNREADABLE

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


# --- what a server or a caller can send (the audit of issue 24's session) ----------------------

HOSTILE = SERVER.with_name("hostile_stdio_server.py")


def test_a_line_nested_too_deeply_fails_the_request_it_answers() -> None:
    framer = LineFramer(DEFAULT_MAX_MESSAGE_BYTES)
    deep = "[" * 10_000 + "]" * 10_000
    (item,) = framer.feed(b'{"jsonrpc":"2.0","id":4,"result":{"a":%s}}\n' % deep.encode())
    assert isinstance(item, SessionMessage)
    assert isinstance(item.message, JSONRPCError)
    assert item.message.id == 4
    assert item.message.error.code == MESSAGE_UNREADABLE
    assert "nested too deeply" in item.message.error.message
    # A line that answers nobody stays an unreadable message, as before.
    (item,) = framer.feed(b'{"jsonrpc":"2.0","method":"x","params":%s}\n' % deep.encode())
    assert isinstance(item, ValueError)


def test_a_lone_surrogate_escape_is_read_as_python_reads_it() -> None:
    framer = LineFramer(DEFAULT_MAX_MESSAGE_BYTES)
    (item,) = framer.feed(_line(5, "half \ud83d"))  # json.dumps writes the \ud83d escape
    assert isinstance(item, SessionMessage)
    assert isinstance(item.message, JSONRPCResponse)
    assert item.message.result["content"][0]["text"] == "half \ud83d"


async def test_a_server_answer_kova_cannot_read_fails_that_call_at_once() -> None:
    # Before: the line was dropped and the call waited for its whole request timeout (the
    # agent's turn with it); a lone surrogate, which Python reads, was dropped the same way.
    transport = StdioTransport(sys.executable, args=[str(HOSTILE)])
    async with McpClient.connect(transport, request_timeout=GUARD) as client:
        with trio.fail_after(GUARD / 2):
            with pytest.raises(kova.McpError, match="nested too deeply") as caught:
                await client.tools_call("deep", {})
            assert caught.value.code == MESSAGE_UNREADABLE
            with pytest.raises(kova.McpError, match="cannot read"):
                await client.tools_call("envelope", {})
            result = await client.tools_call("surrogate", {})
            assert result.text == "half \ud83d"
            assert not result.is_error
            assert json.loads((await client.tools_call("echo", {"a": 1})).text) == {"a": 1}


async def test_arguments_json_cannot_carry_fail_in_the_caller_and_the_connection_stays() -> None:
    # Before: the session serialized them in the connection actor's task, and a value it could
    # not write crashed the actor (every call in flight failed as interrupted); a lone
    # surrogate ended the writer and with it the connection.
    deep: object = 1
    for _ in range(10_000):
        deep = [deep]
    transport = StdioTransport(sys.executable, args=[str(HOSTILE)])
    async with McpClient.connect(transport, request_timeout=GUARD) as client:
        with trio.fail_after(GUARD / 2):
            with pytest.raises(ValueError, match="nested more than 128 levels deep"):
                await client.tools_call("echo", {"a": deep})  # type: ignore[dict-item]
            with pytest.raises(TypeError, match="JSON values only"):
                await client.tools_call("echo", {"a": object()})  # type: ignore[dict-item]
            with pytest.raises(TypeError, match="must be a JSON object"):
                await client.tools_call("echo", [1])  # type: ignore[arg-type]
            with pytest.raises(ValueError, match="lone surrogate"):
                await client.resources_read("file:///\ud800")
            # Half an emoji a model streamed into the arguments goes out as U+FFFD.
            echoed = await client.tools_call("echo", {"text": "half \ud83d", "ok": "é"})
            assert json.loads(echoed.text) == {"text": "half \ufffd", "ok": "é"}
            assert client.state.status == "connected"
            assert client.state.session == 1  # never reconnected: no actor crash


def test_a_message_with_a_lone_surrogate_is_written_with_its_escape() -> None:
    # What the client answers a server with can hold model text (a sampling result): pydantic's
    # writer refuses a lone surrogate, and the failure ended the writer and the connection.
    from kova.mcp._stdio import message_line

    answer = JSONRPCResponse(jsonrpc="2.0", id=3, result={"content": {"text": "half \ud83d é"}})
    line = message_line(answer)
    assert line.endswith(b"\n")
    assert json.loads(line) == {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {"content": {"text": "half \ud83d é"}},
    }
    assert b"\\ud83d" in line
