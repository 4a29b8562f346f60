"""The Responses API provider against the fake Responses server on loopback."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from kova import (
    Image,
    InferenceConfig,
    InvalidRequest,
    Message,
    ProviderError,
    ProviderErrorClass,
    RateLimited,
    ResponseFormat,
    StopReason,
    StreamError,
    Text,
    TextDelta,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from kova.providers import ChatRequest, Provider
from kova.providers.openai import OpenAiResponsesConfig, OpenAiResponsesProvider
from kova.testing import (
    ErrorReply,
    Script,
    StreamReply,
    open_responses_server,
    reply_text,
    reply_tool_calls,
)

from ..openai.conftest import collect, fold
from .conftest import responses_provider

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
)
LOOSE = ToolDefinition(
    name="search",
    description="Search",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"],
    },
)
TWO_CALLS = reply_tool_calls(
    ("get_weather", {"city": "Paris"}),
    ("get_weather", {"city": "Oslo"}),
    thinking="Need live weather for both.",
    usage=Usage(input_tokens=88, output_tokens=151, reasoning_tokens=128, cache_read_tokens=64),
)


def test_it_is_a_provider() -> None:
    provider = OpenAiResponsesProvider(OpenAiResponsesConfig(model="m", api_key="k"))
    assert isinstance(provider, Provider)
    assert provider.name == "openai-responses"


def test_bad_config_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="base_url"):
        OpenAiResponsesConfig(model="m", base_url="api.openai.com")
    with pytest.raises(ValueError, match="max_output_tokens"):
        OpenAiResponsesConfig(model="m", max_output_tokens=8)
    with pytest.raises(ValueError, match="model"):
        OpenAiResponsesConfig(model="")
    with pytest.raises(TypeError, match="OpenAiResponsesConfig"):
        OpenAiResponsesProvider(object())  # type: ignore[arg-type]


async def test_text_and_the_stateless_request_it_sent() -> None:
    usage = Usage(input_tokens=12, output_tokens=3, cache_read_tokens=8, reasoning_tokens=1)
    async with open_responses_server([reply_text("Sunny.", usage=usage)]) as server:
        provider = responses_provider(
            server,
            reasoning_effort="low",
            reasoning_summary="auto",
            extra_headers={"OpenAI-Project": "proj"},
        )
        async with provider.open():
            response = await provider.chat_completion(
                ChatRequest(
                    messages=[Message.system("You are terse."), Message.user("Weather?")],
                    tools=[WEATHER, LOOSE],
                    config=InferenceConfig(max_tokens=64, temperature=0.1, top_p=0.5),
                )
            )
    assert response.text == "Sunny."
    assert response.stop_reason == StopReason.END_TURN
    assert response.usage == usage
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/responses")
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["openai-project"] == "proj"
    assert request.json() == {
        "model": "gpt-fake",
        "instructions": "You are terse.",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Weather?"}],
            }
        ],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Current weather for a city",
                "parameters": WEATHER.parameters,
                "strict": True,
            },
            {
                "type": "function",
                "name": "search",
                "description": "Search",
                "parameters": LOOSE.parameters,
                # Optional parameters stay optional: not strict.
                "strict": False,
            },
        ],
        "reasoning": {"effort": "low", "summary": "auto"},
        "max_output_tokens": 64,
        "temperature": 0.1,
        "top_p": 0.5,
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_parallel_calls_with_reasoning_stream_and_non_stream_alike(stream: bool) -> None:
    reply = StreamReply(response=TWO_CALLS, chunk_chars=5)
    async with open_responses_server([reply]) as server:
        provider = responses_provider(server)
        async with provider.open():
            request = ChatRequest(messages=[Message.user("Paris and Oslo?")], tools=[WEATHER])
            if stream:
                async with provider.chat_completion_stream(request) as batches:
                    folded = fold(await collect(batches))
                text, thinking, calls = folded.text, folded.thinking, folded.tool_calls
                stop, usage = folded.stop, folded.usage
            else:
                response = await provider.chat_completion(request)
                text, thinking = response.text, response.thinking
                calls = tuple((c.id, c.name, dict(c.input)) for c in response.tool_uses)
                stop, usage = response.stop_reason, response.usage
    assert text == ""
    assert thinking == "Need live weather for both."
    assert calls == (
        ("call_1", "get_weather", {"city": "Paris"}),
        ("call_2", "get_weather", {"city": "Oslo"}),
    )
    assert stop == StopReason.TOOL_USE
    assert usage == TWO_CALLS.usage


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_an_agent_sends_reasoning_back_unchanged_in_the_tool_loop(stream: bool) -> None:
    from kova.agent import AgentBuilder
    from kova.tools import tool

    @tool
    def get_weather(city: str) -> str:
        """Current weather.

        Args:
            city: the city.
        """
        return f"18°C in {city}"

    script = Script([StreamReply(response=TWO_CALLS), reply_text("Paris is warmer.")])
    async with open_responses_server(script) as server:
        provider = responses_provider(server, reasoning_effort="medium")
        agent = AgentBuilder().provider(provider).tool(get_weather).build()
        async with agent:
            if stream:
                async with agent.stream([Message.user("Paris and Oslo?")]) as events:
                    async for _event in events:
                        pass
            else:
                response = await agent.run([Message.user("Paris and Oslo?")])
                assert response.text == "Paris is warmer."
    first, second = (r.json() for r in server.responses_requests())
    items = second["input"]
    # The fake refuses what the real API refuses: a reasoning item without its blob or its
    # follower, a call without its output. It answered, so the pairing held.
    assert [item["type"] for item in items] == [
        "message",
        "reasoning",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    reasoning, call_a, call_b = items[1:4]
    assert reasoning["id"].startswith("rs_")
    assert reasoning["summary"] == [{"type": "summary_text", "text": "Need live weather for both."}]
    assert reasoning["encrypted_content"].startswith("gAAAA")
    assert set(reasoning) == {"id", "type", "summary", "encrypted_content"}
    assert call_a == {
        "type": "function_call",
        "id": call_a["id"],
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    }
    assert call_a["id"].startswith("fc_")
    assert call_b["id"].startswith("fc_")
    assert items[4] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": "18°C in Paris",
    }
    assert items[5]["call_id"] == "call_2"
    assert first["store"] is False
    assert second["store"] is False


async def test_the_fake_refuses_what_a_stateless_server_refuses() -> None:
    """The checks the tool-loop test relies on can fail."""
    async with open_responses_server([TWO_CALLS]) as server:
        provider = responses_provider(server)
        async with provider.open():
            response = await provider.chat_completion(ChatRequest.of("go", tools=[WEATHER]))
            call = response.tool_uses[0]
            meta = dict(call.provider_metadata or {})["openai_responses"]
            assert isinstance(meta, dict)
            results = Message.tool_results(
                [ToolResult(tool_use_id=c.id, content="x") for c in response.tool_uses]
            )
            base = [Message.user("go")]
            # The reasoning without its blob: 404 as OpenAI answers under store:false.
            blobless = {**meta, "reasoning": [{**meta["reasoning"][0], "encrypted_content": None}]}
            broken = attrs.evolve(call, provider_metadata={"openai_responses": blobless})
            history = [*base, Message.assistant([broken, response.tool_uses[1]]), results]
            with pytest.raises(ProviderError) as info:
                await provider.chat_completion(ChatRequest(messages=history, tools=[WEATHER]))
            assert info.value.status_code == 404
            # A call without its output.
            history = [*base, Message.assistant(response.content)]
            with pytest.raises(InvalidRequest, match="No tool output found"):
                await provider.chat_completion(ChatRequest(messages=history, tools=[WEATHER]))


async def test_reasoning_is_dropped_and_ids_stripped_for_another_endpoint_or_model() -> None:
    async with (
        open_responses_server([TWO_CALLS]) as first,
        open_responses_server([reply_text("ok"), reply_text("ok")]) as second,
    ):
        provider = responses_provider(first)
        async with provider.open():
            response = await provider.chat_completion(ChatRequest.of("go", tools=[WEATHER]))
        history = [
            Message.user("go"),
            Message.assistant(response.content),
            Message.tool_results(
                [ToolResult(tool_use_id=c.id, content="x") for c in response.tool_uses]
            ),
        ]
        elsewhere = responses_provider(second)
        async with elsewhere.open():
            await elsewhere.chat_completion(ChatRequest(messages=history, tools=[WEATHER]))
            await elsewhere.chat_completion(
                ChatRequest(messages=history, tools=[WEATHER], config=InferenceConfig(model="o3"))
            )
    for request in second.responses_requests():
        items = request.json()["input"]
        assert [item["type"] for item in items] == [
            "message",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
        ]
        assert all("id" not in item for item in items)
        assert "gAAAA" not in request.body.decode()


async def test_same_endpoint_dated_snapshot_keeps_the_reasoning() -> None:
    script = Script([TWO_CALLS, reply_text("ok")])
    async with open_responses_server(script, snapshot_suffix="-2026-03-05") as server:
        provider = responses_provider(server, model="gpt-5.4")
        async with provider.open():
            response = await provider.chat_completion(ChatRequest.of("go", tools=[WEATHER]))
            history = [
                Message.user("go"),
                Message.assistant(response.content),
                Message.tool_results(
                    [ToolResult(tool_use_id=c.id, content="x") for c in response.tool_uses]
                ),
            ]
            await provider.chat_completion(ChatRequest(messages=history, tools=[WEATHER]))
    items = server.responses_requests()[1].json()["input"]
    assert items[1]["type"] == "reasoning"


async def test_images_structured_output_and_assistant_text_history() -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    async with open_responses_server([reply_text('{"answer":"a cat"}')]) as server:
        provider = responses_provider(server)
        async with provider.open():
            history = [
                Message.user("Hello"),
                Message.assistant("Hi! Send a photo."),
                Message.user(
                    [
                        Text(text="What is this?"),
                        Image(media_type="image/png", data="iVBORw0K"),
                        Image(url="https://example.com/cat.jpg"),
                    ]
                ),
            ]
            response = await provider.chat_completion(
                ChatRequest(
                    messages=history,
                    config=InferenceConfig(response_format=ResponseFormat.named("answer", schema)),
                )
            )
    assert response.text == '{"answer":"a cat"}'
    body = server.requests[0].json()
    assert body["input"][1] == {
        "type": "message",
        "role": "assistant",
        "content": "Hi! Send a photo.",
    }
    assert body["input"][2]["content"] == [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0K", "detail": "auto"},
        {"type": "input_image", "image_url": "https://example.com/cat.jpg", "detail": "auto"},
    ]
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "answer", "schema": schema, "strict": True}
    }
    # The fake read the items back into the same kova history.
    assert list(server.script.requests[0].messages) == history


async def test_a_message_item_round_trips_with_its_id_and_text() -> None:
    script = Script([reply_text("First."), reply_text("Second.")])
    async with open_responses_server(script) as server:
        provider = responses_provider(server)
        async with provider.open():
            first = await provider.chat_completion(ChatRequest.of("one"))
            await provider.chat_completion(
                ChatRequest(
                    messages=[
                        Message.user("one"),
                        Message.assistant(first.content),
                        Message.user("two"),
                    ]
                )
            )
    replayed = server.requests[1].json()["input"][1]
    assert replayed == {
        "type": "message",
        "role": "assistant",
        "id": replayed["id"],
        "status": "completed",
        "content": [{"type": "output_text", "text": "First.", "annotations": []}],
    }
    assert replayed["id"].startswith("msg_")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_incomplete_maps_to_the_stop_reason(stream: bool) -> None:
    cut = attrs.evolve(reply_text("Half an ans"), stop_reason=StopReason.MAX_TOKENS)
    filtered = attrs.evolve(reply_text(""), stop_reason=StopReason.unknown("content_filter"))
    async with open_responses_server([cut, filtered]) as server:
        provider = responses_provider(server)
        stops = []
        async with provider.open():
            for _ in range(2):
                if stream:
                    async with provider.chat_completion_stream(ChatRequest.of("go")) as batches:
                        stops.append(fold(await collect(batches)).stop)
                else:
                    stops.append((await provider.chat_completion(ChatRequest.of("go"))).stop_reason)
    assert stops == [StopReason.MAX_TOKENS, StopReason.unknown("content_filter")]


async def test_http_errors_are_classified_with_retry_after() -> None:
    script = Script(
        [
            ErrorReply(status_code=429, message="Rate limit reached", retry_after=7),
            ErrorReply(status_code=429, message="quota", error_type="insufficient_quota"),
        ]
    )
    async with open_responses_server(script) as server:
        provider = responses_provider(server)
        async with provider.open():
            with pytest.raises(RateLimited) as info:
                await provider.chat_completion(ChatRequest.of("go"))
            assert info.value.retry_after == 7
            with pytest.raises(ProviderError) as quota:
                await provider.chat_completion(ChatRequest.of("go"))
            assert quota.value.error_class is ProviderErrorClass.OTHER


@pytest.mark.parametrize("shape", ["nested", "flat", "failed"])
async def test_both_error_event_shapes_and_failed_are_classified(shape: Any) -> None:
    from kova.providers import ErrorEvent

    events = (
        TextDelta(text="Par"),
        ErrorEvent(message="Rate limit reached", error_type="rate_limit_exceeded"),
    )
    before = StreamReply(response=reply_text(""), events=events[1:])
    after = StreamReply(response=reply_text(""), events=events)
    async with open_responses_server([before, after], stream_error_shape=shape) as server:
        provider = responses_provider(server)
        async with provider.open():
            with pytest.raises(RateLimited) as info:
                async with provider.chat_completion_stream(ChatRequest.of("go")) as batches:
                    await collect(batches)
            assert info.value.mid_stream
            assert info.value.is_retryable
            received: list[str] = []
            with pytest.raises(RateLimited) as late:
                async with provider.chat_completion_stream(ChatRequest.of("go")) as batches:
                    async for batch in batches:
                        received.extend(e.text for e in batch if isinstance(e, TextDelta))
            assert received == ["Par"]
            assert late.value.after_content
            assert not late.value.is_retryable


async def test_a_stream_cut_before_its_terminal_event_is_an_error() -> None:
    reply = StreamReply(response=reply_text("abcdefgh"), chunk_chars=2, cut_after=3)
    async with open_responses_server([reply]) as server:
        provider = responses_provider(server)
        async with provider.open():
            with pytest.raises(StreamError):
                async with provider.chat_completion_stream(ChatRequest.of("go")) as batches:
                    await collect(batches)


async def test_count_tokens_is_exact_and_list_models() -> None:
    async with open_responses_server([], models=("gpt-5.4", "gpt-fake")) as server:
        provider = responses_provider(server, reasoning_effort="low")
        request = ChatRequest(
            messages=[Message.system("Be brief."), Message.user("How many tokens is this?")],
            tools=[WEATHER],
            config=InferenceConfig(max_tokens=100, temperature=0.5),
        )
        async with provider.open():
            count = await provider.count_tokens(request)
            models = await provider.list_models()
    assert count > 0
    count_request, models_request = server.requests
    assert (count_request.method, count_request.path) == ("POST", "/v1/responses/input_tokens")
    body = count_request.json()
    # Only the fields input_tokens takes.
    assert set(body) == {"model", "instructions", "input", "tools", "reasoning"}
    assert (models_request.method, models_request.path) == ("GET", "/v1/models")
    assert [m.id for m in models] == ["gpt-5.4", "gpt-fake"]


async def test_azure_v1_and_dated_paths_with_the_api_key_header() -> None:
    async with open_responses_server([reply_text("a"), reply_text("b")]) as server:
        v1 = OpenAiResponsesConfig.azure_openai(server.base_url, deployment="my-gpt5", api_key="az")
        dated = OpenAiResponsesConfig.azure_openai(
            server.base_url, deployment="my-gpt5", api_key="az", api_version="2025-04-01-preview"
        )
        for config in (v1, dated):
            provider = OpenAiResponsesProvider(config)
            async with provider.open():
                await provider.chat_completion(ChatRequest.of("hi"))
    first, second = server.requests
    assert first.path == "/openai/v1/responses"
    assert first.query == {}
    assert (second.path, second.query) == (
        "/openai/responses",
        {"api-version": "2025-04-01-preview"},
    )
    for request in (first, second):
        assert request.headers["api-key"] == "az"
        assert "authorization" not in request.headers
        assert request.json()["model"] == "my-gpt5"


def test_azure_hosts_use_the_api_key_header_by_themselves() -> None:
    assert OpenAiResponsesConfig(
        model="d", base_url="https://r.openai.azure.com/openai/v1"
    ).uses_api_key_header
    assert not OpenAiResponsesConfig(model="d").uses_api_key_header


async def test_stop_sequences_are_refused_clearly() -> None:
    async with open_responses_server([]) as server:
        provider = responses_provider(server)
        async with provider.open():
            with pytest.raises(InvalidRequest, match="stop sequences"):
                await provider.chat_completion(
                    ChatRequest.of("hi", config=InferenceConfig(stop_sequences=["END"]))
                )
    assert server.requests == []


def test_other_providers_never_see_the_reasoning_items() -> None:
    from kova.providers.anthropic import AnthropicConfig
    from kova.providers.anthropic._codec import AnthropicCodec
    from kova.providers.openai import OpenAiConfig
    from kova.providers.openai._codec import OpenAiCodec
    from kova.providers.openai._responses_convert import decode_response

    body = {
        "status": "completed",
        "model": "gpt-5.4",
        "output": [
            {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAAASECRET"},
            {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "get_weather",
             "arguments": '{"city":"Paris"}'},
        ],
    }  # fmt: skip
    response = decode_response(body, endpoint="https://api.openai.com")
    history = [
        Message.user("go"),
        Message.assistant(response.content),
        Message.tool_results([ToolResult(tool_use_id="call_1", content="18")]),
    ]
    for codec in (
        OpenAiCodec(OpenAiConfig(model="m", api_key="k")),
        AnthropicCodec(AnthropicConfig(model="m", api_key="k")),
    ):
        sent = str(codec.encode(ChatRequest(messages=history), stream=False).body)
        assert "SECRET" not in sent
        assert "rs_1" not in sent
        assert "fc_1" not in sent
        assert "call_1" in sent


def test_a_history_with_reasoning_survives_to_dict_and_back() -> None:
    from kova import messages_from_dicts, messages_to_dicts
    from kova.providers.openai._responses_convert import decode_response

    body = {
        "status": "completed",
        "model": "gpt-5.4",
        "output": [
            {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAAA1"},
            {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
             "phase": "final_answer",
             "content": [{"type": "output_text", "text": "Hi", "annotations": []}]},
        ],
    }  # fmt: skip
    response = decode_response(body, endpoint="https://api.openai.com")
    message = Message.assistant(response.content)
    assert messages_from_dicts(messages_to_dicts([message])) == [message]
    assert response.content == (
        Text(
            text="Hi",
            provider_metadata={
                "openai_responses": {
                    "id": "msg_1",
                    "reasoning": [
                        {
                            "id": "rs_1",
                            "type": "reasoning",
                            "summary": [],
                            "encrypted_content": "gAAAA1",
                        }
                    ],
                    "phase": "final_answer",
                    "endpoint": "https://api.openai.com",
                    "model": "gpt-5.4",
                }
            },
        ),
    )


def test_a_failed_response_is_the_classified_error() -> None:
    from kova.providers.openai._responses_convert import decode_response

    body = {
        "status": "failed",
        "output": [],
        "error": {"code": "server_error", "message": "The model failed."},
    }
    with pytest.raises(ProviderError) as info:
        decode_response(body, endpoint="x")
    assert info.value.error_class is ProviderErrorClass.OVERLOADED


def test_strict_is_sent_only_for_schemas_that_are_already_strict() -> None:
    from kova.providers.openai._responses_convert import is_strict_schema

    closed: dict[str, Any] = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}},
            "place": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
        "required": ["tags", "place"],
        "additionalProperties": False,
    }
    assert is_strict_schema(closed)
    nested_open = {**closed, "properties": {**closed["properties"], "place": {"type": "object"}}}
    assert not is_strict_schema(nested_open)
    assert not is_strict_schema({**closed, "required": ["tags"]})
    assert not is_strict_schema({**closed, "oneOf": []})
    assert not is_strict_schema(LOOSE.parameters)


def test_tool_use_ids_of_calls_are_the_call_ids() -> None:
    from kova.providers.openai._responses_convert import decode_response

    body = {
        "status": "completed",
        "output": [
            {"id": "fc_9", "type": "function_call", "call_id": "call_Q", "name": "f",
             "arguments": "not json"},
        ],
    }  # fmt: skip
    (call,) = decode_response(body, endpoint="x").content
    assert isinstance(call, ToolUse)
    assert (call.id, call.raw_arguments) == ("call_Q", "not json")
