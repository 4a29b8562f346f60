"""OllamaProvider and OllamaEmbeddingProvider against the wire-level fake server on loopback."""

from __future__ import annotations

import pytest

from kova import (
    InferenceConfig,
    Message,
    StopReason,
    StreamError,
    Text,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    Usage,
)
from kova.agent import AgentBuilder
from kova.errors import ModelNotFound, ProviderError, ProviderOverloaded, RateLimited
from kova.providers import (
    ChatRequest,
    EmbeddingProvider,
    ErrorEvent,
    ModelResponse,
    Provider,
    StopEvent,
    ToolUseStart,
    UsageEvent,
)
from kova.providers.ollama import (
    OllamaConfig,
    OllamaEmbeddingConfig,
    OllamaEmbeddingProvider,
    OllamaProvider,
    OllamaThink,
)
from kova.testing import (
    ErrorReply,
    FakeOllamaServer,
    Script,
    StreamReply,
    open_ollama_server,
    reply_text,
    reply_tool_calls,
)
from kova.tools import tool


def provider_for(server: FakeOllamaServer, **kwargs: object) -> OllamaProvider:
    return OllamaProvider(OllamaConfig(model="llama3.2", base_url=server.base_url, **kwargs))  # type: ignore[arg-type]


def test_it_is_a_provider() -> None:
    provider = OllamaProvider(OllamaConfig(model="m", base_url="http://x"))
    assert isinstance(provider, Provider)
    assert provider.name == "ollama"
    embedder = OllamaEmbeddingProvider(OllamaEmbeddingConfig(model="e", base_url="http://x"))
    assert isinstance(embedder, EmbeddingProvider)


async def test_non_streaming() -> None:
    usage = Usage(input_tokens=30, output_tokens=4)
    async with open_ollama_server(
        Script([reply_text("Hi!", usage=usage, thinking="greet")])
    ) as server:
        provider = provider_for(server, keep_alive="10m", think=OllamaThink.LOW)
        async with provider.open():
            response = await provider.chat_completion(
                ChatRequest.of("hello", config=InferenceConfig(max_tokens=5))
            )
    assert response.text == "Hi!"
    assert response.thinking == "greet"
    assert response.stop_reason == StopReason.END_TURN
    assert response.usage == usage
    (request,) = server.requests
    assert "authorization" not in request.headers
    body = request.json()
    assert body == {  # type: ignore[comparison-overlap]
        "model": "llama3.2",
        "messages": [{"role": "user", "content": "hello"}],
        "stream": False,
        "think": "low",
        "options": {"num_predict": 5},
        "keep_alive": "10m",
    }


async def test_streaming_thinking_text_and_calls() -> None:
    reply = ModelResponse(
        content=(
            Text(text="Let me look."),
            ToolUse(id="x", name="get_weather", input={"city": "Oslo"}),
        ),
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=9, output_tokens=7),
        thinking="plan it",
    )
    async with open_ollama_server(Script([StreamReply(response=reply, chunk_chars=3)])) as server:
        provider = provider_for(server)
        events: list[object] = []
        async with provider.open(), provider.chat_completion_stream(ChatRequest.of("q")) as batches:
            async for batch in batches:
                events.extend(batch)
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "plan it"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Let me look."
    (start,) = [e for e in events if isinstance(e, ToolUseStart)]
    assert start.name == "get_weather"
    assert events[-2:] == [
        StopEvent(stop_reason=StopReason.TOOL_USE),
        UsageEvent(usage=Usage(input_tokens=9, output_tokens=7)),
    ]
    assert server.requests[0].json()["stream"] is True  # type: ignore[index,call-overload]


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city name.
    """
    return {"Oslo": "4°C, rain"}.get(city, "unknown")


async def test_agent_tool_loop_matches_results_by_kova_ids() -> None:
    first = ModelResponse(
        content=(
            ToolUse(id="a", name="get_weather", input={"city": "Oslo"}),
            ToolUse(id="b", name="get_weather", input={"city": "Rome"}),
        ),
        stop_reason=StopReason.TOOL_USE,
    )
    async with open_ollama_server(
        Script([StreamReply(response=first), reply_text("done")])
    ) as server:
        agent = AgentBuilder().provider(provider_for(server)).tool(get_weather).build()
        async with agent:
            response = await agent.run([Message.user("Oslo and Rome?")])
    assert response.text == "done"
    second = server.chat_requests()[1].json()
    assert second["messages"][1:] == [  # type: ignore[index,call-overload]
        {
            "role": "assistant",
            "tool_calls": [
                {"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
                {"function": {"name": "get_weather", "arguments": {"city": "Rome"}}},
            ],
        },
        {"role": "tool", "content": "4°C, rain", "tool_name": "get_weather"},
        {"role": "tool", "content": "unknown", "tool_name": "get_weather"},
    ]
    # The fake server paired the results with the calls in order, by kova's stable ids.
    results = server.script.requests[1].messages[2].content
    uses = server.script.requests[1].messages[1].content
    assert [r.tool_use_id for r in results] == [u.id for u in uses]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("status", "error_class"),
    [(404, ModelNotFound), (429, RateLimited), (500, ProviderOverloaded), (400, ProviderError)],
)
async def test_http_errors_are_classified(status: int, error_class: type[Exception]) -> None:
    message = 'model "llama9" not found, try pulling it first'
    async with open_ollama_server(
        Script([ErrorReply(status_code=status, message=message)])
    ) as server:
        provider = provider_for(server)
        async with provider.open():
            with pytest.raises(error_class, match="llama9"):
                await provider.chat_completion(ChatRequest.of("q"))


async def test_error_line_and_cut_stream() -> None:
    error = StreamReply(
        response=reply_text("x"),
        events=(TextDelta(text="par"), ErrorEvent(message="runner crashed")),
    )
    cut = StreamReply(response=reply_text("a long answer"), chunk_chars=2, cut_after=3)
    async with open_ollama_server(Script([error, cut])) as server:
        provider = provider_for(server)
        async with provider.open():
            with pytest.raises(ProviderError, match="runner crashed") as caught:
                async with provider.chat_completion_stream(ChatRequest.of("q")) as batches:
                    async for _ in batches:
                        pass
            assert caught.value.mid_stream
            texts: list[str] = []
            with pytest.raises(StreamError):
                async with provider.chat_completion_stream(ChatRequest.of("q")) as batches:
                    async for batch in batches:
                        texts.extend(e.text for e in batch if isinstance(e, TextDelta))
    assert "".join(texts) == "a long"


async def test_list_models_and_heuristic_count() -> None:
    async with open_ollama_server(Script([]), models=("a:latest", "b:7b")) as server:
        provider = provider_for(server)
        async with provider.open():
            models = await provider.list_models()
            tokens = await provider.count_tokens(ChatRequest.of("hello world"))
    assert [m.id for m in models] == ["a:latest", "b:7b"]
    assert tokens > 0
    assert [r.path for r in server.requests] == ["/api/tags"]


async def test_embeddings_batched_in_order_with_usage() -> None:
    texts = [f"doc {n}" for n in range(5)]
    async with open_ollama_server(Script([])) as server:
        embedder = OllamaEmbeddingProvider(
            OllamaEmbeddingConfig(
                model="nomic-embed-text", base_url=server.base_url, batch_size=2, dimensions=4
            )
        )
        async with embedder.open():
            vectors = await embedder.embed(texts)
            again = await embedder.embed(["doc 3"])
            with pytest.raises(TypeError):
                await embedder.embed("one")  # type: ignore[arg-type]
    assert len(vectors) == 5
    assert vectors[3] == again[0]
    assert all(len(v) == 4 for v in vectors)
    assert vectors.usage is not None
    assert vectors.usage.input_tokens == 5
    bodies = [r.json() for r in server.requests]
    assert [b["input"] for b in bodies[:3]] == [["doc 0", "doc 1"], ["doc 2", "doc 3"], ["doc 4"]]  # type: ignore[index,call-overload]
    assert bodies[0] == {"model": "nomic-embed-text", "input": ["doc 0", "doc 1"], "dimensions": 4}


async def test_the_same_call_in_two_answers_gets_two_ids() -> None:
    # Ollama sends no ids: kova's ids are stable for one answer (made from the call, its
    # place and the answer's created_at) and never repeat across answers, so the history can
    # move to a provider that wants unique tool-use ids.
    calls = [reply_tool_calls(("get_weather", {"city": "Oslo"}))] * 2
    async with open_ollama_server(Script([*calls, reply_text("done")])) as server:
        agent = AgentBuilder().provider(provider_for(server)).tool(get_weather).build()
        async with agent:
            response = await agent.run([Message.user("Oslo, twice?")])
    uses = [b for m in response.new_messages for b in m.content if isinstance(b, ToolUse)]
    assert [use.name for use in uses] == ["get_weather", "get_weather"]
    assert uses[0].id != uses[1].id
    results = [b for m in response.new_messages for b in m.content if isinstance(b, ToolResult)]
    assert [r.tool_use_id for r in results] == [u.id for u in uses]
