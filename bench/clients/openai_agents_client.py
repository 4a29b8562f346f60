"""openai-agents ``Runner.run`` (asyncio) over Chat Completions: agent turns only."""

from __future__ import annotations

import payloads
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from clients.floor import PROMPT

set_tracing_disabled(True)


@function_tool
async def get_weather(city: str) -> str:
    """Weather for a city."""
    return payloads.TOOL_RESULT


class OpenAiAgents:
    runtime = "asyncio"
    apis = ("openai",)
    scenarios = ("e",)

    def __init__(self, base_url: str, api: str) -> None:
        self.client = AsyncOpenAI(base_url=base_url + "/v1", api_key="sk-bench", max_retries=0)
        self._agents: dict[str, Agent] = {}

    async def __aenter__(self) -> OpenAiAgents:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.close()

    async def turn(self, model: str) -> str:
        agent = self._agents.get(model)
        if agent is None:
            agent = self._agents[model] = Agent(
                name="bench",
                model=OpenAIChatCompletionsModel(model=model, openai_client=self.client),
                model_settings=ModelSettings(max_tokens=1024),
                tools=[get_weather],
            )
        result = await Runner.run(agent, PROMPT)
        return str(result.final_output)
