"""kova.serve.app mounted in a user's own FastAPI app served by Hypercorn's trio worker (the
host app's lifespan runs the mounted app's), and a client leaving mid-turn cancels the tool
the turn was running."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import httpx2
import pytest
import trio
from fastapi import FastAPI

import kova.serve
from kova.agent import AgentBuilder
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import tool

from ._agents import TOKEN, open_agent
from ._serving import serving

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = [
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore2.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpx2.:ResourceWarning"),
]


async def test_mounted_in_a_fastapi_app_with_its_lifespan() -> None:
    async with open_agent() as (agent, _):
        agents = kova.serve.app(agent, token=TOKEN)

        @asynccontextmanager
        async def lifespan(app: FastAPI) -> AsyncIterator[None]:
            async with agents.router.lifespan_context(agents):  # opens /mcp's sessions too
                yield

        host = FastAPI(lifespan=lifespan)
        host.mount("/agents", agents)

        @host.get("/health")
        async def health() -> dict[str, bool]:
            return {"ok": True}

        async with serving(host) as url:
            async with httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}) as client:
                assert (await client.get(url + "/health")).json() == {"ok": True}
                answer = await client.post(
                    url + "/agents/v1/chat/completions",
                    json={"model": "helper", "messages": [{"role": "user", "content": "hi"}]},
                )
                models = await client.get(url + "/agents/v1/models")
    assert answer.json()["choices"][0]["message"]["content"] == "You said: hi"
    assert [m["id"] for m in models.json()["data"]] == ["helper"]


async def test_a_client_leaving_mid_tool_call_cancels_the_tool() -> None:
    started = trio.Event()
    cancelled = trio.Event()

    @tool
    async def slow_lookup(city: str) -> str:
        """A lookup that takes forever.

        Args:
            city: the city.
        """
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()
        return "never"

    provider = ScriptedProvider(
        [reply_tool_calls(("slow_lookup", {"city": "Oslo"})), reply_text("unused")]
    )
    agent = AgentBuilder().provider(provider).name("slow").tool(slow_lookup).build()
    body = {"model": "slow", "messages": [{"role": "user", "content": "go"}], "stream": True}
    async with serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}) as client:
            async with client.stream("POST", url + "/v1/chat/completions", json=body):
                with trio.fail_after(10):
                    await started.wait()
            # Leaving the block closed the connection mid-stream: the tool is cancelled.
            with trio.fail_after(0.5):
                await cancelled.wait()
    assert len(provider.requests) == 1  # the turn went no further
