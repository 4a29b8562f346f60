"""The official ``openai`` package (asyncio), Chat Completions."""

from __future__ import annotations

from openai import AsyncOpenAI

from clients.floor import PROMPT


class OpenAiSdk:
    runtime = "asyncio"
    apis = ("openai",)
    scenarios = ("b", "c", "d")

    def __init__(self, base_url: str, api: str) -> None:
        self.client = AsyncOpenAI(base_url=base_url + "/v1", api_key="sk-bench", max_retries=0)

    async def __aenter__(self) -> OpenAiSdk:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.close()

    async def call(self, model: str) -> str:
        response = await self.client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": PROMPT}], max_tokens=1024
        )
        return response.choices[0].message.content or ""

    async def stream(self, model: str) -> tuple[int, int]:
        deltas = chars = 0
        stream = await self.client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": PROMPT}],
            max_tokens=1024,
            stream=True,
            stream_options={"include_usage": True},
        )
        async with stream:
            async for chunk in stream:
                if chunk.choices:
                    text = chunk.choices[0].delta.content
                    if text:
                        deltas += 1
                        chars += len(text)
        return deltas, chars
