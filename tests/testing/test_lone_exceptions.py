"""A lone exception leaves kova's blocks as itself, so ``pytest.raises`` works around them."""

from __future__ import annotations

import pytest

from kova import Message, ProviderAuthError
from kova.agent import AgentBuilder
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import (
    ErrorReply,
    ScriptedProvider,
    open_anthropic_server,
    open_bedrock_server,
    open_gemini_server,
    open_ollama_server,
    open_openai_server,
)
from kova.web import open_event_server

OPENERS = [
    open_openai_server,
    open_anthropic_server,
    open_gemini_server,
    open_ollama_server,
    open_bedrock_server,
]


async def test_an_auth_error_leaves_the_server_and_agent_blocks_as_itself() -> None:
    with pytest.raises(ProviderAuthError):
        async with open_openai_server([ErrorReply(status_code=401)]) as server:
            provider = OpenAiCompatibleProvider(
                OpenAiConfig(base_url=server.base_url, model="m", api_key="k")
            )
            async with AgentBuilder().provider(provider).build() as agent:
                await agent.run([Message.user("hi")])


@pytest.mark.parametrize("opener", OPENERS, ids=lambda opener: opener.__name__)
async def test_every_fake_server_block_reraises_a_lone_exception(opener: object) -> None:
    with pytest.raises(KeyError, match="inside"):
        async with opener([]):  # type: ignore[operator]
            raise KeyError("inside")


async def test_the_agent_block_reraises_a_lone_exception() -> None:
    with pytest.raises(ValueError, match="inside"):
        async with AgentBuilder().provider(ScriptedProvider([])).build():
            raise ValueError("inside")


async def test_the_event_server_block_reraises_a_lone_exception() -> None:
    with pytest.raises(ValueError, match="inside"):
        async with open_event_server():
            raise ValueError("inside")


async def test_two_failures_stay_a_group() -> None:
    import trio

    async def fail(text: str) -> None:
        raise ValueError(text)

    with pytest.raises(ExceptionGroup) as raised:
        async with open_openai_server([]), trio.open_nursery() as nursery:
            nursery.start_soon(fail, "a")
            nursery.start_soon(fail, "b")
    # The inner nursery's group of two, not wrapped once more in a group of one.
    assert sorted(str(error) for error in raised.value.exceptions) == ["a", "b"]
