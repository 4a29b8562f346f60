"""OpenAiCompatibleProvider against the wire-level fake server on loopback."""

from __future__ import annotations

import attrs
import pytest
import trio

from kova import (
    InferenceConfig,
    KovaError,
    KovaTimeoutError,
    Message,
    ProviderAuthError,
    ProviderErrorClass,
    ProviderOverloaded,
    RateLimited,
    Secret,
    StopReason,
    StreamError,
    TextDelta,
    ToolDefinition,
    ToolUse,
    Usage,
)
from kova.providers import ChatRequest, ModelInfo, ModelResponse, Provider, heuristic_count_tokens
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import (
    ErrorReply,
    Script,
    ScriptRequest,
    StreamReply,
    open_openai_server,
    reply_text,
    reply_tool_calls,
)

from .conftest import collect, fold, provider_for

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
HISTORY = [Message.system("Be brief."), Message.user("Weather in Oslo?")]
REQUEST = ChatRequest(messages=HISTORY)


async def stream_texts(provider: OpenAiCompatibleProvider, received: list[str]) -> None:
    """Stream :data:`REQUEST`, adding each text delta to ``received`` as it arrives."""
    async with provider.open(), provider.chat_completion_stream(REQUEST) as batches:
        async for batch in batches:
            received.extend(e.text for e in batch if isinstance(e, TextDelta))


def test_it_is_a_provider() -> None:
    provider = OpenAiCompatibleProvider(OpenAiConfig(model="m", api_key="k"))
    assert isinstance(provider, Provider)
    assert provider.name == "openai"


async def test_non_streaming_text_and_the_request_it_sent() -> None:
    usage = Usage(input_tokens=12, output_tokens=3, cache_read_tokens=8, reasoning_tokens=1)
    async with open_openai_server(Script([reply_text("Sunny.", usage=usage)])) as server:
        provider = provider_for(server, extra_headers={"OpenAI-Project": "proj"})
        async with provider.open():
            response = await provider.chat_completion(
                ChatRequest(
                    messages=HISTORY,
                    tools=[WEATHER],
                    config=InferenceConfig(max_tokens=64, temperature=0.1),
                )
            )
    assert response.text == "Sunny."
    assert response.stop_reason == StopReason.END_TURN
    assert response.usage == usage
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["openai-project"] == "proj"
    assert request.headers["content-type"] == "application/json"
    body = request.json()
    assert body["model"] == "gpt-fake"
    assert body["max_completion_tokens"] == 64
    assert body["temperature"] == 0.1
    assert body["tools"][0]["function"]["name"] == "get_weather"
    assert "stream" not in body
    # The script saw the conversation as kova messages.
    assert list(server.script.requests[0].messages) == HISTORY


async def test_non_streaming_tool_calls_and_thinking() -> None:
    reply = reply_tool_calls(("get_weather", {"city": "Oslo"}), ("get_time", {}), text="Checking")
    script = Script([attrs_evolve_thinking(reply, "think first")])
    async with open_openai_server(script) as server:
        provider = provider_for(server)
        async with provider.open():
            response = await provider.chat_completion(
                ChatRequest(messages=HISTORY, tools=[WEATHER], config=InferenceConfig())
            )
    assert response.text == "Checking"
    assert response.tool_uses == (
        ToolUse(id="call_1", name="get_weather", input={"city": "Oslo"}),
        ToolUse(id="call_2", name="get_time", input={}),
    )
    assert response.stop_reason == StopReason.TOOL_USE
    assert response.thinking == "think first"


def attrs_evolve_thinking(response: ModelResponse, thinking: str) -> ModelResponse:
    return attrs.evolve(response, thinking=thinking)


async def test_streaming_text_arrives_in_batches_with_stop_and_usage() -> None:
    text = "The weather in Oslo is sunny with a light breeze."
    usage = Usage(input_tokens=20, output_tokens=11)
    script = Script([StreamReply(response=reply_text(text, usage=usage), chunk_chars=5)])
    async with open_openai_server(script) as server:
        provider = provider_for(server)
        async with (
            provider.open(),
            provider.chat_completion_stream(REQUEST) as batches,
        ):
            events = await collect(batches)
    folded = fold(events)
    assert folded.text == text
    assert folded.stop == StopReason.END_TURN
    assert folded.usage == usage
    assert events[0] == TextDelta(text="The w")
    body = server.requests[0].json()
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


async def test_streaming_parallel_tool_calls_and_thinking() -> None:
    reply = attrs_evolve_thinking(
        reply_tool_calls(("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Bergen"})),
        "two cities",
    )
    async with open_openai_server(Script([StreamReply(response=reply, chunk_chars=4)])) as server:
        provider = provider_for(server)
        async with (
            provider.open(),
            provider.chat_completion_stream(
                ChatRequest(messages=HISTORY, tools=[WEATHER], config=InferenceConfig())
            ) as batches,
        ):
            folded = fold(await collect(batches))
    assert folded.thinking == "two cities"
    assert folded.tool_calls == (
        ("call_1", "get_weather", {"city": "Oslo"}),
        ("call_2", "get_weather", {"city": "Bergen"}),
    )
    assert folded.stop == StopReason.TOOL_USE


async def test_a_stream_cut_mid_way_raises_stream_error_after_the_partial_text() -> None:
    script = Script(
        [StreamReply(response=reply_text("abcdefghijklmnop"), chunk_chars=4, cut_after=2)]
    )
    received: list[str] = []
    async with open_openai_server(script) as server:
        provider = provider_for(server)

        with pytest.raises(StreamError):
            await stream_texts(provider, received)
    assert "".join(received) == "abcdefgh"


async def test_an_error_event_mid_stream_raises_the_classified_error_after_content() -> None:
    from kova.providers import ErrorEvent

    events = (TextDelta(text="par"), ErrorEvent(message="server melted", error_type="server_error"))
    script = Script([StreamReply(response=reply_text("unused"), events=events)])
    async with open_openai_server(script) as server:
        provider = provider_for(server)

        with pytest.raises(ProviderOverloaded, match="server melted") as info:
            await stream_texts(provider, [])
    assert info.value.error_type == "server_error"
    assert info.value.mid_stream
    assert info.value.after_content  # "par" reached the consumer: never retried
    assert not info.value.is_retryable


@pytest.mark.parametrize("stream", [False, True])
async def test_rate_limits_carry_retry_after(stream: bool) -> None:
    script = Script([ErrorReply(status_code=429, message="Slow down", retry_after=2)])
    async with open_openai_server(script) as server:
        provider = provider_for(server)
        async with provider.open():
            with pytest.raises(RateLimited, match="Slow down") as info:
                if stream:
                    async with provider.chat_completion_stream(REQUEST):
                        pass
                else:
                    await provider.chat_completion(REQUEST)
    assert info.value.retry_after == 2.0
    assert info.value.status_code == 429
    assert info.value.error_type == "requests"
    assert info.value.is_retryable


async def test_fractional_retry_after_uses_retry_after_ms() -> None:
    script = Script([ErrorReply(status_code=503, message="busy", retry_after=1.5)])
    async with open_openai_server(script) as server:
        provider = provider_for(server)
        async with provider.open():
            with pytest.raises(KovaError) as info:
                await provider.chat_completion(REQUEST)
    assert info.value.retry_after == 1.5  # type: ignore[attr-defined]
    assert info.value.error_class is ProviderErrorClass.OVERLOADED  # type: ignore[attr-defined]


async def test_auth_errors_and_insufficient_quota() -> None:
    script = Script(
        [
            ErrorReply(status_code=401, message="Incorrect API key provided"),
            ErrorReply(
                status_code=429, message="You exceeded your quota", error_type="insufficient_quota"
            ),
        ]
    )
    async with open_openai_server(script) as server:
        provider = provider_for(server)
        async with provider.open():
            with pytest.raises(ProviderAuthError, match="Incorrect API key"):
                await provider.chat_completion(REQUEST)
            with pytest.raises(KovaError, match="quota") as info:
                await provider.chat_completion(REQUEST)
    assert not info.value.is_retryable


async def test_list_models_and_count_tokens() -> None:
    async with open_openai_server(Script([]), models=["gpt-a", "gpt-b"]) as server:
        provider = provider_for(server)
        async with provider.open():
            models = await provider.list_models()
            tokens = await provider.count_tokens(
                ChatRequest(messages=HISTORY, tools=[WEATHER], config=InferenceConfig())
            )
    assert models == [
        ModelInfo(id="gpt-a", created=1_700_000_000, owned_by="kova-testing"),
        ModelInfo(id="gpt-b", created=1_700_000_000, owned_by="kova-testing"),
    ]
    assert server.requests[0].path == "/v1/models"
    assert tokens == heuristic_count_tokens(HISTORY, [WEATHER])


async def test_azure_paths_query_and_api_key_header() -> None:
    path = "/openai/deployments/my-gpt/chat/completions"
    async with open_openai_server(Script([reply_text("hi")])) as server:
        provider = provider_for(
            server,
            chat_completions_path=path,
            models_path="/openai/models",
            api_version="2024-10-21",
            api_key="azure-key",
        )
        async with provider.open():
            assert (await provider.chat_completion(REQUEST)).text == "hi"
            await provider.list_models()
    chat, models = server.requests
    assert chat.path == path
    assert chat.query == {"api-version": "2024-10-21"}
    assert chat.headers["api-key"] == "azure-key"
    assert "authorization" not in chat.headers
    assert (models.path, models.query) == ("/openai/models", {"api-version": "2024-10-21"})


async def test_without_a_key_no_auth_header_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with open_openai_server(Script([reply_text("hi")])) as server:
        provider = provider_for(server, api_key=None)
        async with provider.open():
            await provider.chat_completion(REQUEST)
    assert "authorization" not in server.requests[0].headers


def test_the_api_key_falls_back_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert OpenAiConfig(model="m").api_key == Secret("sk-env")
    assert OpenAiConfig(model="m", api_key="sk-explicit").api_key == Secret("sk-explicit")
    assert "sk-env" not in repr(OpenAiConfig(model="m"))


async def test_the_inference_model_overrides_the_config_model() -> None:
    async with open_openai_server(Script([reply_text("hi")])) as server:
        provider = provider_for(server)
        async with provider.open():
            await provider.chat_completion(
                ChatRequest(messages=HISTORY, tools=[], config=InferenceConfig(model="gpt-other"))
            )
    assert server.requests[0].json()["model"] == "gpt-other"


async def test_calls_outside_open_fail_clearly() -> None:
    provider = OpenAiCompatibleProvider(OpenAiConfig(model="m", base_url="http://127.0.0.1:9"))
    with pytest.raises(KovaError, match=r"provider\.open"):
        await provider.chat_completion(REQUEST)


async def test_a_silent_server_hits_the_read_timeout(autojump_clock: object) -> None:
    async def never(request: ScriptRequest) -> None:
        await trio.sleep_forever()

    async with open_openai_server(Script(never)) as server:  # type: ignore[arg-type]
        provider = provider_for(server, timeout=30.0)
        start = trio.current_time()
        async with provider.open():
            with pytest.raises(KovaTimeoutError):
                await provider.chat_completion(REQUEST)
        assert trio.current_time() - start == 30.0


async def test_leaving_a_stream_early_and_cancelling_keep_the_provider_usable() -> None:
    long = reply_text("x" * 400)
    script = Script(
        [
            StreamReply(response=long, chunk_chars=1),
            StreamReply(response=long, chunk_chars=1),
            reply_text("after"),
        ]
    )
    async with open_openai_server(script) as server:
        provider = provider_for(server)
        async with provider.open():
            async with provider.chat_completion_stream(REQUEST) as batches:
                async for _batch in batches:
                    break
            with trio.CancelScope() as scope:
                async with provider.chat_completion_stream(REQUEST) as batches:
                    async for _batch in batches:
                        scope.cancel()
            assert scope.cancelled_caught
            response = await provider.chat_completion(REQUEST)
    assert response.text == "after"


async def test_concurrent_calls_share_one_open_provider() -> None:
    def answer(request: ScriptRequest) -> object:
        return reply_text(f"echo {request.messages[-1].text}")

    async with open_openai_server(Script(answer)) as server:  # type: ignore[arg-type]
        provider = provider_for(server)
        results: dict[int, str] = {}

        async def ask(number: int) -> None:
            async with provider.open():
                response = await provider.chat_completion(
                    ChatRequest(
                        messages=[Message.user(str(number))], tools=[], config=InferenceConfig()
                    )
                )
                results[number] = response.text

        async with provider.open(), trio.open_nursery() as nursery:
            for number in range(8):
                nursery.start_soon(ask, number)
    assert results == {n: f"echo {n}" for n in range(8)}


async def test_a_stream_that_ends_without_done_or_finish_is_an_error() -> None:
    import httpx2

    from .wire_samples import chunk

    body = chunk({"role": "assistant", "content": ""}) + chunk({"content": "half an ans"})
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=body.encode()
        )

    provider = OpenAiCompatibleProvider(
        OpenAiConfig(model="m", api_key="k", base_url="http://api.test"),
        transport=httpx2.MockTransport(handler),
    )
    received: list[str] = []

    with pytest.raises(StreamError, match="incomplete"):
        await stream_texts(provider, received)
    assert received == ["half an ans"]
    assert str(seen[0].url) == "http://api.test/v1/chat/completions"


async def test_an_injected_client_gets_the_auth_and_extra_headers() -> None:
    import httpx2

    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, json={"object": "list", "data": []})

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(model="m", api_key="k", extra_headers={"x-extra": "1"}), client=client
        )
        async with provider.open():
            assert await provider.list_models() == []
        assert not client.is_closed
    assert seen[0].headers["authorization"] == "Bearer k"
    assert seen[0].headers["x-extra"] == "1"
    assert str(seen[0].url) == "https://api.openai.com/v1/models"


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
async def test_a_base_url_with_or_without_v1_reaches_the_same_paths(suffix: str) -> None:
    async with open_openai_server(Script([reply_text("hi")])) as server:
        provider = provider_for(server, base_url=server.base_url + suffix)
        async with provider.open():
            await provider.chat_completion(REQUEST)
            await provider.list_models()
    assert [r.path for r in server.requests] == ["/v1/chat/completions", "/v1/models"]


def test_reprs_never_show_the_key() -> None:
    from kova.providers.openai import OpenAiEmbeddingConfig, OpenAiEmbeddingProvider

    config = OpenAiConfig(model="m", api_key="sk-SECRET", extra_headers={"api-key": "sk-SECRET"})
    embedder = OpenAiEmbeddingProvider(OpenAiEmbeddingConfig(api_key="sk-SECRET"))
    for value in (config, OpenAiCompatibleProvider(config), embedder, embedder.config):
        assert "sk-SECRET" not in repr(value)


@pytest.mark.parametrize("stream", [False, True])
async def test_an_agent_echoes_reasoning_in_the_tool_loop_when_asked(stream: bool) -> None:
    from kova.agent import AgentBuilder
    from kova.tools import tool

    @tool
    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: the key.
        """
        return key.upper()

    first = attrs.evolve(reply_tool_calls(("lookup", {"key": "a"})), thinking="need lookup")
    script = Script([StreamReply(response=first), reply_text("A")])
    async with open_openai_server(script) as server:
        provider = provider_for(server, echo_reasoning=True)
        agent = AgentBuilder().provider(provider).tool(lookup).build()
        async with agent:
            if stream:
                async with agent.stream([Message.user("go")]) as events:
                    async for _event in events:
                        pass
            else:
                response = await agent.run([Message.user("go")])
                assert response.text == "A"
    second = server.chat_requests()[1].json()["messages"]
    assert second[1]["role"] == "assistant"
    assert second[1]["reasoning_content"] == "need lookup"
    assert second[1]["tool_calls"][0]["function"]["name"] == "lookup"
    assert second[2] == {"role": "tool", "tool_call_id": "call_1", "content": "A"}
