"""The official ``anthropic`` package (asyncio), Messages API with raw ``stream=True``."""

from __future__ import annotations

from anthropic import AsyncAnthropic

from clients.floor import PROMPT


class AnthropicSdk:
    runtime = "asyncio"
    apis = ("anthropic",)
    scenarios = ("b", "c", "d")

    def __init__(self, base_url: str, api: str) -> None:
        self.client = AsyncAnthropic(base_url=base_url, api_key="sk-bench", max_retries=0)

    async def __aenter__(self) -> AnthropicSdk:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.close()

    async def call(self, model: str) -> str:
        message = await self.client.messages.create(
            model=model, messages=[{"role": "user", "content": PROMPT}], max_tokens=1024
        )
        return "".join(b.text for b in message.content if b.type == "text")

    async def stream(self, model: str) -> tuple[int, int]:
        deltas = chars = 0
        stream = await self.client.messages.create(
            model=model,
            messages=[{"role": "user", "content": PROMPT}],
            max_tokens=1024,
            stream=True,
        )
        async with stream:
            async for event in stream:
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    deltas += 1
                    chars += len(event.delta.text)
        return deltas, chars
