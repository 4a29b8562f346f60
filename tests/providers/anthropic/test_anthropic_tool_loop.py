"""A full two-request tool loop with signed thinking, driven by hand against the fake server:
the signed (and redacted) thinking blocks of the first answer go back byte for byte, before the
tool result, in the second request."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from kova import _models as m
from kova.providers import ChatRequest
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.testing import Script, StreamReply, open_anthropic_server, reply_text

if TYPE_CHECKING:
    from collections.abc import Sequence

KEY = "sk-ant-loop"
WEATHER = m.ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
THINKING = m.Thinking(
    text="The user asks about Paris — I should call get_weather with city=Paris.\n",
    signature="EqQBCkgIARABGAIiQL+/sig=+with/odd\\chars==",
)
REDACTED = m.RedactedThinking(data="EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw==")
TOOL_CALL = m.ToolUse(id="toolu_01A9", name="get_weather", input={"city": "Paris"})
FIRST = m.ModelResponse(
    content=(THINKING, REDACTED, m.Text(text="Checking the weather."), TOOL_CALL),
    stop_reason=m.StopReason.TOOL_USE,
    usage=m.Usage(input_tokens=400, output_tokens=90, cache_creation_tokens=380),
)


def assistant_message_from_stream(events: Sequence[m.StreamEvent]) -> m.Message:
    """What an agent keeps of a streamed answer: signed thinking blocks verbatim, the text,
    and each tool call with its concatenated arguments."""
    blocks: list[m.ContentBlock] = []
    text: list[str] = []
    calls: dict[int, tuple[str, str, list[str]]] = {}

    def flush_text() -> None:
        if text:
            blocks.append(m.Text(text="".join(text)))
            text.clear()

    for event in events:
        match event:
            case m.SignedThinking(block=block):
                flush_text()
                blocks.append(block)
            case m.TextDelta(text=piece):
                text.append(piece)
            case m.ToolUseStart(index=index, id=id_, name=name):
                flush_text()
                calls[index] = (id_, name, [])
            case m.ToolUseDelta(index=index, partial_json=fragment):
                calls[index][2].append(fragment)
            case m.ToolUseEnd(index=index):
                id_, name, fragments = calls.pop(index)
                arguments = json.loads("".join(fragments) or "{}")
                blocks.append(m.ToolUse(id=id_, name=name, input=arguments))
    flush_text()
    return m.Message.assistant(blocks)


def wire(value: object) -> bytes:
    """The bytes kova's transport sends for ``value`` (compact JSON, UTF-8)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "non-streaming"])
async def test_signed_thinking_is_echoed_unchanged_before_the_tool_result(stream: bool) -> None:
    script = Script([StreamReply(response=FIRST, chunk_chars=7), reply_text("18°C, cloudy.")])
    user = m.Message.user("What's the weather in Paris?")
    async with open_anthropic_server(script, api_key=KEY) as server:
        provider = AnthropicProvider(
            AnthropicConfig(model="claude-opus-4-8", api_key=KEY, base_url=server.base_url)
        )
        async with provider.open():
            # Request 1: the model thinks (signed), then asks for a tool.
            if stream:
                events: list[m.StreamEvent] = []
                async with provider.chat_completion_stream(
                    ChatRequest(messages=[user], tools=[WEATHER], config=m.InferenceConfig())
                ) as s:
                    async for batch in s:
                        events.extend(batch)
                assistant = assistant_message_from_stream(events)
                shown = "".join(e.text for e in events if isinstance(e, m.ThinkingDelta))
                assert shown == THINKING.text  # displayed once, from the deltas
            else:
                first = await provider.chat_completion(
                    ChatRequest(messages=[user], tools=[WEATHER], config=m.InferenceConfig())
                )
                assert first.thinking == THINKING.text
                assistant = m.Message.assistant(first.content)
            assert assistant.content == FIRST.content

            # The host runs the tool and builds the next request's history.
            result = m.Message.tool_results(
                [m.ToolResult(tool_use_id=TOOL_CALL.id, content="18°C, cloudy")]
            )
            history = [user, assistant, result]
            second = await provider.chat_completion(
                ChatRequest(messages=history, tools=[WEATHER], config=m.InferenceConfig())
            )
    assert second.text == "18°C, cloudy."

    first_request, second_request = server.messages_requests()
    body = second_request.json()
    assert isinstance(body, dict)
    thinking_wire = {
        "type": "thinking",
        "thinking": THINKING.text,
        "signature": THINKING.signature,
    }
    redacted_wire = {"type": "redacted_thinking", "data": REDACTED.data}
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What's the weather in Paris?"}]},
        {
            "role": "assistant",
            "content": [
                thinking_wire,
                redacted_wire,
                {"type": "text", "text": "Checking the weather."},
                {
                    "type": "tool_use",
                    "id": "toolu_01A9",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A9", "content": "18°C, cloudy"}
            ],
        },
    ]
    # Byte for byte: the signed blocks appear in the raw request exactly as first received,
    # ahead of the tool result.
    raw = second_request.body
    assert wire(thinking_wire) in raw
    assert wire(redacted_wire) in raw
    assert raw.index(wire(thinking_wire)) < raw.index(b'"tool_result"')
    # The first request had no thinking to echo.
    assert b'"signature"' not in first_request.body
    # The scripted model saw the same blocks come back.
    seen = script.requests[1].messages[1].content
    assert seen[:2] == (THINKING, REDACTED)
