"""A turn never leaves a tool call without its result (issue 28, item 6), through the fake
servers that speak each provider's wire format: complete calls under a stop reason kova does
not know run as tool use; calls cut off by max_tokens are answered in-band, not run. The
history a turn returns is always valid to send back, which the next request proves."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from kova import Message, StopReason, Text, TextDelta, ToolResult, ToolUse, Usage
from kova.agent import AgentBuilder, TurnCompleted
from kova.providers import ModelResponse, StopEvent, ToolUseDelta, ToolUseStart
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.bedrock import BedrockConfig, BedrockProvider
from kova.providers.gemini import GeminiConfig, GeminiProvider
from kova.testing import (
    Script,
    StreamReply,
    open_anthropic_server,
    open_bedrock_server,
    open_gemini_server,
    reply_text,
)
from kova.tools import tool

if TYPE_CHECKING:
    from kova.providers import Provider

RUNS: list[str] = []


@tool
def remove(path: str) -> str:
    """Delete a file."""
    RUNS.append(path)
    return f"removed {path}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    RUNS.clear()


def answered(messages: tuple[Message, ...]) -> None:
    """Every call in ``messages`` has exactly one result in the message after it."""
    for index, message in enumerate(messages):
        calls = [block.id for block in message.tool_uses]
        if calls:
            results = [
                b.tool_use_id for b in messages[index + 1].content if isinstance(b, ToolResult)
            ]
            assert results == calls


@pytest.mark.parametrize("streamed", [False, True])
async def test_gemini_calls_under_an_unknown_finish_reason_are_run(streamed: bool) -> None:
    call = ToolUse(id="c1", name="remove", input={"path": "/tmp/a"})
    unknown = ModelResponse(
        content=(call,), stop_reason=StopReason.unknown("SOMETHING_NEW"), usage=Usage()
    )
    script = Script([unknown, reply_text("done"), reply_text("you're welcome")])
    async with open_gemini_server(script) as server:
        provider = GeminiProvider(GeminiConfig(model="m", base_url=server.base_url, api_key="k"))
        async with AgentBuilder().provider(provider).tool(remove).build() as agent:
            if streamed:
                async with agent.stream("clean up") as events:
                    response = [e async for e in events if isinstance(e, TurnCompleted)][
                        -1
                    ].response
            else:
                response = await agent.run("clean up")
            assert RUNS == ["/tmp/a"]
            assert response.text == "done"
            assert [m.role for m in response.new_messages] == ["assistant", "tool", "assistant"]
            answered(response.new_messages)
            # ... and the history goes back to the server as it is.
            history = [Message.user("clean up"), *response.new_messages, Message.user("thanks")]
            assert (await agent.run(history)).text == "you're welcome"
            answered(script.requests[-1].request.messages)


def cut_off(stream: bool) -> ModelResponse | StreamReply:
    """An answer that ran out of tokens in the middle of its second tool call."""
    whole = ToolUse(id="toolu_1", name="remove", input={"path": "/tmp/a"})
    response = ModelResponse(
        content=(Text(text="Removing."), whole, ToolUse(id="toolu_2", name="remove", input={})),
        stop_reason=StopReason.MAX_TOKENS,
        usage=Usage(input_tokens=5, output_tokens=20),
    )
    if not stream:
        return response
    events = (
        TextDelta(text="Removing."),
        ToolUseStart(index=1, id="toolu_1", name="remove"),
        ToolUseDelta(index=1, partial_json='{"path": "/tmp/a"}'),
        ToolUseStart(index=2, id="toolu_2", name="remove"),
        ToolUseDelta(index=2, partial_json='{"path": "/tm'),
        StopEvent(stop_reason=StopReason.MAX_TOKENS),
    )
    return StreamReply(response=response, events=events)


async def check_cut_off(provider: Provider, script: Script, streamed: bool) -> None:
    async with AgentBuilder().provider(provider).tool(remove).build() as agent:
        if streamed:
            async with agent.stream("clean up") as events:
                response = [e async for e in events if isinstance(e, TurnCompleted)][-1].response
        else:
            response = await agent.run("clean up")
        assert RUNS == []  # nothing cut off runs, not even the call that looks whole
        assert response.stop_reason.kind == StopReason.MAX_TOKENS.kind
        assert [m.role for m in response.new_messages] == ["assistant", "tool"]
        answered(response.new_messages)
        results = [b for b in response.new_messages[1].content if isinstance(b, ToolResult)]
        assert all(r.is_error and "not run" in r.text for r in results)
        # The history goes back as it is (Anthropic and Bedrock refuse unanswered calls): the
        # server decodes every call with its result.
        history = [Message.user("clean up"), *response.new_messages, Message.user("go on")]
        assert (await agent.run(history)).text == "ok"
        answered(script.requests[-1].request.messages)


@pytest.mark.parametrize("streamed", [False, True])
async def test_anthropic_max_tokens_inside_a_tool_call(streamed: bool) -> None:
    script = Script([cut_off(streamed), reply_text("ok")])
    async with open_anthropic_server(script) as server:
        provider = AnthropicProvider(
            AnthropicConfig(model="claude-sonnet-4-5", api_key="k", base_url=server.base_url)
        )
        await check_cut_off(provider, script, streamed)


@pytest.mark.parametrize("streamed", [False, True])
async def test_bedrock_max_tokens_inside_a_tool_call(streamed: bool) -> None:
    script = Script([cut_off(streamed), reply_text("ok")])
    async with open_bedrock_server(script) as server:
        provider = BedrockProvider(
            BedrockConfig(
                region="us-east-1",
                model_id="anthropic.claude-sonnet-4-5",
                endpoint_url=server.base_url,
                **server.credentials,
            )
        )
        await check_cut_off(provider, script, streamed)
