"""What a server (or the text it sent) can do to a provider, on all five wire formats: it
fails that one request with a kova error, never anything else (issue 23)."""

from __future__ import annotations

import contextlib
import gzip
import itertools
import json
from functools import partial
from typing import TYPE_CHECKING

import pytest
import trio

from kova import (
    InvalidResponse,
    KovaError,
    KovaTimeoutError,
    Message,
    ProviderError,
    ProviderOverloaded,
    RateLimited,
    ToolResult,
    ToolUse,
)
from kova.agent._accumulate import ResponseAccumulator
from kova.providers import ChatRequest
from kova.providers._http import MAX_ERROR_MESSAGE_CHARS
from kova.testing import Script, StreamReply, reply_text
from kova.testing._http_server import FakeResponse, FakeStream, RecordedRequest

from ._hostile import WIRE_IDS, WIRES, Wire, raw_server

if TYPE_CHECKING:
    from collections.abc import Iterator

    from kova.providers import Provider

DEEP = 100_000


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _deep_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_a_deeply_nested_body_is_an_invalid_response(wire: Wire) -> None:
    body = _deep(DEEP).encode()
    reply = FakeResponse(headers={"content-type": "application/json"}, body=body)
    async with raw_server(lambda _: reply) as (url, _):
        provider = wire.build(url)
        async with provider.open():
            with pytest.raises(InvalidResponse, match="nested too deeply"):
                await provider.chat_completion(ChatRequest.of("hi"))


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_a_deeply_nested_stream_event_is_an_invalid_response(wire: Wire) -> None:
    frame = wire.raw_frame(_deep_object(DEEP).encode())
    reply = FakeStream(headers={"content-type": wire.stream_type}, chunks=[frame])
    async with raw_server(lambda _: reply) as (url, _):
        provider = wire.build(url)
        async with provider.open():
            with pytest.raises(InvalidResponse, match="nested too deeply"):
                async with provider.chat_completion_stream(ChatRequest.of("hi")) as batches:
                    async for _ in batches:
                        pass


async def _streamed(wire: Wire, url: str) -> list[object]:
    provider = wire.build(url)
    accumulator = ResponseAccumulator()
    async with provider.open(), provider.chat_completion_stream(ChatRequest.of("hi")) as batches:
        async for batch in batches:
            accumulator.feed(batch)
    return list(accumulator.finish().content)


@pytest.mark.parametrize("depth", [200, DEEP])
@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_deeply_nested_tool_arguments_are_an_invalid_response(wire: Wire, depth: int) -> None:
    args = _deep_object(depth)
    whole = FakeResponse(headers={"content-type": "application/json"}, body=wire.tool_body(args))
    async with raw_server(lambda _: whole) as (url, _):
        provider = wire.build(url)
        async with provider.open():
            with pytest.raises(InvalidResponse, match="nested"):
                await provider.chat_completion(ChatRequest.of("hi"))
    streamed = FakeStream(headers={"content-type": wire.stream_type}, chunks=wire.tool_stream(args))
    async with raw_server(lambda _: streamed) as (url, _):
        with pytest.raises(InvalidResponse, match="nested"):
            await _streamed(wire, url)


@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_tool_arguments_nested_within_the_limit_are_read(wire: Wire) -> None:
    args = _deep_object(100)
    whole = FakeResponse(headers={"content-type": "application/json"}, body=wire.tool_body(args))
    async with raw_server(lambda _: whole) as (url, _):
        provider = wire.build(url)
        async with provider.open():
            response = await provider.chat_completion(ChatRequest.of("hi"))
    (call,) = response.tool_uses
    assert call.name == "f"
    streamed = FakeStream(headers={"content-type": wire.stream_type}, chunks=wire.tool_stream(args))
    async with raw_server(lambda _: streamed) as (url, _):
        (block,) = await _streamed(wire, url)
    assert isinstance(block, ToolUse)
    assert block.input == call.input


# A model that streams an emoji split over two chunks sends each half as its own JSON escape
# ("\ud83d", then "\ude00"); a caller's text can hold a lone surrogate too.
HALF = "half \ud83d"
LONE = "lone \udc80"


@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_lone_surrogates_go_back_to_the_provider_intact(wire: Wire, stream: bool) -> None:
    replies = [
        StreamReply(response=reply_text(HALF)) if stream else reply_text(HALF),
        reply_text("fine"),
    ]
    async with wire.open_fake(Script(replies)) as server:
        provider = wire.for_fake(server)
        async with provider.open():
            with trio.fail_after(10):
                if stream:
                    accumulator = ResponseAccumulator()
                    request = ChatRequest.of(LONE)
                    async with provider.chat_completion_stream(request) as batches:
                        async for batch in batches:
                            accumulator.feed(batch)
                    first = accumulator.finish()
                else:
                    first = await provider.chat_completion(ChatRequest.of(LONE))
                assert first.text == HALF
                history = [
                    Message.user(LONE),
                    Message.assistant(first.content),
                    Message.user("again " + HALF),
                ]
                second = await provider.chat_completion(ChatRequest.of(history))
    assert second.text == "fine"
    sent = server.script.requests[1].messages
    assert [m.text for m in sent] == [LONE, HALF, "again " + HALF]
    for request in server.requests:
        request.body.decode("utf-8")  # what went on the wire is valid UTF-8


async def test_bedrock_sends_a_deeply_nested_tool_result_as_text() -> None:
    from kova.providers.bedrock import BedrockConfig
    from kova.providers.bedrock._codec import BedrockCodec

    codec = BedrockCodec(BedrockConfig(region="us-east-1", model_id="m", json_tool_results=True))
    deep = _deep_object(5000)
    history = [
        Message.user("q"),
        Message.assistant([ToolUse(id="t1", name="f")]),
        Message.tool_results([ToolResult(tool_use_id="t1", content=deep)]),
    ]
    body = codec.encode(ChatRequest(messages=history), stream=False).body
    assert isinstance(body, dict)
    (block,) = body["messages"][2]["content"]
    assert block["toolResult"]["content"] == [{"text": deep}]


# -- transport: error bodies, content encodings, the response head ---------------------------


def _huge_error_body() -> Iterator[bytes]:
    """50 MB of an error page, produced as it is sent (the client stops reading early)."""
    yield b'{"error":{"message":"'
    for _ in range(800):
        yield b"x" * 65536


async def _fail(provider: Provider, *, stream: bool) -> BaseException:
    async with provider.open():
        with pytest.raises(KovaError) as info:
            if stream:
                async with provider.chat_completion_stream(ChatRequest.of("hi")) as batches:
                    async for _ in batches:
                        pass
            else:
                await provider.chat_completion(ChatRequest.of("hi"))
    return info.value


@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_a_huge_error_body_is_capped_and_classified_by_its_status(
    wire: Wire, stream: bool
) -> None:
    def reply(_: RecordedRequest) -> FakeStream:
        headers = {"content-type": "application/json"}
        return FakeStream(status=503, headers=headers, chunks=_huge_error_body())

    async with raw_server(reply) as (url, _):
        error = await _fail(wire.build(url), stream=stream)
    assert isinstance(error, ProviderOverloaded)
    assert error.status_code == 503
    assert len(str(error)) < 3 * 1024


@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
async def test_an_error_message_is_cut_to_the_documented_length(stream: bool) -> None:
    body = json.dumps({"error": {"message": "y" * 60_000, "type": "rate_limit_error"}})
    reply = FakeResponse(
        status=429, headers={"content-type": "application/json"}, body=body.encode()
    )
    async with raw_server(lambda _: reply) as (url, _):
        error = await _fail(WIRES[0].build(url), stream=stream)
    assert isinstance(error, RateLimited)
    assert isinstance(error, ProviderError)
    assert error.message == "y" * MAX_ERROR_MESSAGE_CHARS + "... (58000 more characters)"


@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_garbage_gzip_is_an_invalid_response_naming_the_decoding(
    wire: Wire, stream: bool
) -> None:
    content_type = wire.stream_type if stream else "application/json"
    headers = {"content-type": content_type, "content-encoding": "gzip"}
    reply = FakeResponse(headers=headers, body=b"\x1f\x8b\x08\x00 this is not gzip at all")
    async with raw_server(lambda _: reply) as (url, _):
        error = await _fail(wire.build(url), stream=stream)
    assert isinstance(error, InvalidResponse)
    assert "could not be decoded" in str(error)


@pytest.mark.parametrize("encoding", ["br", "zstd", "gzip, br", "x-made-up"])
@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_a_body_in_an_encoding_kova_cannot_decode_is_an_invalid_response(
    wire: Wire, stream: bool, encoding: str
) -> None:
    """Issue 43 item 7: httpx2 passes a body it has no decoder for through compressed, and a
    streamed one was "an incomplete stream"; it is a decoding error naming the encoding."""
    content_type = wire.stream_type if stream else "application/json"
    headers = {"content-type": content_type, "content-encoding": encoding}
    body = wire.raw_frame(b'{"garbage": "not compressed either"}') * 3
    reply = FakeResponse(headers=headers, body=body)
    async with raw_server(lambda _: reply) as (url, _):
        error = await _fail(wire.build(url), stream=stream)
    assert isinstance(error, InvalidResponse)
    assert "could not be decoded" in str(error)
    assert repr(encoding.split(",")[-1].strip()) in str(error)


async def _trickle_headers(stream: trio.SocketStream) -> None:
    """A server that answers a request with a status line, then a header every 0.5 s."""
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.receive_some(65536)
        await stream.send_all(b"HTTP/1.1 200 OK\r\n")
        for number in itertools.count():
            await trio.sleep(0.5)
            await stream.send_all(f"x-slow-{number}: 1\r\n".encode())


@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
@pytest.mark.parametrize("wire", WIRES, ids=WIRE_IDS)
async def test_a_trickled_response_head_is_bounded_by_the_timeout(
    wire: Wire, stream: bool, autojump_clock: object
) -> None:
    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(
            partial(trio.serve_tcp, _trickle_headers, 0, host="127.0.0.1")
        )
        port = listener.socket.getsockname()[1]
        start = trio.current_time()
        error = await _fail(wire.build(f"http://127.0.0.1:{port}", timeout=2.0), stream=stream)
        assert isinstance(error, KovaTimeoutError)
        assert "no response head within 2s" in str(error)
        assert trio.current_time() - start == pytest.approx(2.0, abs=0.01)
        nursery.cancel_scope.cancel()


async def test_an_openai_stream_tool_call_without_a_name_is_an_invalid_response() -> None:
    chunks = [
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1",'
        b'"type":"function","function":{"arguments":"{}"}}]}}]}\n\n',
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n',
        b"data: [DONE]\n\n",
    ]
    reply = FakeStream(headers={"content-type": "text/event-stream"}, chunks=chunks)
    async with raw_server(lambda _: reply) as (url, _):
        with pytest.raises(InvalidResponse, match="without a function name"):
            await _streamed(WIRES[0], url)


def _one_long_line() -> Iterator[bytes]:
    """20 MB of one NDJSON line that never ends, in 64 KiB writes."""
    for _ in range(20 * 16):
        yield b"a" * 65536


async def test_an_ollama_line_past_the_limit_is_an_invalid_response_naming_it() -> None:
    reply = FakeStream(headers={"content-type": "application/x-ndjson"}, chunks=_one_long_line())
    ollama = next(wire for wire in WIRES if wire.name == "ollama")
    async with raw_server(lambda _: reply) as (url, _):
        error = await _fail(ollama.build(url), stream=True)
    assert isinstance(error, InvalidResponse)
    assert "line size limit" in str(error)


@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
async def test_a_gzipped_answer_still_decodes(stream: bool) -> None:
    wire = WIRES[0]
    body = b"".join(wire.tool_stream('{"q":"ok"}')) if stream else wire.tool_body('{"q":"ok"}')
    packed = gzip.compress(body)
    headers = {
        "content-type": wire.stream_type if stream else "application/json",
        "content-encoding": "gzip",
    }
    # In several writes, so the decoder is fed piece by piece.
    pieces = [packed[i : i + 7] for i in range(0, len(packed), 7)]
    reply = FakeStream(headers=headers, chunks=pieces)
    async with raw_server(lambda _: reply) as (url, _):
        if stream:
            (block,) = await _streamed(wire, url)
            assert isinstance(block, ToolUse)
            call = block
        else:
            provider = wire.build(url)
            async with provider.open():
                (call,) = (await provider.chat_completion(ChatRequest.of("hi"))).tool_uses
    assert call.input == {"q": "ok"}
