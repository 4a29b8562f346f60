"""GeminiProvider and GeminiEmbeddingProvider against the wire-level fake server on loopback."""

from __future__ import annotations

import json

import pytest
import trio

from kova import (
    InferenceConfig,
    Message,
    ProviderAuthError,
    RateLimited,
    ResponseFormat,
    StopReason,
    StreamError,
    Text,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolDefinition,
    ToolUse,
    Usage,
)
from kova.agent import AgentBuilder, RetryConfig, TurnCompleted
from kova.errors import ProviderOverloaded
from kova.providers import (
    ChatRequest,
    EmbeddingProvider,
    ErrorEvent,
    ModelResponse,
    Provider,
    ToolUseStart,
)
from kova.providers.gemini import (
    GeminiConfig,
    GeminiEmbeddingConfig,
    GeminiEmbeddingProvider,
    GeminiProvider,
)
from kova.providers.gemini._convert import FOREIGN_SIGNATURE, THOUGHT_SIGNATURE_KEY
from kova.providers.gemini._convert import SYNTHETIC_ID_KEY as SYNTHETIC
from kova.testing import (
    ErrorReply,
    FakeGeminiServer,
    Script,
    StreamReply,
    open_gemini_server,
    reply_text,
    reply_tool_calls,
)
from kova.tools import tool

KEY = "AIza-test"
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def provider_for(server: FakeGeminiServer, **kwargs: object) -> GeminiProvider:
    config = GeminiConfig(model="gemini-fake", base_url=server.base_url, api_key=KEY, **kwargs)  # type: ignore[arg-type]
    return GeminiProvider(config)


async def collect(provider: GeminiProvider, request: ChatRequest) -> list[object]:
    events: list[object] = []
    async with provider.chat_completion_stream(request) as batches:
        async for batch in batches:
            events.extend(batch)
    return events


def test_it_is_a_provider() -> None:
    provider = GeminiProvider(GeminiConfig(model="m", api_key="AIza-secret"))
    assert isinstance(provider, Provider)
    assert provider.name == "gemini"
    assert "AIza-secret" not in repr(provider)
    embedder = GeminiEmbeddingProvider(GeminiEmbeddingConfig(api_key="k"))
    assert isinstance(embedder, EmbeddingProvider)


async def test_non_streaming_request_and_response() -> None:
    usage = Usage(input_tokens=12, output_tokens=7, reasoning_tokens=4, cache_read_tokens=3)
    script = Script([reply_text("Sunny.", usage=usage, thinking="look it up")])
    async with open_gemini_server(script, api_key=KEY) as server:
        provider = provider_for(server, extra_headers={"x-goog-user-project": "p"})
        async with provider.open():
            response = await provider.chat_completion(
                ChatRequest(
                    messages=[Message.system("Be brief."), Message.user("Weather?")],
                    tools=[WEATHER],
                    config=InferenceConfig(max_tokens=64),
                )
            )
    assert response.text == "Sunny."
    assert response.thinking == "look it up"
    assert response.stop_reason == StopReason.END_TURN
    assert response.usage == usage
    (request,) = server.requests
    assert request.path == "/v1beta/models/gemini-fake:generateContent"
    assert request.headers["x-goog-api-key"] == KEY
    assert request.headers["x-goog-user-project"] == "p"
    body = request.json()
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}], "role": "user"}  # type: ignore[index,call-overload]
    assert body["generationConfig"] == {"maxOutputTokens": 64}  # type: ignore[index,call-overload]
    assert list(server.script.requests[0].messages) == [
        Message.system("Be brief."),
        Message.user("Weather?"),
    ]


async def test_streaming_text_thinking_tool_calls_and_usage() -> None:
    call = ToolUse(
        id="fc_1",
        name="get_weather",
        input={"city": "Paris"},
        provider_metadata={THOUGHT_SIGNATURE_KEY: "c2ln"},
    )
    reply = ModelResponse(
        content=(Text(text="Checking the weather."), call),
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=10, output_tokens=8, reasoning_tokens=3),
        thinking="plan",
    )
    async with open_gemini_server(Script([StreamReply(response=reply, chunk_chars=5)])) as server:
        provider = provider_for(server)
        async with provider.open():
            events = await collect(provider, ChatRequest.of("Weather in Paris?", tools=[WEATHER]))
    assert server.requests[0].path == "/v1beta/models/gemini-fake:streamGenerateContent"
    assert server.requests[0].query == {"alt": "sse"}
    assert [e.text for e in events if isinstance(e, ThinkingDelta)] == ["plan"]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Checking the weather."
    (start,) = [e for e in events if isinstance(e, ToolUseStart)]
    assert start.id == "fc_1"
    assert start.provider_metadata == {THOUGHT_SIGNATURE_KEY: "c2ln"}


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city name.
    """
    return {"Paris": "18°C, cloudy"}.get(city, "unknown")


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "non-streaming"])
async def test_agent_tool_loop_echoes_the_call_and_its_signature(stream: bool) -> None:
    call = ToolUse(
        id="fc_1",
        name="get_weather",
        input={"city": "Paris"},
        provider_metadata={THOUGHT_SIGNATURE_KEY: "CiIBVKhc7s+/="},
    )
    first = ModelResponse(content=(call,), stop_reason=StopReason.TOOL_USE, thinking="hmm")
    replies = [StreamReply(response=first) if stream else first, reply_text("18°C, cloudy.")]
    async with open_gemini_server(Script(replies)) as server:
        agent = AgentBuilder().provider(provider_for(server)).tool(get_weather).build()
        async with agent:
            if stream:
                async with agent.stream([Message.user("Paris?")]) as events:
                    async for _ in events:
                        pass
            else:
                await agent.run([Message.user("Paris?")])
    second = server.chat_requests()[1].json()
    assert second["contents"][1:] == [  # type: ignore[index,call-overload]
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {
                        "id": "fc_1",
                        "name": "get_weather",
                        "args": {"city": "Paris"},
                    },
                    "thoughtSignature": "CiIBVKhc7s+/=",
                }
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "fc_1",
                        "name": "get_weather",
                        "response": {"output": "18°C, cloudy"},
                    }
                }
            ],
        },
    ]


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "non-streaming"])
async def test_agent_tool_loop_echoes_a_signed_text_part(stream: bool) -> None:
    signed = Text(
        text="Let me check the weather in Paris.",
        provider_metadata={THOUGHT_SIGNATURE_KEY: "dGV4dC1zaWc="},
    )
    call = ToolUse(id="fc_1", name="get_weather", input={"city": "Paris"})
    first = ModelResponse(content=(signed, call), stop_reason=StopReason.TOOL_USE)
    replies = [StreamReply(response=first) if stream else first, reply_text("18°C, cloudy.")]
    async with open_gemini_server(Script(replies)) as server:
        agent = AgentBuilder().provider(provider_for(server)).tool(get_weather).build()
        async with agent:
            if stream:
                async with agent.stream([Message.user("Paris?")]) as events:
                    async for event in events:
                        if isinstance(event, TurnCompleted):
                            response = event.response
            else:
                response = await agent.run([Message.user("Paris?")])
    # The signature arrived on the text part (streamed: on its last piece) ...
    assert response.new_messages[0].content[0] == signed
    # ... and goes back to Gemini unchanged, on the same text part.
    second = server.chat_requests()[1].json()
    assert second["contents"][1]["parts"] == [  # type: ignore[index,call-overload]
        {"text": "Let me check the weather in Paris.", "thoughtSignature": "dGV4dC1zaWc="},
        {"functionCall": {"id": "fc_1", "name": "get_weather", "args": {"city": "Paris"}}},
    ]


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "non-streaming"])
async def test_agent_tool_loop_echoes_a_signed_thought_part(stream: bool) -> None:
    thought = Thinking(
        text="The user wants Paris weather.",
        provider_metadata={THOUGHT_SIGNATURE_KEY: "dGhvdWdodC1zaWc="},
    )
    call = ToolUse(id="fc_1", name="get_weather", input={"city": "Paris"})
    first = ModelResponse(content=(thought, call), stop_reason=StopReason.TOOL_USE)
    replies = [StreamReply(response=first) if stream else first, reply_text("18°C, cloudy.")]
    async with open_gemini_server(Script(replies)) as server:
        agent = AgentBuilder().provider(provider_for(server)).tool(get_weather).build()
        async with agent:
            if stream:
                async with agent.stream([Message.user("Paris?")]) as events:
                    async for event in events:
                        if isinstance(event, TurnCompleted):
                            response = event.response
            else:
                response = await agent.run([Message.user("Paris?")])
    # The signed thought is in the history, in its place ...
    assert response.new_messages[0].content[0] == thought
    # ... and goes back to Gemini on a thought part, with its text and signature.
    second = server.chat_requests()[1].json()
    assert second["contents"][1]["parts"] == [  # type: ignore[index,call-overload]
        {
            "text": "The user wants Paris weather.",
            "thought": True,
            "thoughtSignature": "dGhvdWdodC1zaWc=",
        },
        {"functionCall": {"id": "fc_1", "name": "get_weather", "args": {"city": "Paris"}}},
    ]


async def test_calls_without_ids_get_stable_ids_and_are_answered_by_name() -> None:
    # The fake sends the call without an id when its metadata says the id was kova's.
    call = ToolUse(
        id="x",
        name="get_weather",
        input={"city": "Paris"},
        provider_metadata={"gemini_synthetic_id": True},
    )
    replies = [ModelResponse(content=(call,), stop_reason=StopReason.TOOL_USE), reply_text("ok")]
    async with open_gemini_server(Script(replies)) as server:
        agent = AgentBuilder().provider(provider_for(server)).tool(get_weather).build()
        async with agent:
            await agent.run([Message.user("Paris?")])
    second = server.chat_requests()[1].json()
    parts = second["contents"][1]["parts"]  # type: ignore[index,call-overload]
    # No id goes back; and as "gemini-fake" counts as a Gemini 3 model, the unsigned step of
    # the current turn carries the documented placeholder signature.
    assert parts == [
        {
            "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
            "thoughtSignature": FOREIGN_SIGNATURE,
        }
    ]
    response = second["contents"][2]["parts"][0]["functionResponse"]  # type: ignore[index,call-overload]
    assert response == {"name": "get_weather", "response": {"output": "18°C, cloudy"}}


async def test_structured_output() -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}, "n": {"const": 1}},
        "required": ["answer"],
    }
    async with open_gemini_server(Script([reply_text('{"answer": "x"}')])) as server:
        provider = provider_for(server)
        async with provider.open():
            response = await provider.chat_completion(
                ChatRequest.of(
                    "q", config=InferenceConfig(response_format=ResponseFormat.named("a", schema))
                )
            )
    assert json.loads(response.text) == {"answer": "x"}
    generation = server.requests[0].json()["generationConfig"]  # type: ignore[index,call-overload]
    assert generation["responseMimeType"] == "application/json"
    assert generation["responseSchema"]["properties"]["n"] == {"enum": ["1"], "type": "STRING"}


async def test_rate_limit_with_retry_info() -> None:
    script = Script([ErrorReply(status_code=429, message="Quota exceeded", retry_after=37.5)])
    async with open_gemini_server(script) as server:
        provider = provider_for(server)
        async with provider.open():
            with pytest.raises(RateLimited) as caught:
                await provider.chat_completion(ChatRequest.of("q"))
    assert caught.value.retry_after == 37.5
    assert caught.value.status_code == 429
    assert caught.value.error_type == "RESOURCE_EXHAUSTED"


@pytest.mark.parametrize(
    ("status", "error_class"),
    [(503, ProviderOverloaded), (403, ProviderAuthError), (500, ProviderOverloaded)],
)
async def test_error_statuses(status: int, error_class: type[Exception]) -> None:
    async with open_gemini_server(Script([ErrorReply(status_code=status)])) as server:
        provider = provider_for(server)
        async with provider.open():
            with pytest.raises(error_class):
                async with provider.chat_completion_stream(ChatRequest.of("q")) as batches:
                    async for _ in batches:
                        pass


async def test_bad_key_is_an_auth_error_and_no_key_fails_before_sending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with open_gemini_server(Script([]), api_key="right") as server:
        provider = provider_for(server)
        async with provider.open():
            with pytest.raises(ProviderAuthError, match="API key not valid") as caught:
                await provider.chat_completion(ChatRequest.of("q"))
        assert "API key not valid" in str(caught.value)
        monkeypatch.delenv("GEMINI_API_KEY", raising=False)
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        keyless = GeminiProvider(GeminiConfig(model="m", base_url=server.base_url))
        async with keyless.open():
            with pytest.raises(ProviderAuthError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
                await keyless.chat_completion(ChatRequest.of("q"))
        assert len(server.requests) == 1


async def test_a_cut_stream_is_a_stream_error_after_its_text() -> None:
    reply = StreamReply(
        response=reply_text("a long answer that gets cut"), chunk_chars=4, cut_after=3
    )
    async with open_gemini_server(Script([reply])) as server:
        provider = provider_for(server)
        async with provider.open():
            texts: list[str] = []
            with pytest.raises(StreamError):
                async with provider.chat_completion_stream(ChatRequest.of("q")) as batches:
                    async for batch in batches:
                        texts.extend(e.text for e in batch if isinstance(e, TextDelta))
    assert "".join(texts) == "a long answe"


async def test_an_error_event_in_the_stream_is_classified() -> None:
    reply = StreamReply(
        response=reply_text("x"),
        events=(TextDelta(text="par"), ErrorEvent(message="overloaded", error_type="UNAVAILABLE")),
    )
    async with open_gemini_server(Script([reply])) as server:
        provider = provider_for(server)
        async with provider.open():
            with pytest.raises(ProviderOverloaded) as caught:
                async with provider.chat_completion_stream(ChatRequest.of("q")) as batches:
                    async for _ in batches:
                        pass
    assert caught.value.mid_stream
    assert caught.value.after_content
    assert caught.value.error_type == "UNAVAILABLE"  # the chunk's error.status


async def test_count_tokens_and_paged_model_list() -> None:
    models = tuple(f"gemini-{n}" for n in range(7))
    async with open_gemini_server(Script([]), models=models, page_size=3) as server:
        provider = provider_for(server)
        async with provider.open():
            tokens = await provider.count_tokens(ChatRequest.of("Hello there!"))
            listed = await provider.list_models()
    assert tokens > 0
    assert server.requests[0].path == "/v1beta/models/gemini-fake:countTokens"
    assert [m.id for m in listed] == list(models)
    assert [r.query.get("pageToken") for r in server.requests[1:]] == [None, "3", "6"]


async def test_embeddings_are_batched_and_ordered() -> None:
    texts = [f"text {n}" for n in range(7)]
    async with open_gemini_server(Script([]), api_key=KEY) as server:
        embedder = GeminiEmbeddingProvider(
            GeminiEmbeddingConfig(
                model="gemini-embedding-fake",
                base_url=server.base_url,
                api_key=KEY,
                batch_size=3,
                dimensions=16,
                task_type="RETRIEVAL_DOCUMENT",
            )
        )
        async with embedder.open():
            vectors = await embedder.embed(texts)
            single = await embedder.embed(["text 4"])
            with pytest.raises(TypeError):
                await embedder.embed("one string")  # type: ignore[arg-type]
    assert len(vectors) == 7
    assert all(len(v) == 16 for v in vectors)
    assert vectors[4] == single[0]
    assert vectors.usage is None
    assert embedder.dimensions == 16
    batches = [r.json() for r in server.requests]
    assert [len(b["requests"]) for b in batches] == [3, 3, 1, 1]  # type: ignore[index,call-overload,arg-type]
    first = batches[0]["requests"][0]  # type: ignore[index,call-overload]
    assert first == {
        "model": "models/gemini-embedding-fake",
        "content": {"parts": [{"text": "text 0"}]},
        "taskType": "RETRIEVAL_DOCUMENT",
        "outputDimensionality": 16,
    }
    assert server.requests[0].path == "/v1beta/models/gemini-embedding-fake:batchEmbedContents"


async def test_cancelling_a_call_abandons_it(autojump_clock: object) -> None:
    never = trio.Event()

    async def slow(_: object) -> ModelResponse:
        await never.wait()
        raise AssertionError  # pragma: no cover

    async with open_gemini_server(Script(slow)) as server:
        provider = provider_for(server)
        async with provider.open():
            with trio.move_on_after(5) as scope:
                await provider.chat_completion(ChatRequest.of("q"))
    assert scope.cancelled_caught
    assert trio.current_time() == 5


async def test_the_agent_waits_the_retry_delay_google_asks_for(autojump_clock: object) -> None:
    # RetryInfo.retryDelay in the 429 body is the retry-after: the retry waits exactly that.
    script = Script(
        [ErrorReply(status_code=429, message="Quota exceeded", retry_after=37.5), reply_text("ok")]
    )
    async with open_gemini_server(script) as server:
        retry = RetryConfig(max_retries=2, initial_backoff=1.0)
        agent = AgentBuilder().provider(provider_for(server)).retry_config(retry).build()
        async with agent:
            response = await agent.run([Message.user("q")])
    assert response.text == "ok"
    assert trio.current_time() == 37.5
    assert len(server.chat_requests()) == 2


async def test_an_overload_inside_the_stream_before_any_content_is_retried(
    autojump_clock: object,
) -> None:
    overloaded = StreamReply(
        response=reply_text("x"),
        events=(ErrorEvent(message="The model is overloaded", error_type="UNAVAILABLE"),),
    )
    async with open_gemini_server(Script([overloaded, reply_text("ok")])) as server:
        retry = RetryConfig(max_retries=2, initial_backoff=1.0)
        agent = AgentBuilder().provider(provider_for(server)).retry_config(retry).build()
        async with agent, agent.stream([Message.user("q")]) as events:
            completed = [event async for event in events if isinstance(event, TurnCompleted)]
    assert [event.response.text for event in completed] == ["ok"]
    assert trio.current_time() == 1.0
    assert len(server.chat_requests()) == 2


async def test_the_same_call_without_id_in_two_answers_gets_two_ids() -> None:
    # Kova's ids for id-less calls are stable for one answer (made from the call, its place
    # and the answer's responseId) and never repeat across answers.
    call = ToolUse(
        id="x", name="get_weather", input={"city": "Paris"}, provider_metadata={SYNTHETIC: True}
    )
    replies = [reply_tool_calls(call), reply_tool_calls(call), reply_text("done")]
    async with open_gemini_server(Script(replies)) as server:
        agent = AgentBuilder().provider(provider_for(server)).tool(get_weather).build()
        async with agent:
            response = await agent.run([Message.user("Paris, twice?")])
    uses = [b for m in response.new_messages for b in m.content if isinstance(b, ToolUse)]
    assert len(uses) == 2
    assert uses[0].id != uses[1].id
