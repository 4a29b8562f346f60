"""What a streamed turn holds while it waits for its answer.

Issue 24's scenario g holds 10,000 ``Agent.stream`` calls at once, every one waiting for its
response head; their peak memory is what kova holds per waiting stream. This compares it,
in one process and with tracemalloc, with raw httpx2 streams waiting on the same server: a
chain of ``asynccontextmanager`` generators (frames, wrapper dicts, trio's set of live async
generators), an exit stack or a kept request body would show here.
"""

from __future__ import annotations

import gc
import math
import tracemalloc
from functools import partial
from typing import TYPE_CHECKING

import httpx2
import trio
import trio.testing

from kova import Message
from kova.agent import AgentBuilder
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

STREAMS = 40
PROMPT = "What is the weather in Paris?"


async def _held_per_stream(
    accepted: trio.MemoryReceiveChannel[None],
    start: Callable[[], Awaitable[None]],
    *,
    traced: bool = True,
) -> float:
    """Bytes traced per stream while ``STREAMS`` of ``start`` wait for their heads."""
    gc.collect()
    if traced:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        async with trio.open_nursery() as nursery:
            for _ in range(STREAMS):
                nursery.start_soon(start)
            with trio.fail_after(30):
                for _ in range(STREAMS):  # every stream connected; then each sent its request
                    await accepted.receive()
                await trio.testing.wait_all_tasks_blocked(0.05)
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
            nursery.cancel_scope.cancel()
    finally:
        tracemalloc.stop()
    return held / STREAMS


async def test_a_waiting_agent_stream_holds_little_more_than_a_raw_httpx2_stream() -> None:
    arrived, accepted = trio.open_memory_channel[None](math.inf)

    async def never_answers(stream: trio.SocketStream) -> None:
        arrived.send_nowait(None)
        while await stream.receive_some():
            pass

    async with trio.open_nursery() as server:
        listeners = await server.start(partial(trio.serve_tcp, host="127.0.0.1"), never_answers, 0)
        port = listeners[0].socket.getsockname()[1]
        base_url = f"http://127.0.0.1:{port}"
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(model="m", base_url=base_url, api_key="sk-test", timeout=60.0)
        )
        history = [Message.user(PROMPT)]
        limits = httpx2.Limits(max_connections=STREAMS + 10, max_keepalive_connections=100)
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": PROMPT}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        async with (
            AgentBuilder().provider(provider).build() as agent,
            httpx2.AsyncClient(
                headers={"authorization": "Bearer sk-test"}, timeout=60.0, limits=limits
            ) as client,
        ):

            async def agent_stream() -> None:
                async with agent.stream(history) as events:
                    async for _ in events:
                        pass

            async def raw_stream() -> None:
                async with client.stream("POST", base_url + "/v1/chat/completions", json=body):
                    pass

            # Each path once first, so nothing measured is a first use's lazy set-up.
            await _held_per_stream(accepted, agent_stream, traced=False)
            await _held_per_stream(accepted, raw_stream, traced=False)
            kova = await _held_per_stream(accepted, agent_stream)
            raw = await _held_per_stream(accepted, raw_stream)
        server.cancel_scope.cancel()
    print(f"held per waiting stream: kova {kova:.0f} B, raw httpx2 {raw:.0f} B")
    assert kova <= 1.2 * raw, (kova, raw)
