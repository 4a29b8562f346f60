"""Cross-checks with the official ``anthropic`` package (a dev dependency): both clients talk to
the same fake server, under trio.

* Request side: the same input written once as kova values and once as the SDK's documented
  parameters produces the same JSON body and the same version/auth headers.
* Response side: the SDK reads the fake's JSON and SSE answers to the same text, thinking
  blocks (with signatures), tool calls and usage that kova decodes.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anthropic
import pytest

from kova import _models as m
from kova.providers import ChatRequest
from kova.providers.anthropic import ANTHROPIC_API_VERSION, AnthropicConfig, AnthropicProvider
from kova.testing import Script, StreamReply, open_anthropic_server

if TYPE_CHECKING:
    from kova.testing import FakeAnthropicServer

KEY = "sk-ant-crosscheck"
MODEL = "claude-opus-4-8"
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
THINKING = m.Thinking(text="Paris is in France; call the tool.", signature="EqQBCkgIAR/sig+==")
ANSWER = m.ModelResponse(
    content=(
        THINKING,
        m.RedactedThinking(data="EmwKAhgBEgy3va3pzix"),
        m.Text(text="Let me look that up for you."),
        m.ToolUse(id="toolu_01A9", name="get_weather", input={"city": "Paris", "days": [1, 2]}),
    ),
    stop_reason=m.StopReason.TOOL_USE,
    usage=m.Usage(
        input_tokens=2242,
        output_tokens=57,
        cache_read_tokens=1830,
        cache_creation_tokens=12,
    ),
)


def test_kova_defaults_to_the_sdk_api_version() -> None:
    from anthropic._constants import ANTHROPIC_API_VERSION as SDK_VERSION

    assert SDK_VERSION == ANTHROPIC_API_VERSION


def sdk_client(server: FakeAnthropicServer) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key=KEY, base_url=server.base_url, max_retries=0)


def kova_provider(server: FakeAnthropicServer, **settings: Any) -> AnthropicProvider:
    return AnthropicProvider(
        AnthropicConfig(model=MODEL, api_key=KEY, base_url=server.base_url, **settings)
    )


KOVA_HISTORY = [
    m.Message.system("You are a weather bot."),
    m.Message.user(
        [
            m.Text(text="What's the weather where this photo was taken?"),
            m.Image(media_type="image/png", data="iVBORw0KGgoAAAANSUhEUg=="),
            m.Image(url="https://example.com/eiffel.jpg"),
        ]
    ),
    m.Message.assistant(
        [
            THINKING,
            m.Text(text="Checking."),
            m.ToolUse(id="toolu_01A9", name="get_weather", input={"city": "Paris"}),
            m.ToolUse(id="toolu_01B2", name="get_weather", input={"city": "Lyon"}),
        ]
    ),
    m.Message.tool_results(
        [
            m.ToolResult(tool_use_id="toolu_01A9", content="18°C, cloudy"),
            m.ToolResult.error("timeout", tool_use_id="toolu_01B2"),
        ]
    ),
]
KOVA_TOOLS = [
    m.ToolDefinition(
        name="get_weather",
        description="Current weather for a city",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    )
]

# The same conversation written against the SDK's documented parameter types.
SDK_SYSTEM = "You are a weather bot."
SDK_MESSAGES: list[Any] = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What's the weather where this photo was taken?"},
            {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": "image/png",
                    "data": "iVBORw0KGgoAAAANSUhEUg==",
                },
            },
            {"type": "image", "source": {"type": "url", "url": "https://example.com/eiffel.jpg"}},
        ],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": THINKING.text, "signature": THINKING.signature},
            {"type": "text", "text": "Checking."},
            {
                "type": "tool_use",
                "id": "toolu_01A9",
                "name": "get_weather",
                "input": {"city": "Paris"},
            },
            {
                "type": "tool_use",
                "id": "toolu_01B2",
                "name": "get_weather",
                "input": {"city": "Lyon"},
            },
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01A9", "content": "18°C, cloudy"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01B2",
                "content": "timeout",
                "is_error": True,
            },
        ],
    },
]
SDK_TOOLS: list[Any] = [
    {
        "name": "get_weather",
        "description": "Current weather for a city",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_same_request_body_and_headers_as_the_sdk(stream: bool) -> None:
    config = m.InferenceConfig(
        max_tokens=2048,
        stop_sequences=["\n\nEND"],
        response_format=m.ResponseFormat.named("answer", SCHEMA),
    )
    script = Script(
        [m.ModelResponse(content=(m.Text(text="{}"),), stop_reason=m.StopReason.END_TURN)] * 2
    )
    async with open_anthropic_server(script, api_key=KEY) as server:
        provider = kova_provider(server, effort="xhigh")
        async with provider.open():
            if stream:
                async with provider.chat_completion_stream(
                    ChatRequest(messages=KOVA_HISTORY, tools=KOVA_TOOLS, config=config)
                ) as s:
                    async for _ in s:
                        pass
            else:
                await provider.chat_completion(
                    ChatRequest(messages=KOVA_HISTORY, tools=KOVA_TOOLS, config=config)
                )
        async with sdk_client(server) as client:
            arguments: dict[str, Any] = {
                "model": MODEL,
                "max_tokens": 2048,
                "system": SDK_SYSTEM,
                "messages": SDK_MESSAGES,
                "tools": SDK_TOOLS,
                "thinking": {"type": "adaptive"},
                "cache_control": {"type": "ephemeral"},
                "output_config": {
                    "effort": "xhigh",
                    "format": {"type": "json_schema", "schema": SCHEMA},
                },
                "stop_sequences": ["\n\nEND"],
            }
            if stream:
                async with client.messages.stream(**arguments) as sdk_stream:
                    await sdk_stream.get_final_message()
            else:
                await client.messages.create(**arguments)
    kova_request, sdk_request = server.messages_requests()
    assert kova_request.json() == sdk_request.json()
    for header in ("anthropic-version", "authorization", "content-type"):
        assert kova_request.headers[header] == sdk_request.headers[header], header
    assert "x-api-key" not in sdk_request.headers


async def test_same_count_tokens_body_as_the_sdk() -> None:
    async with open_anthropic_server(Script([]), api_key=KEY) as server:
        provider = kova_provider(server)
        async with provider.open():
            kova_count = await provider.count_tokens(
                ChatRequest(messages=KOVA_HISTORY, tools=KOVA_TOOLS, config=m.InferenceConfig())
            )
        async with sdk_client(server) as client:
            sdk_count = await client.messages.count_tokens(
                model=MODEL,
                system=SDK_SYSTEM,
                messages=SDK_MESSAGES,
                tools=SDK_TOOLS,
                thinking={"type": "adaptive"},
                cache_control={"type": "ephemeral"},
            )
    kova_request, sdk_request = server.requests
    assert kova_request.path == sdk_request.path == "/v1/messages/count_tokens"
    assert kova_request.json() == sdk_request.json()
    assert kova_count == sdk_count.input_tokens


def sdk_view(message: anthropic.types.Message) -> dict[str, Any]:
    """What matters of an SDK message: blocks, stop reason and usage."""
    blocks: list[Any] = []
    for block in message.content:
        if block.type == "thinking":
            blocks.append(("thinking", block.thinking, block.signature))
        elif block.type == "redacted_thinking":
            blocks.append(("redacted_thinking", block.data))
        elif block.type == "text":
            blocks.append(("text", block.text))
        elif block.type == "tool_use":
            blocks.append(("tool_use", block.id, block.name, block.input))
    usage = message.usage
    return {
        "blocks": blocks,
        "stop_reason": message.stop_reason,
        "usage": (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_input_tokens,
            usage.cache_creation_input_tokens,
        ),
    }


def kova_view(
    content: tuple[m.ContentBlock, ...], stop: m.StopReason, usage: m.Usage
) -> dict[str, Any]:
    blocks: list[Any] = []
    for block in content:
        match block:
            case m.Thinking(text=text, signature=signature):
                blocks.append(("thinking", text, signature))
            case m.RedactedThinking(data=data):
                blocks.append(("redacted_thinking", data))
            case m.Text(text=text):
                blocks.append(("text", text))
            case m.ToolUse(id=id_, name=name, input=arguments):
                blocks.append(("tool_use", id_, name, dict(arguments)))
    uncached = usage.input_tokens - usage.cache_read_tokens - usage.cache_creation_tokens
    return {
        "blocks": blocks,
        "stop_reason": {m.StopKind.TOOL_USE: "tool_use", m.StopKind.END_TURN: "end_turn"}[
            stop.kind
        ],
        "usage": (
            uncached,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_creation_tokens,
        ),
    }


def blocks_from_events(events: list[m.StreamEvent]) -> tuple[m.ContentBlock, ...]:
    blocks: list[m.ContentBlock] = []
    text: list[str] = []
    arguments: dict[int, list[str]] = {}
    starts: dict[int, m.ToolUseStart] = {}
    for event in events:
        match event:
            case m.TextDelta(text=piece):
                text.append(piece)
            case m.SignedThinking(block=block):
                blocks.append(block)
            case m.ToolUseStart(index=index):
                if text:
                    blocks.append(m.Text(text="".join(text)))
                    text.clear()
                starts[index] = event
                arguments[index] = []
            case m.ToolUseDelta(index=index, partial_json=fragment):
                arguments[index].append(fragment)
            case m.ToolUseEnd(index=index):
                start = starts[index]
                blocks.append(
                    m.ToolUse(
                        id=start.id, name=start.name, input=json.loads("".join(arguments[index]))
                    )
                )
    if text:
        blocks.append(m.Text(text="".join(text)))
    return tuple(blocks)


async def test_sdk_reads_the_fake_json_answer_as_kova_does() -> None:
    async with open_anthropic_server(Script([ANSWER, ANSWER]), api_key=KEY) as server:
        provider = kova_provider(server)
        async with provider.open():
            ours = await provider.chat_completion(
                ChatRequest(messages=[m.Message.user("hi")], tools=[], config=m.InferenceConfig())
            )
        async with sdk_client(server) as client:
            theirs = await client.messages.create(
                model=MODEL, max_tokens=1024, messages=[{"role": "user", "content": "hi"}]
            )
    assert ours.usage is not None
    assert sdk_view(theirs) == kova_view(ours.content, ours.stop_reason, ours.usage)
    assert kova_view(ANSWER.content, ANSWER.stop_reason, ANSWER.usage) == sdk_view(theirs)  # type: ignore[arg-type]


async def test_sdk_reads_the_fake_stream_as_kova_does() -> None:
    reply = StreamReply(response=ANSWER, chunk_chars=4)
    async with open_anthropic_server(Script([reply, reply]), api_key=KEY) as server:
        provider = kova_provider(server)
        events: list[m.StreamEvent] = []
        async with provider.open():
            async with provider.chat_completion_stream(
                ChatRequest(messages=[m.Message.user("hi")], tools=[], config=m.InferenceConfig())
            ) as stream:
                async for batch in stream:
                    events.extend(batch)
        async with sdk_client(server) as client:
            sdk_text: list[str] = []
            sdk_thinking: list[str] = []
            async with client.messages.stream(
                model=MODEL, max_tokens=1024, messages=[{"role": "user", "content": "hi"}]
            ) as sdk_stream:
                async for event in sdk_stream:
                    if event.type == "text":
                        sdk_text.append(event.text)
                    elif event.type == "thinking":
                        sdk_thinking.append(event.thinking)
                theirs = await sdk_stream.get_final_message()
    stops = [e.stop_reason for e in events if isinstance(e, m.StopEvent)]
    usages = [e.usage for e in events if isinstance(e, m.UsageEvent)]
    assert len(stops) == len(usages) == 1
    assert sdk_view(theirs) == kova_view(blocks_from_events(events), stops[0], usages[0])
    # The deltas themselves match too (same pieces, same order).
    assert sdk_text == [e.text for e in events if isinstance(e, m.TextDelta)]
    assert sdk_thinking == [e.text for e in events if isinstance(e, m.ThinkingDelta)]
    assert "".join(sdk_thinking) == THINKING.text


async def test_thinking_off_is_omitted_as_the_sdk_omits_it() -> None:
    """With thinking off the SDK sends no ``thinking`` field (messages and count_tokens), and
    neither does kova (it used to send ``{"type": "disabled"}``)."""
    script = Script(
        [m.ModelResponse(content=(m.Text(text="ok"),), stop_reason=m.StopReason.END_TURN)] * 2
    )
    history = [m.Message.user("Hi")]
    # kova always sends content as blocks; so does an SDK user who passes blocks.
    sdk_messages: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    async with open_anthropic_server(script, api_key=KEY) as server:
        provider = kova_provider(server, adaptive_thinking=False, cache=False)
        async with provider.open():
            await provider.chat_completion(ChatRequest(messages=history))
            await provider.count_tokens(ChatRequest(messages=history))
        async with sdk_client(server) as client:
            await client.messages.create(
                model=MODEL,
                max_tokens=provider.config.max_tokens,
                messages=sdk_messages,
            )
            await client.messages.count_tokens(model=MODEL, messages=sdk_messages)
    kova_create, kova_count, sdk_create, sdk_count = server.requests
    assert "thinking" not in sdk_create.json()
    assert kova_create.json() == sdk_create.json()
    assert kova_count.json() == sdk_count.json()


PDF64 = "JVBERi0xLjcKMSAwIG9iaiA8PD4+IGVuZG9iagp0cmFpbGVyIDw8Pj4KJSVFT0YK"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_documents_and_files_go_as_the_sdks_document_blocks(stream: bool) -> None:
    history = [
        m.Message.user(
            [
                m.Text(text="What does the contract say about invoice 7?"),
                m.Document(data=PDF64, title="Invoice 7", citations=True),
                m.Document(url="https://example.com/contract.pdf"),
                m.Document.from_text("Payment within 30 days.", title="Terms", citations=True),
                m.Document(file_id="file_011CNha8iCJcU1wXNR6q4V8w"),
                m.File("file_022"),
                m.File("file_033", media_type="image/png"),
            ]
        )
    ]
    sdk_messages: list[Any] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What does the contract say about invoice 7?"},
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": PDF64},
                    "title": "Invoice 7",
                    "citations": {"enabled": True},
                },
                {
                    "type": "document",
                    "source": {"type": "url", "url": "https://example.com/contract.pdf"},
                },
                {
                    "type": "document",
                    "source": {
                        "type": "text",
                        "media_type": "text/plain",
                        "data": "Payment within 30 days.",
                    },
                    "title": "Terms",
                    "citations": {"enabled": True},
                },
                {
                    "type": "document",
                    "source": {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"},
                },
                {"type": "document", "source": {"type": "file", "file_id": "file_022"}},
                {"type": "image", "source": {"type": "file", "file_id": "file_033"}},
            ],
        }
    ]
    ok = m.ModelResponse(content=(m.Text(text="ok"),), stop_reason=m.StopReason.END_TURN)
    async with open_anthropic_server(Script([ok, ok]), api_key=KEY) as server:
        provider = kova_provider(server)
        request = ChatRequest(messages=history, config=m.InferenceConfig(max_tokens=512))
        async with provider.open():
            if stream:
                async with provider.chat_completion_stream(request) as s:
                    async for _ in s:
                        pass
            else:
                await provider.chat_completion(request)
        async with sdk_client(server) as client:
            arguments: dict[str, Any] = {
                "model": MODEL,
                "max_tokens": 512,
                "messages": sdk_messages,
                "thinking": {"type": "adaptive"},
                "cache_control": {"type": "ephemeral"},
            }
            if stream:
                async with client.messages.stream(**arguments) as sdk_stream:
                    await sdk_stream.get_final_message()
            else:
                await client.messages.create(**arguments)
    kova_request, sdk_request = server.messages_requests()
    assert kova_request.json() == sdk_request.json()
