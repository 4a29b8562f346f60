"""Cross-checks with the official ``openai`` package (a dev dependency), both on the fake
server: kova sends the request body the SDK sends, and the SDK reads the fake server's
answers (JSON and SSE) exactly as kova does, so the fake is faithful.

The SDK (3.x, on httpx2 and anyio) runs natively under trio.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import attrs
import openai
import pytest

from kova import (
    Audio,
    Document,
    File,
    Image,
    InferenceConfig,
    Message,
    ResponseFormat,
    StopReason,
    Text,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from kova.providers import ChatRequest, ModelResponse
from kova.providers.openai import (
    OpenAiCompatibleProvider,
    OpenAiConfig,
    OpenAiEmbeddingConfig,
    OpenAiEmbeddingProvider,
)
from kova.testing import (
    ErrorReply,
    FakeOpenAiServer,
    Script,
    StreamReply,
    open_openai_server,
    reply_text,
    reply_tool_calls,
)

from .conftest import Folded, collect, fold, provider_for

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
KOVA_HISTORY = [
    Message.system("You are terse."),
    Message.user([Text(text="What's here?"), Image(media_type="image/png", data="iVBORw0K")]),
    Message.assistant(
        [
            Text(text="Let me check."),
            ToolUse(id="call_a", name="get_weather", input={"city": "Paris"}),
            ToolUse(id="call_b", name="get_weather", input={"city": "Oslo"}),
        ]
    ),
    Message.tool_results(
        [
            ToolResult(tool_use_id="call_a", content="18°C"),
            ToolResult(tool_use_id="call_b", content="3°C"),
        ]
    ),
    Message.user("Thanks. Which is warmer?"),
]
KOVA_TOOLS = [
    ToolDefinition(name="get_weather", description="Current weather", parameters=WEATHER_PARAMETERS)
]
KOVA_SETTINGS = InferenceConfig(
    model="gpt-4.1",
    max_tokens=256,
    temperature=0.2,
    top_p=0.9,
    stop_sequences=["END", "STOP"],
    response_format=ResponseFormat.named("answer", SCHEMA),
)

# The same request, written the way an SDK user writes it.
SDK_MESSAGES: list[Any] = [
    {"role": "system", "content": "You are terse."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What's here?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
        ],
    },
    {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_a", "content": "18°C"},
    {"role": "tool", "tool_call_id": "call_b", "content": "3°C"},
    {"role": "user", "content": "Thanks. Which is warmer?"},
]
SDK_PARAMS: dict[str, Any] = {
    "model": "gpt-4.1",
    "messages": SDK_MESSAGES,
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather",
                "parameters": WEATHER_PARAMETERS,
            },
        }
    ],
    "max_completion_tokens": 256,
    "temperature": 0.2,
    "top_p": 0.9,
    "stop": ["END", "STOP"],
    "response_format": {
        "type": "json_schema",
        "json_schema": {"name": "answer", "strict": True, "schema": SCHEMA},
    },
    "reasoning_effort": "low",
}


# The SDK stops reading at [DONE] (or an error) without closing its own async generators
# (openai._streaming), which trio reports as ResourceWarnings when they are collected. That is
# the SDK's business, not the fake server's: kova's own streams are checked warning-free in
# test_client.py.
sdk_stream_warnings = pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <async_generator object:pytest.PytestUnraisableExceptionWarning"
)


def sdk_client(server: FakeOpenAiServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="sk-test", max_retries=0)


def assert_same_on_shared_fields(kova_body: Any, sdk_body: Any) -> None:
    shared = set(kova_body) & set(sdk_body)
    for key in sorted(shared):
        assert kova_body[key] == sdk_body[key], f"{key} differs"
    # Nothing set on one side only: both were asked for the same settings.
    assert set(kova_body) == set(sdk_body)


@sdk_stream_warnings
@pytest.mark.parametrize("stream", [False, True])
async def test_kova_sends_the_body_the_official_sdk_sends(stream: bool) -> None:
    script = Script([reply_text("Paris."), reply_text("Paris.")])
    async with open_openai_server(script) as server:
        provider = provider_for(server, reasoning_effort="low")
        async with provider.open():
            if stream:
                async with provider.chat_completion_stream(
                    ChatRequest(messages=KOVA_HISTORY, tools=KOVA_TOOLS, config=KOVA_SETTINGS)
                ) as batches:
                    await collect(batches)
            else:
                await provider.chat_completion(
                    ChatRequest(messages=KOVA_HISTORY, tools=KOVA_TOOLS, config=KOVA_SETTINGS)
                )
        async with sdk_client(server) as client:
            if stream:
                response = await client.chat.completions.create(
                    **SDK_PARAMS, stream=True, stream_options={"include_usage": True}
                )
                async for _chunk in response:
                    pass
            else:
                await client.chat.completions.create(**SDK_PARAMS)
    kova_request, sdk_request = server.requests
    assert (kova_request.path, kova_request.method) == (sdk_request.path, sdk_request.method)
    assert_same_on_shared_fields(kova_request.json(), sdk_request.json())
    assert kova_request.headers["authorization"] == sdk_request.headers["authorization"]
    assert kova_request.headers["content-type"] == sdk_request.headers["content-type"]


async def sdk_fold(client: openai.AsyncOpenAI, stream: bool) -> Folded:
    """What the official SDK reads, in the same shape as kova's fold."""
    if not stream:
        completion = await client.chat.completions.create(
            model="gpt-fake", messages=[{"role": "user", "content": "hi"}]
        )
        message = completion.choices[0].message
        calls = tuple(
            (call.id, call.function.name, json.loads(call.function.arguments))
            for call in message.tool_calls or []
            if call.type == "function"
        )
        finish = completion.choices[0].finish_reason
        usage = completion.usage
        thinking = getattr(message, "reasoning_content", None) or ""
        text = message.content or ""
    else:
        chunks = await client.chat.completions.create(
            model="gpt-fake",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        text = thinking = ""
        parts: dict[int, list[str]] = {}
        finish = None
        usage = None
        async for chunk in chunks:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                delta = choice.delta
                text += delta.content or ""
                thinking += getattr(delta, "reasoning_content", None) or ""
                for call in delta.tool_calls or []:
                    entry = parts.setdefault(call.index, ["", "", ""])
                    if call.id:
                        entry[0] = call.id
                    if call.function and call.function.name:
                        entry[1] = call.function.name
                    if call.function and call.function.arguments:
                        entry[2] += call.function.arguments
                finish = choice.finish_reason or finish
        calls = tuple(
            (call_id, name, json.loads(arguments or "{}"))
            for call_id, name, arguments in (parts[i] for i in sorted(parts))
        )
    stop = {
        "stop": StopReason.END_TURN,
        "tool_calls": StopReason.TOOL_USE,
        "length": StopReason.MAX_TOKENS,
    }.get(finish or "", StopReason.unknown(finish or ""))
    kova_usage = None
    if usage is not None:
        details = usage.prompt_tokens_details
        completion_details = usage.completion_tokens_details
        kova_usage = Usage(
            input_tokens=usage.prompt_tokens,
            output_tokens=usage.completion_tokens,
            total_tokens=usage.total_tokens,
            cache_read_tokens=(details.cached_tokens or 0) if details else 0,
            reasoning_tokens=(completion_details.reasoning_tokens or 0)
            if completion_details
            else 0,
        )
    return Folded(text=text, thinking=thinking, tool_calls=calls, stop=stop, usage=kova_usage)


REPLIES = {
    "text": reply_text(
        "Bonjour, ça va? 🌍 " * 3,
        usage=Usage(input_tokens=30, output_tokens=9, cache_read_tokens=16, reasoning_tokens=4),
    ),
    # Ids of their own: a script renumbers the call_N ids of a reply it serves again.
    "tool_calls": reply_tool_calls(
        ToolUse(id="call_paris", name="get_weather", input={"city": "Paris"}),
        ToolUse(id="call_oslo", name="get_time", input={"zone": "Europe/Oslo", "24h": True}),
        text="Checking both.",
    ),
    "thinking": attrs.evolve(reply_text("42"), thinking="Six times seven."),
    "max_tokens": attrs.evolve(reply_text("cut sho"), stop_reason=StopReason.MAX_TOKENS),
}


@sdk_stream_warnings
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("name", sorted(REPLIES))
async def test_the_official_sdk_reads_what_kova_reads(name: str, stream: bool) -> None:
    reply = StreamReply(response=REPLIES[name], chunk_chars=3)
    async with open_openai_server(Script([reply, reply])) as server:
        provider = provider_for(server)
        async with provider.open():
            if stream:
                async with provider.chat_completion_stream(
                    ChatRequest(messages=[Message.user("hi")], tools=[], config=InferenceConfig())
                ) as batches:
                    kova = fold(await collect(batches))
            else:
                response = await provider.chat_completion(
                    ChatRequest(messages=[Message.user("hi")], tools=[], config=InferenceConfig())
                )
                kova = Folded(
                    text=response.text,
                    thinking=response.thinking or "",
                    tool_calls=tuple((c.id, c.name, dict(c.input)) for c in response.tool_uses),
                    stop=response.stop_reason,
                    usage=response.usage,
                )
        async with sdk_client(server) as client:
            sdk = await sdk_fold(client, stream)
    assert sdk == kova
    expected = REPLIES[name]
    assert kova.text == expected.text
    assert kova.stop == expected.stop_reason
    assert kova.usage == expected.usage
    assert kova.tool_calls == tuple((c.id, c.name, dict(c.input)) for c in expected.tool_uses)


async def test_the_official_sdk_sees_the_error_status_body_and_retry_after() -> None:
    script = Script([ErrorReply(status_code=429, message="Rate limit reached", retry_after=7)])
    async with open_openai_server(script) as server, sdk_client(server) as client:
        with pytest.raises(openai.RateLimitError) as info:
            await client.chat.completions.create(
                model="gpt-fake", messages=[{"role": "user", "content": "hi"}]
            )
    assert info.value.status_code == 429
    assert info.value.code == "rate_limit_exceeded"
    assert "Rate limit reached" in info.value.message
    assert info.value.response.headers["retry-after"] == "7"


@sdk_stream_warnings
async def test_the_official_sdk_fails_on_a_cut_stream() -> None:
    script = Script([StreamReply(response=reply_text("abcdefgh"), chunk_chars=2, cut_after=2)])
    async with open_openai_server(script) as server, sdk_client(server) as client:
        chunks = await client.chat.completions.create(
            model="gpt-fake", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        text = ""
        with pytest.raises(openai.APIError):
            async for chunk in chunks:
                text += chunk.choices[0].delta.content or "" if chunk.choices else ""
    assert text == "abcd"


async def test_embeddings_match_the_official_sdk_which_asks_for_base64() -> None:
    async with open_openai_server(Script([])) as server:
        provider = OpenAiEmbeddingProvider(
            OpenAiEmbeddingConfig(base_url=server.base_url, api_key="sk-test", dimensions=6)
        )
        async with provider.open():
            kova_vectors = await provider.embed(["one", "two"])
        async with sdk_client(server) as client:
            result = await client.embeddings.create(
                model="text-embedding-3-small", input=["one", "two"], dimensions=6
            )
    sdk_vectors = [item.embedding for item in sorted(result.data, key=lambda d: d.index)]
    assert server.requests[1].json()["encoding_format"] == "base64"
    assert len(sdk_vectors) == 2
    for ours, theirs in zip(kova_vectors, sdk_vectors, strict=True):
        assert ours == pytest.approx(theirs, abs=1e-6)  # base64 carries float32


async def test_text_parts_tool_result_parts_and_arguments_go_as_the_sdk_sends_them() -> None:
    """Pins three things the SDK does: several text blocks stay separate content parts, a
    tool result with several text parts is a parts array, and an assistant tool call's
    ``arguments`` are echoed byte for byte as the model sent them."""
    raw_arguments = '{"path": "caf\\u00e9.py"}'  # the model's own spacing and escape
    answer = {
        "id": "c",
        "object": "chat.completion",
        "model": "gpt-4.1",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "read", "arguments": raw_arguments},
                        }
                    ],
                },
            }
        ],
    }
    from kova.providers.openai._convert import decode_response

    call = decode_response(answer).content[0]
    history = [
        Message.user([Text(text="Here is the file:"), Text(text="print(1)")]),
        Message.assistant([call]),
        Message.tool_results(
            [ToolResult(tool_use_id="call_1", content=(Text(text="a"), Text(text="b")))]
        ),
    ]
    sdk_messages: list[Any] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Here is the file:"},
                {"type": "text", "text": "print(1)"},
            ],
        },
        answer["choices"][0]["message"],  # type: ignore[index]  # what SDK users append
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        },
    ]
    async with open_openai_server(Script([reply_text("ok"), reply_text("ok")])) as server:
        provider = provider_for(server)
        async with provider.open():
            await provider.chat_completion(
                ChatRequest(messages=history, config=InferenceConfig(model="gpt-4.1"))
            )
        async with sdk_client(server) as client:
            await client.chat.completions.create(model="gpt-4.1", messages=sdk_messages)
    kova_body, sdk_body = (request.json() for request in server.requests)
    assert kova_body["messages"] == sdk_body["messages"]
    arguments = kova_body["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert arguments == raw_arguments


async def test_embeddings_report_usage_as_the_sdk_reads_it() -> None:
    async with open_openai_server(Script([])) as server:
        provider = OpenAiEmbeddingProvider(
            OpenAiEmbeddingConfig(base_url=server.base_url, api_key="sk-test")
        )
        async with provider.open():
            vectors = await provider.embed(["one", "two", "three"])
        async with sdk_client(server) as client:
            result = await client.embeddings.create(
                model="text-embedding-3-small", input=["one", "two", "three"]
            )
    assert vectors.usage is not None
    assert vectors.usage.input_tokens == result.usage.prompt_tokens > 0


PDF = b"%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
PDF64 = base64.b64encode(PDF).decode()
WAV64 = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt ").decode()


async def test_files_and_audio_go_as_the_sdk_documents_them() -> None:
    """``file`` parts (inline as a data URL with a filename, or by id) and ``input_audio``,
    as the SDK's ``File`` / ``FileFile`` and ``ChatCompletionContentPartInputAudioParam``."""
    history = [
        Message.user(
            [
                Text(text="Summarize the invoice and the call."),
                Document(data=PDF, title="Invoice 7"),
                Document.from_text("plain notes"),
                Document(file_id="file-abc"),
                File("file-def"),
                Audio(data=WAV64),
                Audio(data=WAV64, format="mp3"),
            ]
        )
    ]
    sdk_messages: list[Any] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Summarize the invoice and the call."},
                {
                    "type": "file",
                    "file": {
                        "filename": "Invoice 7.pdf",
                        "file_data": f"data:application/pdf;base64,{PDF64}",
                    },
                },
                {
                    "type": "file",
                    "file": {
                        "filename": "document.txt",
                        "file_data": "data:text/plain;base64,cGxhaW4gbm90ZXM=",
                    },
                },
                {"type": "file", "file": {"file_id": "file-abc"}},
                {"type": "file", "file": {"file_id": "file-def"}},
                {"type": "input_audio", "input_audio": {"data": WAV64, "format": "wav"}},
                {"type": "input_audio", "input_audio": {"data": WAV64, "format": "mp3"}},
            ],
        }
    ]
    async with open_openai_server(Script([reply_text("ok"), reply_text("ok")])) as server:
        provider = provider_for(server)
        async with provider.open():
            await provider.chat_completion(
                ChatRequest(messages=history, config=InferenceConfig(model="gpt-4o-audio"))
            )
        async with sdk_client(server) as client:
            await client.chat.completions.create(model="gpt-4o-audio", messages=sdk_messages)
    kova_body, sdk_body = (request.json() for request in server.requests)
    assert isinstance(kova_body, dict)
    assert isinstance(sdk_body, dict)
    assert kova_body["messages"] == sdk_body["messages"]


async def test_spoken_answers_are_asked_for_and_read_as_the_sdk_does() -> None:
    """``audio_voice`` sends ``modalities`` and ``audio`` as the SDK does, and the answer's
    ``message.audio`` is the transcript's text and an Audio block (the SDK reads the same)."""
    spoken = ModelResponse(
        content=(Text(text="The total is 1,240 euros."), Audio(data=WAV64)),
        stop_reason=StopReason.END_TURN,
    )
    async with open_openai_server(Script([spoken, spoken])) as server:
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(
                model="gpt-4o-audio-preview",
                base_url=server.base_url,
                api_key="sk-test",
                audio_voice="alloy",
                audio_format="wav",
            )
        )
        async with provider.open():
            answer = await provider.chat_completion(ChatRequest.of("What is the total?"))
        async with sdk_client(server) as client:
            completion = await client.chat.completions.create(
                model="gpt-4o-audio-preview",
                modalities=["text", "audio"],
                audio={"voice": "alloy", "format": "wav"},
                messages=[{"role": "user", "content": "What is the total?"}],
            )
    kova_body, sdk_body = (request.json() for request in server.requests)
    assert kova_body == sdk_body
    assert answer.content == spoken.content
    sdk_audio = completion.choices[0].message.audio
    assert sdk_audio is not None
    assert (sdk_audio.transcript, sdk_audio.data) == ("The total is 1,240 euros.", WAV64)
