"""LiteLLM's ``acompletion`` (asyncio), OpenAI and Anthropic routes."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_LOG", "ERROR")

import litellm

from clients.floor import PROMPT

litellm.telemetry = False
litellm.suppress_debug_info = True


class LiteLlm:
    runtime = "asyncio"
    apis = ("openai", "anthropic")
    scenarios = ("b", "c", "d")

    def __init__(self, base_url: str, api: str) -> None:
        self.api = api
        if api == "openai":
            self.prefix = "openai/"
            self.api_base = base_url + "/v1"
        else:
            self.prefix = "anthropic/"
            self.api_base = base_url

    async def __aenter__(self) -> LiteLlm:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    def _kwargs(self, model: str) -> dict[str, object]:
        return {
            "model": self.prefix + model,
            "api_base": self.api_base,
            "api_key": "sk-bench",
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": 1024,
            "num_retries": 0,
        }

    async def call(self, model: str) -> str:
        response = await litellm.acompletion(**self._kwargs(model))
        return response.choices[0].message.content or ""

    async def stream(self, model: str) -> tuple[int, int]:
        deltas = chars = 0
        response = await litellm.acompletion(**self._kwargs(model), stream=True)
        async for chunk in response:
            if chunk.choices:
                text = chunk.choices[0].delta.content
                if text:
                    deltas += 1
                    chars += len(text)
        return deltas, chars
