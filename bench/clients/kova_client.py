"""kova under trio: the provider API, the provider actor, and the agent users call.

``Kova`` uses the provider directly (``provider.open()``, ``chat_completion``,
``chat_completion_stream``). ``KovaActor`` sends the same requests through a provider actor
(``spawn_provider`` + ``ProviderRef``), so the two rows side by side show the actor hop in a
real stream. ``KovaAgent`` is what users call: ``Agent.run`` for calls, ``Agent.stream`` for
streams (counting the ``TextDelta`` events it yields), and ``Agent.run`` with one tool for
agent turns, on an agent with its own runtime.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import payloads

from clients.floor import PROMPT
from kova import InferenceConfig, Message, Text, TextDelta
from kova.providers import ChatRequest


async def get_weather(city: str) -> str:
    """Weather for a city (async, so it runs inline like the floor's tool: no thread hop).

    Args:
        city: The city name.
    """
    return payloads.TOOL_RESULT


def make_provider(base_url: str, api: str) -> Any:
    if api == "gemini":
        from kova.providers.gemini import GeminiConfig, GeminiProvider

        return GeminiProvider(
            GeminiConfig(model="bench-n1", base_url=base_url, api_key="bench-key", timeout=600.0)
        )
    if api == "ollama":
        from kova.providers.ollama import OllamaConfig, OllamaProvider

        return OllamaProvider(OllamaConfig(model="bench-n1", base_url=base_url, timeout=600.0))
    if api == "responses":
        from kova.providers.openai import OpenAiResponsesConfig, OpenAiResponsesProvider

        return OpenAiResponsesProvider(
            OpenAiResponsesConfig(
                model="bench-n1", base_url=base_url, api_key="sk-bench", timeout=600.0
            )
        )
    if api == "openai":
        from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig

        return OpenAiCompatibleProvider(
            OpenAiConfig(model="bench-n1", base_url=base_url, api_key="sk-bench", timeout=600.0)
        )
    from kova.providers.anthropic import AnthropicConfig, AnthropicProvider

    return AnthropicProvider(
        AnthropicConfig(model="bench-n1", base_url=base_url, api_key="sk-bench", max_tokens=1024)
    )


class Kova:
    runtime = "trio"
    apis = ("openai", "anthropic")
    scenarios = ("b", "c", "d", "e")
    via_actor = False

    def __init__(self, base_url: str, api: str) -> None:
        self.base_url = base_url
        self.api = api
        self.provider = make_provider(base_url, api)
        self.messages = (Message(role="user", content=(Text(text=PROMPT),)),)
        self._configs: dict[str, InferenceConfig] = {}
        self._agent: Any = None

    async def __aenter__(self) -> Kova:
        self._stack = AsyncExitStack()
        await self._stack.__aenter__()
        if self.via_actor:
            from kova.actors import open_runtime
            from kova.agent._provider_ref import spawn_provider

            runtime = await self._stack.enter_async_context(open_runtime())
            self.provider = await spawn_provider(runtime, self.provider)
        else:
            await self._stack.enter_async_context(self.provider.open())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.__aexit__(*exc)

    def _config(self, model: str) -> InferenceConfig:
        config = self._configs.get(model)
        if config is None:
            config = self._configs[model] = InferenceConfig(model=model, max_tokens=1024)
        return config

    async def call(self, model: str) -> str:
        response = await self.provider.chat_completion(
            ChatRequest(messages=self.messages, tools=(), config=self._config(model))
        )
        return response.text

    async def stream(self, model: str) -> tuple[int, int]:
        deltas = chars = 0
        async with self.provider.chat_completion_stream(
            ChatRequest(messages=self.messages, tools=(), config=self._config(model))
        ) as batches:
            async for batch in batches:
                for event in batch:
                    if type(event) is TextDelta:
                        deltas += 1
                        chars += len(event.text)
        return deltas, chars

    async def turn(self, model: str) -> str:
        if self._agent is None:
            from kova.agent import AgentBuilder
            from kova.tools import tool

            agent = AgentBuilder().provider(make_provider(self.base_url, self.api))
            agent = agent.tool(tool(get_weather)).build()
            self._agent = await self._stack.enter_async_context(agent)
        response = await self._agent.run(self.messages, config=self._config(model))
        return response.text


class KovaAgent(Kova):
    """The agent path: ``Agent.run`` and ``Agent.stream`` on an agent without tools (calls,
    streams) and with one tool (turns)."""

    async def __aenter__(self) -> KovaAgent:
        from kova.agent import AgentBuilder

        self._stack = AsyncExitStack()
        await self._stack.__aenter__()
        plain = AgentBuilder().provider(self.provider).build()
        self._plain = await self._stack.enter_async_context(plain)
        return self

    async def call(self, model: str) -> str:
        response = await self._plain.run(self.messages, config=self._config(model))
        return response.text

    async def stream(self, model: str) -> tuple[int, int]:
        deltas = chars = 0
        async with self._plain.stream(self.messages, config=self._config(model)) as events:
            async for event in events:
                if type(event) is TextDelta:
                    deltas += 1
                    chars += len(event.text)
        return deltas, chars


class KovaActor(Kova):
    """The same requests through a provider actor (``ProviderRef``)."""

    scenarios = ("b", "c", "d")
    via_actor = True
