"""What a server (or the text it sent) can do to a provider, on all five wire formats: it
fails that one request with a kova error, never anything else (issue 23)."""

from __future__ import annotations

import pytest
import trio

from kova import ChatRequest, InvalidResponse, Message, ToolResult, ToolUse
from kova.agent._accumulate import ResponseAccumulator
from kova.testing import Script, StreamReply, reply_text
from kova.testing._http_server import FakeResponse, FakeStream

from ._hostile import WIRE_IDS, WIRES, Wire, raw_server

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
