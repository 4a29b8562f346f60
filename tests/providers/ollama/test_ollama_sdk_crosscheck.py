"""Cross-checks with the official ``ollama`` package (a dev dependency), both on kova's fake
server: kova sends the body the SDK sends for the same conversation, and the SDK reads the
fake server's answers (JSON and NDJSON) to what kova reads.

The SDK's ``AsyncClient`` (httpx on anyio) runs natively under trio. It sends ``"tools": []``
when there are none; kova leaves the field out. The comparison treats the two alike.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

import pytest

from kova import (
    Image,
    InferenceConfig,
    Message,
    ResponseFormat,
    StopReason,
    Text,
    TextDelta,
    ThinkingDelta,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from kova.providers import ChatRequest, ModelResponse, ToolUseDelta, ToolUseStart, UsageEvent
from kova.providers.ollama import OllamaConfig, OllamaProvider, OllamaThink
from kova.testing import Script, StreamReply, open_ollama_server, reply_text

ollama = pytest.importorskip("ollama")

if TYPE_CHECKING:
    from collections.abc import Callable

IMAGE = b"PNG-fake-image-data"
PARAMETERS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = ToolDefinition(name="get_weather", description="Current weather", parameters=PARAMETERS)
SDK_WEATHER = {
    "type": "function",
    "function": {"name": "get_weather", "description": "Current weather", "parameters": PARAMETERS},
}
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}

# (kova request, kova config changes, SDK keyword arguments) per conversation.
Case = tuple[ChatRequest, dict[str, Any], dict[str, Any]]


def _text() -> Case:
    return (
        ChatRequest.of([Message.system("You are terse."), Message.user("Hello")]),
        {},
        {
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Hello"},
            ]
        },
    )


def _options() -> Case:
    return (
        ChatRequest.of(
            "Hello",
            config=InferenceConfig(
                temperature=0.2, top_p=0.9, max_tokens=64, stop_sequences=["END"]
            ),
        ),
        {"keep_alive": "10m", "extra_options": {"num_ctx": 8192, "seed": 7}},
        {
            "messages": [{"role": "user", "content": "Hello"}],
            "options": {
                "num_ctx": 8192,
                "seed": 7,
                "temperature": 0.2,
                "top_p": 0.9,
                "num_predict": 64,
                "stop": ["END"],
            },
            "keep_alive": "10m",
        },
    )


def _tools() -> Case:
    return (
        ChatRequest.of("Weather in Oslo?", tools=[WEATHER]),
        {},
        {"messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": [SDK_WEATHER]},
    )


def _round_trip() -> Case:
    history = [
        Message.user("Weather in Oslo?"),
        Message.assistant(
            [Text(text="Checking."), ToolUse(id="c1", name="get_weather", input={"city": "Oslo"})]
        ),
        Message.tool_results([ToolResult(tool_use_id="c1", content="4°C, rain")]),
    ]
    return (
        ChatRequest.of(history, tools=[WEATHER]),
        {},
        {
            "messages": [
                {"role": "user", "content": "Weather in Oslo?"},
                {
                    "role": "assistant",
                    "content": "Checking.",
                    "tool_calls": [
                        {"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
                    ],
                },
                {"role": "tool", "content": "4°C, rain", "tool_name": "get_weather"},
            ],
            "tools": [SDK_WEATHER],
        },
    )


def _thinking(level: OllamaThink, value: bool | str) -> Callable[[], Case]:
    def case() -> Case:
        return (
            ChatRequest.of("Think."),
            {"think": level},
            {"messages": [{"role": "user", "content": "Think."}], "think": value},
        )

    return case


def _structured() -> Case:
    return (
        ChatRequest.of(
            "JSON please", config=InferenceConfig(response_format=ResponseFormat.named("a", SCHEMA))
        ),
        {},
        {"messages": [{"role": "user", "content": "JSON please"}], "format": SCHEMA},
    )


def _images() -> Case:
    encoded = base64.b64encode(IMAGE).decode()
    return (
        ChatRequest.of(
            [
                Message.user(
                    [Text(text="What is this?"), Image(media_type="image/png", data=encoded)]
                )
            ]
        ),
        {},
        {"messages": [{"role": "user", "content": "What is this?", "images": [IMAGE]}]},
    )


CASES: dict[str, Callable[[], Case]] = {
    "text": _text,
    "options": _options,
    "tools": _tools,
    "tool-round-trip": _round_trip,
    "think-enabled": _thinking(OllamaThink.ENABLED, True),
    "think-disabled": _thinking(OllamaThink.DISABLED, False),
    "think-high": _thinking(OllamaThink.HIGH, "high"),
    "structured-output": _structured,
    "images": _images,
}


def _normalized(body: Any) -> Any:
    return {k: v for k, v in body.items() if not (k == "tools" and v == [])}


@pytest.mark.parametrize("stream", [False, True], ids=["chat", "stream"])
@pytest.mark.parametrize("case", list(CASES))
async def test_request_bodies_equal_the_sdks(case: str, stream: bool) -> None:
    request, changes, sdk_kwargs = CASES[case]()
    async with open_ollama_server(Script([reply_text("ok"), reply_text("ok")])) as server:
        provider = OllamaProvider(
            OllamaConfig(model="llama3.2", base_url=server.base_url, **changes)
        )
        async with provider.open():
            if stream:
                async with provider.chat_completion_stream(request) as batches:
                    async for _ in batches:
                        pass
            else:
                await provider.chat_completion(request)
        async with ollama.AsyncClient(host=server.base_url) as client:
            answer = await client.chat(model="llama3.2", stream=stream, **sdk_kwargs)
            if stream:
                async for _ in answer:
                    pass
    kova_request, sdk_request = server.requests
    assert kova_request.path == sdk_request.path == "/api/chat"
    assert _normalized(kova_request.json()) == _normalized(sdk_request.json())


FIRST = ModelResponse(
    content=(
        Text(text="Let me check the weather."),
        ToolUse(id="x", name="get_weather", input={"city": "Oslo", "days": 2}),
        ToolUse(id="y", name="get_weather", input={"city": "Rome"}),
    ),
    stop_reason=StopReason.TOOL_USE,
    usage=Usage(input_tokens=169, output_tokens=18),
    thinking="User wants two cities.",
)


@pytest.mark.parametrize("stream", [False, True], ids=["chat", "stream"])
async def test_the_sdk_reads_the_fake_server_as_kova_does(stream: bool) -> None:
    async with open_ollama_server(
        Script([StreamReply(response=FIRST, chunk_chars=5)] * 2)
    ) as server:
        provider = OllamaProvider(OllamaConfig(model="llama3.2", base_url=server.base_url))
        async with provider.open():
            if stream:
                events: list[Any] = []
                async with provider.chat_completion_stream(ChatRequest.of("q")) as batches:
                    async for batch in batches:
                        events.extend(batch)
                text = "".join(e.text for e in events if isinstance(e, TextDelta))
                thinking = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
                names = [e.name for e in events if isinstance(e, ToolUseStart)]
                arguments = [
                    json.loads(e.partial_json) for e in events if isinstance(e, ToolUseDelta)
                ]
                usage = [e for e in events if isinstance(e, UsageEvent)][-1].usage
            else:
                response = await provider.chat_completion(ChatRequest.of("q"))
                text, thinking = response.text, response.thinking or ""
                names = [u.name for u in response.tool_uses]
                arguments = [dict(u.input) for u in response.tool_uses]
                assert response.usage is not None
                usage = response.usage
        async with ollama.AsyncClient(host=server.base_url) as client:
            answer = await client.chat(
                model="llama3.2", messages=[{"role": "user", "content": "q"}], stream=stream
            )
            parts = [part async for part in answer] if stream else [answer]
    sdk_text = "".join(p.message.content or "" for p in parts)
    sdk_thinking = "".join(p.message.thinking or "" for p in parts)
    sdk_calls = [c.function for p in parts for c in p.message.tool_calls or []]
    last = parts[-1]
    assert text == sdk_text == "Let me check the weather."
    assert thinking == sdk_thinking == "User wants two cities."
    assert names == [c.name for c in sdk_calls] == ["get_weather", "get_weather"]
    assert arguments == [dict(c.arguments) for c in sdk_calls]
    assert last.done is True
    assert last.done_reason == "stop"
    assert (usage.input_tokens, usage.output_tokens) == (last.prompt_eval_count, last.eval_count)


async def test_embeddings_match_the_sdk() -> None:
    from kova.providers.ollama import OllamaEmbeddingConfig, OllamaEmbeddingProvider

    async with open_ollama_server(Script([])) as server:
        embedder = OllamaEmbeddingProvider(
            OllamaEmbeddingConfig(model="nomic-embed-text", base_url=server.base_url, dimensions=4)
        )
        async with embedder.open():
            vectors = await embedder.embed(["a", "b"])
        async with ollama.AsyncClient(host=server.base_url) as client:
            answer = await client.embed(model="nomic-embed-text", input=["a", "b"], dimensions=4)
    assert vectors == [list(v) for v in answer.embeddings]
    assert vectors.usage is not None
    assert vectors.usage.input_tokens == answer.prompt_eval_count
    assert server.requests[0].json() == server.requests[1].json()
