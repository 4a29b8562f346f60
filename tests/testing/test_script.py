"""Every scripted double takes a Script, a list of replies or a function; misuse fails early."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from kova import Message
from kova.agent import AgentBuilder
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import (
    FakeAnthropicServer,
    FakeOpenAiServer,
    FunctionProvider,
    Script,
    ScriptedProvider,
    as_script,
    open_anthropic_server,
    open_openai_server,
    reply_text,
    reply_tool_calls,
    stream_events,
    with_thinking,
)

if TYPE_CHECKING:
    from kova.testing import ScriptRequest


def _echo(request: ScriptRequest) -> Any:
    return reply_text(f"you said {request.messages[-1].text}")


@pytest.mark.parametrize("kind", ["list", "tuple", "function", "script"])
def test_as_script_accepts_what_providers_accept(kind: str) -> None:
    given: Any = {
        "list": [reply_text("hi")],
        "tuple": (reply_text("hi"),),
        "function": _echo,
        "script": Script([reply_text("hi")]),
    }[kind]
    script = as_script(given)
    assert isinstance(script, Script)
    if kind == "script":
        assert script is given


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("hello", "got str"),
        (42, "got int"),
        ({"a": 1}, "got dict"),
        (reply_text("hi"), "single ModelResponse; wrap it in a list"),
        (["hi"], "reply 0 of the script is a str"),
        ([reply_text("a"), None], "reply 1 of the script is a NoneType"),
    ],
)
def test_as_script_rejects_anything_else_naming_it(given: object, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        as_script(given)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "construct",
    [
        lambda: ScriptedProvider("nope"),  # type: ignore[arg-type]
        lambda: FakeOpenAiServer(script="nope"),  # type: ignore[arg-type]
        lambda: FakeAnthropicServer(script="nope"),  # type: ignore[arg-type]
        lambda: FunctionProvider([reply_text("a")]),  # type: ignore[arg-type]
    ],
    ids=["scripted", "openai-server", "anthropic-server", "function-provider"],
)
def test_a_misused_double_fails_at_construction(construct: Any) -> None:
    with pytest.raises(TypeError, match=r"str|list"):
        construct()


async def test_open_openai_server_takes_a_plain_list() -> None:
    async with open_openai_server([reply_text("hi")]) as server:
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(base_url=server.base_url, model="gpt-fake", api_key="k")
        )
        async with AgentBuilder().provider(provider).build() as agent:
            response = await agent.run([Message.user("hello")])
    assert response.text == "hi"


async def test_open_anthropic_server_takes_a_function() -> None:
    async with open_anthropic_server(_echo) as server:
        provider = AnthropicProvider(
            AnthropicConfig(model="claude-fake", api_key="k", base_url=server.base_url)
        )
        async with AgentBuilder().provider(provider).build() as agent:
            response = await agent.run([Message.user("hello")])
    assert response.text == "you said hello"


async def test_open_server_with_a_bad_script_fails_before_serving() -> None:
    with pytest.raises(TypeError, match="got str"):
        async with open_openai_server("hi"):  # type: ignore[arg-type]
            pass


def test_reply_tool_calls_can_carry_signed_thinking() -> None:
    from kova import SignedThinking, Thinking, ThinkingDelta, ToolUse

    reply = reply_tool_calls(("add", {"a": 1}), thinking="I should add.", thinking_signature="s")
    assert reply.content[0] == Thinking(text="I should add.", signature="s")
    assert isinstance(reply.content[1], ToolUse)
    assert reply.thinking == "I should add."
    events = list(stream_events(reply))
    assert isinstance(events[0], ThinkingDelta)
    assert any(isinstance(event, SignedThinking) for event in events)


def test_with_thinking_puts_the_block_first() -> None:
    from kova import Thinking

    reply = with_thinking(reply_text("4"), "2 + 2")
    assert reply.content[0] == Thinking(text="2 + 2", signature=None)
    assert reply.text == "4"


def test_a_signature_without_thinking_is_an_error() -> None:
    with pytest.raises(ValueError, match="thinking_signature needs thinking"):
        reply_tool_calls(("add", {}), thinking_signature="s")
