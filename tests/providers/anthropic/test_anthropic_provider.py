"""AnthropicProvider against the wire-level fake server on loopback."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio

from kova import _models as m
from kova._errors import (
    InvalidRequest,
    KovaError,
    ModelNotFound,
    ProviderAuthError,
    ProviderErrorClass,
    ProviderOverloaded,
    RateLimited,
    StreamError,
)
from kova.providers import ChatRequest, Provider
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.testing import (
    ErrorReply,
    FakeAnthropicServer,
    Script,
    ScriptRequest,
    StreamReply,
    reply_text,
    reply_tool_calls,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

MODEL = "claude-sonnet-4-6"
KEY = "sk-ant-test"
NO_CONFIG = m.InferenceConfig()
WEATHER = m.ToolDefinition(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


@asynccontextmanager
async def running(
    script: Script, *, config: dict[str, Any] | None = None, **server_args: Any
) -> AsyncIterator[tuple[FakeAnthropicServer, AnthropicProvider]]:
    server = FakeAnthropicServer(script=script, api_key=KEY, **server_args)
    async with trio.open_nursery() as nursery:
        base_url = await nursery.start(server.serve)
        settings = AnthropicConfig(model=MODEL, api_key=KEY, base_url=base_url, **(config or {}))
        provider = AnthropicProvider(settings)
        async with provider.open():
            yield server, provider
        nursery.cancel_scope.cancel()


async def collect(
    provider: AnthropicProvider, messages: Sequence[m.Message], tools: Sequence[m.ToolDefinition]
) -> list[Sequence[m.StreamEvent]]:
    batches = []
    async with provider.chat_completion_stream(
        ChatRequest(messages=messages, tools=tools, config=NO_CONFIG)
    ) as stream:
        async for batch in stream:
            batches.append(batch)
    return batches


def flat(batches: list[Sequence[m.StreamEvent]]) -> list[m.StreamEvent]:
    return [event for batch in batches for event in batch]


def test_provider_implements_the_protocol() -> None:
    provider = AnthropicProvider(AnthropicConfig(model=MODEL, api_key=KEY))
    assert isinstance(provider, Provider)
    assert provider.name == "anthropic"


async def test_chat_completion_sends_defaults_and_decodes_the_answer() -> None:
    usage = m.Usage(input_tokens=120, output_tokens=5, cache_read_tokens=100)
    async with running(Script([reply_text("Hello!", usage=usage)])) as (server, provider):
        response = await provider.chat_completion(
            ChatRequest(
                messages=[m.Message.system("Be brief."), m.Message.user("Hi")],
                tools=[WEATHER],
                config=NO_CONFIG,
            )
        )
    assert response.text == "Hello!"
    assert response.stop_reason == m.StopReason.END_TURN
    assert response.usage == usage
    [request] = server.requests
    assert request.path == "/v1/messages"
    assert request.headers["anthropic-version"] == "2026-10-21"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert "x-api-key" not in request.headers
    body = request.json()
    assert body == {
        "model": MODEL,
        "max_tokens": 16_384,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather for a city",
                "input_schema": WEATHER.parameters,
            }
        ],
        "thinking": {"type": "adaptive"},
        "cache_control": {"type": "ephemeral"},
    }


async def test_pinned_old_api_version_authenticates_with_x_api_key() -> None:
    config = {"api_version": "2023-06-01", "extra_headers": {"anthropic-beta": "b1"}}
    async with running(Script([reply_text("ok")]), config=config) as (server, provider):
        await provider.chat_completion(
            ChatRequest(messages=[m.Message.user("Hi")], tools=[], config=NO_CONFIG)
        )
    headers = server.requests[0].headers
    assert headers["anthropic-version"] == "2023-06-01"
    assert headers["x-api-key"] == KEY
    assert "authorization" not in headers
    assert headers["anthropic-beta"] == "b1"


async def test_api_key_falls_back_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    server = FakeAnthropicServer(script=Script([reply_text("ok")]), api_key=KEY)
    async with trio.open_nursery() as nursery:
        base_url = await nursery.start(server.serve)
        provider = AnthropicProvider(AnthropicConfig(model=MODEL, base_url=base_url))
        async with provider.open():
            response = await provider.chat_completion(
                ChatRequest(messages=[m.Message.user("Hi")], tools=[], config=NO_CONFIG)
            )
        nursery.cancel_scope.cancel()
    assert response.text == "ok"


async def test_missing_api_key_fails_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    provider = AnthropicProvider(AnthropicConfig(model=MODEL, base_url="http://127.0.0.1:9"))
    async with provider.open():
        with pytest.raises(ProviderAuthError, match="ANTHROPIC_API_KEY"):
            await provider.chat_completion(
                ChatRequest(messages=[m.Message.user("Hi")], tools=[], config=NO_CONFIG)
            )


async def test_calls_outside_open_fail_clearly() -> None:
    provider = AnthropicProvider(AnthropicConfig(model=MODEL, api_key=KEY))
    with pytest.raises(KovaError, match="not open"):
        await provider.chat_completion(
            ChatRequest(messages=[m.Message.user("Hi")], tools=[], config=NO_CONFIG)
        )


async def test_wrong_key_is_an_auth_error() -> None:
    async with running(Script([])) as (server, _):
        assert server.base_url is not None
        bad = AnthropicProvider(
            AnthropicConfig(model=MODEL, api_key="wrong", base_url=server.base_url)
        )
        async with bad.open():
            with pytest.raises(ProviderAuthError) as caught:
                await bad.chat_completion(
                    ChatRequest(messages=[m.Message.user("Hi")], tools=[], config=NO_CONFIG)
                )
    assert caught.value.error_type == "authentication_error"
    assert caught.value.error_class is ProviderErrorClass.AUTH_INVALID


async def test_streaming_text_and_tool_calls() -> None:
    reply = reply_tool_calls(
        m.ToolUse(id="toolu_01", name="get_weather", input={"city": "Paris"}),
        m.ToolUse(id="toolu_02", name="get_weather", input={"city": "Oslo, Norway"}),
        text="Let me check both.",
        usage=m.Usage(input_tokens=50, output_tokens=30, cache_creation_tokens=40),
    )
    async with running(Script([StreamReply(response=reply, chunk_chars=3)])) as (server, p):
        batches = await collect(p, [m.Message.user("weather?")], [WEATHER])
    events = flat(batches)
    assert "".join(e.text for e in events if isinstance(e, m.TextDelta)) == "Let me check both."
    starts = [e for e in events if isinstance(e, m.ToolUseStart)]
    assert [(s.id, s.name) for s in starts] == [("toolu_01", "get_weather")] * 1 + [
        ("toolu_02", "get_weather")
    ]
    for start, expected in zip(starts, ({"city": "Paris"}, {"city": "Oslo, Norway"}), strict=True):
        fragments = [
            e.partial_json
            for e in events
            if isinstance(e, m.ToolUseDelta) and e.index == start.index
        ]
        assert len(fragments) > 1  # arguments really arrive in pieces
        assert json.loads("".join(fragments)) == expected
        assert m.ToolUseEnd(index=start.index) in events
    assert events[-2:] == [
        m.StopEvent(stop_reason=m.StopReason.TOOL_USE),
        m.UsageEvent(usage=m.Usage(input_tokens=50, output_tokens=30, cache_creation_tokens=40)),
    ]
    assert server.requests[0].json()["stream"] is True  # type: ignore[index,call-overload]
    assert server.requests[0].headers["accept"] == "text/event-stream"


async def test_streaming_signed_thinking_reaches_the_stream_once() -> None:
    thinking = m.Thinking(text="The user wants a greeting; keep it short.", signature="c2lnbmVk")
    response = m.ModelResponse(
        content=(thinking, m.RedactedThinking(data="ZW5jcnlwdGVk"), m.Text(text="Hi there")),
        stop_reason=m.StopReason.END_TURN,
        usage=m.Usage(input_tokens=10, output_tokens=20, reasoning_tokens=12),
    )
    async with running(Script([StreamReply(response=response, chunk_chars=5)])) as (_, p):
        events = flat(await collect(p, [m.Message.user("hello")], []))
    deltas = [e.text for e in events if isinstance(e, m.ThinkingDelta)]
    assert "".join(deltas) == thinking.text
    assert len(deltas) > 1
    signed = [e.block for e in events if isinstance(e, m.SignedThinking)]
    assert signed == [thinking, m.RedactedThinking(data="ZW5jcnlwdGVk")]
    assert events[-1] == m.UsageEvent(usage=response.usage)  # type: ignore[arg-type]


async def test_non_streaming_thinking_blocks_are_kept_for_history() -> None:
    thinking = m.Thinking(text="Reasoning.", signature="c2ln")
    response = m.ModelResponse(
        content=(thinking, m.Text(text="Answer")), stop_reason=m.StopReason.END_TURN
    )
    async with running(Script([response])) as (_, provider):
        got = await provider.chat_completion(
            ChatRequest(messages=[m.Message.user("q")], tools=[], config=NO_CONFIG)
        )
    assert got.content == (thinking, m.Text(text="Answer"))
    assert got.thinking == "Reasoning."


@attrs.frozen
class ErrorCase:
    status: int
    error_type: str | None
    error: type[Exception]
    error_class: ProviderErrorClass
    retry_after: float | None = None


ERROR_CASES = [
    ErrorCase(400, None, InvalidRequest, ProviderErrorClass.INVALID_REQUEST),
    ErrorCase(401, None, ProviderAuthError, ProviderErrorClass.AUTH_INVALID),
    ErrorCase(403, None, ProviderAuthError, ProviderErrorClass.AUTH_FORBIDDEN),
    ErrorCase(404, None, ModelNotFound, ProviderErrorClass.NOT_FOUND),
    ErrorCase(429, None, RateLimited, ProviderErrorClass.RATE_LIMITED, retry_after=7.0),
    ErrorCase(500, None, ProviderOverloaded, ProviderErrorClass.OVERLOADED),
    ErrorCase(529, "overloaded_error", ProviderOverloaded, ProviderErrorClass.OVERLOADED),
]
EXPECTED_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda case: str(case.status))
async def test_error_statuses_are_classified(case: ErrorCase, stream: bool) -> None:
    reply = ErrorReply(
        status_code=case.status,
        message="scripted failure",
        error_type=case.error_type,
        retry_after=case.retry_after,
    )
    async with running(Script([reply])) as (_, provider):
        with pytest.raises(case.error) as caught:
            if stream:
                await collect(provider, [m.Message.user("Hi")], [])
            else:
                await provider.chat_completion(
                    ChatRequest(messages=[m.Message.user("Hi")], tools=[], config=NO_CONFIG)
                )
    error = caught.value
    assert error.error_class is case.error_class  # type: ignore[attr-defined]
    assert error.status_code == case.status  # type: ignore[attr-defined]
    assert error.error_type == EXPECTED_TYPES[case.status]  # type: ignore[attr-defined]
    assert error.message == "scripted failure"  # type: ignore[attr-defined]
    assert error.retry_after == case.retry_after  # type: ignore[attr-defined]
    assert error.is_retryable is (case.status in (429, 500, 529))  # type: ignore[attr-defined]


async def test_error_event_mid_stream_raises_after_the_earlier_events() -> None:
    events = (
        m.TextDelta(text="Hel"),
        m.TextDelta(text="lo"),
        m.ErrorEvent(message="Overloaded", error_type="overloaded_error"),
    )
    reply = StreamReply(response=reply_text("unused"), events=events)
    received: list[m.StreamEvent] = []
    async with running(Script([reply])) as (_, provider):
        with pytest.raises(ProviderOverloaded) as caught:
            async with provider.chat_completion_stream(
                ChatRequest(messages=[m.Message.user("Hi")], tools=[], config=NO_CONFIG)
            ) as stream:
                async for batch in stream:
                    received.extend(batch)
    # Classified as HTTP 529 is; after content, so never retried.
    assert caught.value.error_type == "overloaded_error"
    assert caught.value.message == "Overloaded"
    assert caught.value.mid_stream
    assert caught.value.after_content
    assert received == [m.TextDelta(text="Hel"), m.TextDelta(text="lo")]


async def test_cut_connection_is_a_stream_error_not_a_short_answer() -> None:
    reply = StreamReply(response=reply_text("Hello, world"), chunk_chars=4, cut_after=2)
    received: list[m.StreamEvent] = []
    async with running(Script([reply])) as (_, provider):
        with pytest.raises(StreamError):
            async with provider.chat_completion_stream(
                ChatRequest(messages=[m.Message.user("Hi")], tools=[], config=NO_CONFIG)
            ) as stream:
                async for batch in stream:
                    received.extend(batch)
    assert received == [m.TextDelta(text="Hell"), m.TextDelta(text="o, w")]
    assert not any(isinstance(e, m.StopEvent) for e in received)


async def test_leaving_the_stream_early_closes_it_and_the_provider_stays_usable() -> None:
    script = Script([StreamReply(response=reply_text("a" * 200), chunk_chars=1), reply_text("B")])
    async with running(script) as (_, provider):
        async with provider.chat_completion_stream(
            ChatRequest(messages=[m.Message.user("Hi")], tools=[], config=NO_CONFIG)
        ) as stream:
            async for batch in stream:
                assert batch
                break
        response = await provider.chat_completion(
            ChatRequest(messages=[m.Message.user("again")], tools=[], config=NO_CONFIG)
        )
    assert response.text == "B"


async def test_count_tokens_is_exact_and_sends_the_same_prompt() -> None:
    seen: list[tuple[list[m.Message], list[m.ToolDefinition]]] = []

    def count(messages: list[m.Message], tools: list[m.ToolDefinition]) -> int:
        seen.append((messages, tools))
        return 2095

    messages = [m.Message.system("sys"), m.Message.user("How many tokens?")]
    config = m.InferenceConfig(max_tokens=100, temperature=0.3)
    async with running(Script([]), count_tokens=count) as (server, provider):
        assert (
            await provider.count_tokens(
                ChatRequest(messages=messages, tools=[WEATHER], config=config)
            )
            == 2095
        )
    [request] = server.requests
    assert request.path == "/v1/messages/count_tokens"
    body = request.json()
    assert body == {
        "model": MODEL,
        "system": "sys",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "How many tokens?"}]}],
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather for a city",
                "input_schema": WEATHER.parameters,
            }
        ],
        "thinking": {"type": "adaptive"},
        "cache_control": {"type": "ephemeral"},
    }
    assert seen == [(messages, [WEATHER])]


async def test_list_models_follows_pages() -> None:
    models = [m.ModelInfo(id=f"claude-test-{n:04d}", display_name=f"T{n}") for n in range(2345)]
    async with running(Script([]), models=models) as (server, provider):
        listed = await provider.list_models()
    assert [model.id for model in listed] == [model.id for model in models]
    assert listed[0].display_name == "T0"
    assert listed[0].owned_by == "anthropic"
    queries = [request.query for request in server.requests]
    assert queries == [
        {"limit": "1000"},
        {"limit": "1000", "after_id": "claude-test-0999"},
        {"limit": "1000", "after_id": "claude-test-1999"},
    ]


async def test_finished_streams_leave_the_connection_reusable() -> None:
    replies = [StreamReply(response=reply_text("first answer")), reply_text("second")]
    async with running(Script(replies)) as (server, provider):
        await collect(provider, [m.Message.user("one")], [])
        await provider.chat_completion(
            ChatRequest(messages=[m.Message.user("two")], tools=[], config=NO_CONFIG)
        )
    first, second = server.requests
    assert first.connection == second.connection  # the stream was read to its end


async def test_a_stream_left_early_closes_its_connection() -> None:
    replies = [StreamReply(response=reply_text("x" * 100), chunk_chars=1), reply_text("next")]
    async with running(Script(replies)) as (server, provider):
        async with provider.chat_completion_stream(
            ChatRequest(messages=[m.Message.user("one")], tools=[], config=NO_CONFIG)
        ) as stream:
            await stream.__anext__()
        await provider.chat_completion(
            ChatRequest(messages=[m.Message.user("two")], tools=[], config=NO_CONFIG)
        )
    first, second = server.requests
    assert first.connection != second.connection


async def test_cancelling_a_call_abandons_the_request_and_the_provider_stays_usable() -> None:
    arrived = trio.Event()

    async def model(request: ScriptRequest) -> m.ModelResponse:
        if not arrived.is_set():
            arrived.set()
            await trio.sleep_forever()
        return reply_text("after the cancel")

    async with running(Script(model)) as (_, provider):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(provider.chat_completion, ChatRequest.of("slow", config=NO_CONFIG))
            await arrived.wait()
            nursery.cancel_scope.cancel()
        assert nursery.cancel_scope.cancelled_caught
        response = await provider.chat_completion(
            ChatRequest(messages=[m.Message.user("again")], tools=[], config=NO_CONFIG)
        )
    assert response.text == "after the cancel"
