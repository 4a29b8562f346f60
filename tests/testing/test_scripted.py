"""ScriptedProvider / FunctionProvider: the Provider protocol driven by a Script."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from kova import (
    InferenceConfig,
    KovaConnectionError,
    Message,
    ProviderOverloaded,
    RateLimited,
    StreamError,
    TextDelta,
    ToolDefinition,
)
from kova.providers import (
    ChatRequest,
    ErrorEvent,
    ModelInfo,
    Provider,
    StopEvent,
    UsageEvent,
    heuristic_count_tokens,
)
from kova.testing import (
    ErrorReply,
    FunctionProvider,
    Reply,
    Script,
    ScriptedProvider,
    ScriptExhaustedError,
    ScriptRequest,
    StreamReply,
    reply_text,
    reply_tool_calls,
    stream_events,
)

HISTORY = [Message.user("hi")]
CONFIG = InferenceConfig(model="m")


async def collect(provider: Provider) -> list[list[object]]:
    async with provider.chat_completion_stream(
        ChatRequest(messages=HISTORY, tools=[], config=CONFIG)
    ) as batches:
        return [list(batch) async for batch in batches]


def test_implements_the_provider_protocol() -> None:
    assert isinstance(ScriptedProvider([]), Provider)
    assert isinstance(FunctionProvider(lambda request: reply_text("x")), Provider)


async def test_replies_in_order_and_records_requests() -> None:
    tools = [ToolDefinition(name="add")]
    provider = ScriptedProvider([reply_tool_calls(("add", {"a": 1})), reply_text("done")])
    first = await provider.chat_completion(
        ChatRequest(messages=HISTORY, tools=tools, config=CONFIG)
    )
    second = await provider.chat_completion(ChatRequest(messages=HISTORY, tools=[], config=CONFIG))
    assert first.tool_uses[0].name == "add"
    assert second.text == "done"
    assert provider.requests == [
        ScriptRequest(
            request=ChatRequest(messages=HISTORY, tools=tools, config=CONFIG), stream=False
        ),
        ScriptRequest(request=ChatRequest(messages=HISTORY, config=CONFIG), stream=False),
    ]
    assert provider.requests is provider.script.requests
    with pytest.raises(ScriptExhaustedError):
        await provider.chat_completion(ChatRequest(messages=HISTORY, tools=[], config=CONFIG))


async def test_error_reply_raises_classified_error_with_retry_after() -> None:
    provider = ScriptedProvider(
        [ErrorReply(status_code=429, retry_after=2.5), ErrorReply(status_code=529)]
    )
    with pytest.raises(RateLimited) as rate_limited:
        await provider.chat_completion(ChatRequest(messages=HISTORY, tools=[], config=CONFIG))
    assert rate_limited.value.retry_after == 2.5
    assert rate_limited.value.status_code == 429
    assert rate_limited.value.provider == "scripted"
    with pytest.raises(ProviderOverloaded):
        await provider.chat_completion(ChatRequest(messages=HISTORY, tools=[], config=CONFIG))


async def test_stream_error_reply_raises_on_entering() -> None:
    provider = ScriptedProvider([ErrorReply(status_code=429, retry_after=1.0)])
    with pytest.raises(RateLimited):
        async with provider.chat_completion_stream(
            ChatRequest(messages=HISTORY, tools=[], config=CONFIG)
        ):
            pytest.fail("entered a failed stream")


async def test_stream_yields_the_reply_events_in_batches() -> None:
    reply = reply_text("hello world, how are you")
    provider = ScriptedProvider([reply], batch_size=3)
    batches = await collect(provider)
    assert all(1 <= len(batch) <= 3 for batch in batches)
    assert [event for batch in batches for event in batch] == list(stream_events(reply))
    assert isinstance(batches[-1][-1], UsageEvent)
    assert provider.requests[0].stream is True


async def test_cut_stream_raises_stream_error_after_cut_events() -> None:
    reply = StreamReply(response=reply_text("abcdefghijklmnop"), chunk_chars=2, cut_after=5)
    provider = ScriptedProvider([reply], batch_size=2)
    received: list[object] = []
    with pytest.raises(StreamError):
        async with provider.chat_completion_stream(
            ChatRequest(messages=HISTORY, tools=[], config=CONFIG)
        ) as batches:
            async for batch in batches:
                received.extend(batch)
    assert received == list(stream_events(reply))[:5]


async def test_cut_reply_in_non_streaming_call_is_a_connection_error() -> None:
    provider = ScriptedProvider([StreamReply(response=reply_text("x"), cut_after=0)])
    with pytest.raises(KovaConnectionError):
        await provider.chat_completion(ChatRequest(messages=HISTORY, tools=[], config=CONFIG))


async def test_error_event_raises_after_the_events_before_it() -> None:
    events = (
        TextDelta(text="a"),
        TextDelta(text="b"),
        ErrorEvent(message="overloaded", error_type="overloaded_error"),
        StopEvent(stop_reason=reply_text("x").stop_reason),
    )
    provider = ScriptedProvider(
        [StreamReply(response=reply_text("ab"), events=events)], batch_size=4
    )
    received: list[object] = []
    with pytest.raises(StreamError) as error:
        async with provider.chat_completion_stream(
            ChatRequest(messages=HISTORY, tools=[], config=CONFIG)
        ) as batches:
            async for batch in batches:
                received.extend(batch)
    assert received == [TextDelta(text="a"), TextDelta(text="b")]
    assert error.value.error_type == "overloaded_error"


async def test_function_provider_computes_each_reply() -> None:
    async def model(request: ScriptRequest) -> Reply:
        await trio.lowlevel.checkpoint()
        return reply_text(f"{len(request.messages)} messages")

    provider = FunctionProvider(model)
    answer = await provider.chat_completion(
        ChatRequest(messages=[*HISTORY, Message.user("again")], tools=[], config=CONFIG)
    )
    assert answer.text == "2 messages"
    assert provider.name == "function"


async def test_latency_and_batch_delay_use_trio_time(autojump_clock: trio.testing.MockClock):
    provider = ScriptedProvider(
        Script([reply_text("abcdefgh" * 2)]), latency=2.0, batch_delay=0.5, batch_size=1
    )
    batches = await collect(provider)
    # 2 text deltas + stop + usage = 4 batches, and one last read that ends the stream
    assert len(batches) == 4
    assert trio.current_time() == 2.0 + 0.5 * 5


async def test_count_tokens_and_list_models() -> None:
    provider = ScriptedProvider([])
    tools = [ToolDefinition(name="lookup", description="find things")]
    assert await provider.count_tokens(
        ChatRequest(messages=HISTORY, tools=tools, config=CONFIG)
    ) == heuristic_count_tokens(HISTORY, tools)
    assert await provider.list_models() == [ModelInfo(id="scripted", owned_by="scripted")]


async def test_open_counts_active_blocks() -> None:
    provider = ScriptedProvider([])
    async with provider.open():
        async with provider.open():
            assert provider.open_count == 2
        assert provider.open_count == 1
    assert provider.open_count == 0
