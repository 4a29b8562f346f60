"""kova's provider in the floor's hand-written tool loop, and ``Agent.run`` with a plain
``def`` tool (in its worker thread, or declared ``@tool(inline=True)``): the rows of
``bench/agentpath.py`` issue 41's 0.9x target is about, as ``bench/worker.py`` clients (so
``bench/instructions.py --scenarios e --clients floor,loop,deftool,inline`` counts them)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import payloads

from clients.floor import PROMPT
from clients.kova_client import Kova, make_provider
from kova import Message, Text, ToolDefinition, ToolResult
from kova.providers import ChatRequest

_TOOLS = (
    ToolDefinition(
        name=payloads.TOOL_NAME,
        description="Weather for a city.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    ),
)


class KovaLoop(Kova):
    """The floor's loop (request, run the tool, request again) on kova's provider."""

    scenarios = ("e",)

    async def turn(self, model: str) -> str:
        config = self._config(model)
        history = [Message(role="user", content=(Text(text=PROMPT),))]
        for _ in range(4):
            response = await self.provider.chat_completion(
                ChatRequest(messages=history, tools=_TOOLS, config=config)
            )
            calls = response.tool_uses
            if not calls:
                return response.text
            history.append(Message.assistant(response.content))
            history.append(
                Message.tool_results(
                    [ToolResult(content=payloads.TOOL_RESULT, tool_use_id=c.id) for c in calls]
                )
            )
        raise AssertionError("agent loop did not finish")


def get_weather(city: str) -> str:
    """Weather for a city.

    Args:
        city: The city name.
    """
    return str(payloads.TOOL_RESULT)


class KovaDefTool(Kova):
    """``Agent.run`` with one plain ``def`` tool, run in a worker thread."""

    scenarios = ("e",)
    inline = False

    async def __aenter__(self) -> KovaDefTool:
        from kova.agent import AgentBuilder
        from kova.tools import tool

        self._stack = AsyncExitStack()
        await self._stack.__aenter__()
        builder = AgentBuilder().provider(make_provider(self.base_url, self.api))
        agent = builder.tool(tool(get_weather, inline=self.inline)).build()
        self._tool_agent: Any = await self._stack.enter_async_context(agent)
        return self

    async def turn(self, model: str) -> str:
        response = await self._tool_agent.run(self.messages, config=self._config(model))
        return str(response.text)


class KovaInlineTool(KovaDefTool):
    """The same tool declared ``@tool(inline=True)``: called in the turn's task."""

    inline = True
