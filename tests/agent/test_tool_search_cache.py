"""Tool search and prompt caching: the tools a search finds are added after the cached prefix.

On the fake servers (the bodies as sent): every request of a turn starts its tools with the
same up-front tools and ``search_tools``, byte for byte, and the found tools follow. On
Anthropic, ``search_tools`` carries a cache breakpoint from the first call on, so the entry
for the tools up to it exists when a search changes what follows.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kova.agent import AgentBuilder
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.openai import (
    OpenAiCompatibleProvider,
    OpenAiConfig,
    OpenAiResponsesConfig,
    OpenAiResponsesProvider,
)
from kova.testing import (
    Script,
    open_anthropic_server,
    open_openai_server,
    open_responses_server,
    reply_text,
    reply_tool_calls,
)
from kova.tools import tool


@tool
def get_time(city: str) -> str:
    """The local time in a city."""
    return f"noon in {city}"


@tool(defer=True)
def send_email(to: str, subject: str) -> str:
    """Send an email message to someone."""
    return f"sent to {to}"


@tool(defer=True)
def create_event(title: str) -> str:
    """Create a calendar event."""
    return f"created {title}"


@tool(defer=True)
def convert_currency(amount: float) -> str:
    """Convert money between currencies."""
    return str(amount)


def _script() -> Script:
    return Script(
        [
            reply_tool_calls(("search_tools", {"query": "send an email", "limit": 1})),
            reply_tool_calls(("send_email", {"to": "ada", "subject": "hi"})),
            reply_tool_calls(("search_tools", {"query": "calendar event", "limit": 1})),
            reply_tool_calls(("create_event", {"title": "tea"})),
            reply_text("done"),
        ]
    )


def _name(tool_json: dict[str, Any]) -> str:
    return str(tool_json["function"]["name"] if "function" in tool_json else tool_json["name"])


CASES = {
    "anthropic": (
        open_anthropic_server,
        lambda url: AnthropicProvider(AnthropicConfig(model="m", api_key="k", base_url=url)),
    ),
    "openai": (
        open_openai_server,
        lambda url: OpenAiCompatibleProvider(OpenAiConfig(model="m", api_key="k", base_url=url)),
    ),
    "openai-responses": (
        open_responses_server,
        lambda url: OpenAiResponsesProvider(
            OpenAiResponsesConfig(model="gpt-fake", api_key="k", base_url=url)
        ),
    ),
}


@pytest.mark.parametrize("provider_name", list(CASES))
async def test_found_tools_come_after_an_unchanged_prefix(provider_name: str) -> None:
    open_server, make = CASES[provider_name]
    async with open_server(_script()) as server:
        agent = (
            AgentBuilder()
            .provider(make(server.base_url))
            .tools(get_time, send_email, create_event, convert_currency)
            .build()
        )
        async with agent:
            response = await agent.run("mail ada, then plan tea")
        bodies = [json.loads(request.body) for request in server.requests if request.body]
    assert response.text == "done"
    assert len(bodies) == 5
    tools = [body["tools"] for body in bodies]
    prefix = tools[0]
    assert [_name(t) for t in prefix] == ["get_time", "search_tools"]
    for offered in tools:
        # The same bytes up to and including search_tools on every call of the turn.
        assert json.dumps(offered[: len(prefix)]) == json.dumps(prefix)
    assert [_name(t) for t in tools[1][2:]] == ["send_email"]
    assert [_name(t) for t in tools[4][2:]] == ["send_email", "create_event"]
    if provider_name == "anthropic":
        assert prefix[1]["cache_control"] == {"type": "ephemeral"}
        assert all("cache_control" not in t for body in tools for t in body[2:])
        assert all("cache_control" not in t for t in prefix[:1])


async def test_no_breakpoint_on_the_search_tool_when_caching_is_off() -> None:
    async with open_anthropic_server(_script()) as server:
        provider = AnthropicProvider(
            AnthropicConfig(model="m", api_key="k", base_url=server.base_url, cache=False)
        )
        agent = AgentBuilder().provider(provider).tools(get_time, send_email).build()
        async with agent:
            await agent.run("mail ada")
        body = json.loads(server.requests[0].body)
    assert all("cache_control" not in t for t in body["tools"])
    assert "cache_control" not in body
