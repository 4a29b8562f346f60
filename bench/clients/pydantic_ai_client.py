"""pydantic-ai ``Agent`` (asyncio) over its OpenAI Chat and Anthropic models."""

from __future__ import annotations

from typing import Any

import payloads
from pydantic_ai import Agent

from clients.floor import PROMPT


async def get_weather(city: str) -> str:
    """Weather for a city."""
    return payloads.TOOL_RESULT


class PydanticAi:
    runtime = "asyncio"
    apis = ("openai", "anthropic")
    scenarios = ("b", "c", "d", "e")

    def __init__(self, base_url: str, api: str) -> None:
        if api == "openai":
            from pydantic_ai.models.openai import OpenAIChatModel
            from pydantic_ai.providers.openai import OpenAIProvider

            provider: Any = OpenAIProvider(base_url=base_url + "/v1", api_key="sk-bench")
            self._model = lambda name: OpenAIChatModel(name, provider=provider)
        else:
            from pydantic_ai.models.anthropic import AnthropicModel
            from pydantic_ai.providers.anthropic import AnthropicProvider

            provider = AnthropicProvider(base_url=base_url, api_key="sk-bench")
            self._model = lambda name: AnthropicModel(name, provider=provider)
        self._agents: dict[tuple[str, bool], Agent[None, str]] = {}

    def _agent(self, model: str, tools: bool) -> Agent[None, str]:
        agent = self._agents.get((model, tools))
        if agent is None:
            agent = Agent(
                self._model(model),
                tools=[get_weather] if tools else [],
                model_settings={"max_tokens": 1024},
            )
            self._agents[(model, tools)] = agent
        return agent

    async def __aenter__(self) -> PydanticAi:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    async def call(self, model: str) -> str:
        result = await self._agent(model, False).run(PROMPT)
        return result.output

    async def stream(self, model: str) -> tuple[int, int]:
        deltas = chars = 0
        async with self._agent(model, False).run_stream(PROMPT) as result:
            async for text in result.stream_text(delta=True, debounce_by=None):
                deltas += 1
                chars += len(text)
        return deltas, chars

    async def turn(self, model: str) -> str:
        result = await self._agent(model, True).run(PROMPT)
        return result.output
