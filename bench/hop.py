"""The actor hop on its own: what a provider actor adds per streamed event.

1. Record the batches kova's provider really produces for a ``chunks``-chunk stream from the
   mock server (so the batch sizes are the transport's, not chosen here), and the CPU per
   event of that real stream.
2. Replay those batches from a fake provider (one checkpoint per batch, standing in for the
   network read) read directly, and through ``spawn_provider`` + ``ProviderRef``: the
   difference in CPU per event is the hop (agent -> provider actor -> back).
"""

from __future__ import annotations

import gc
import statistics
import time
from contextlib import asynccontextmanager, nullcontext
from typing import Any

import trio
from clients.kova_client import make_provider

from kova.providers import ChatRequest


class _Replay:
    __slots__ = ("_batches", "_i")

    def __init__(self, batches: list[Any]) -> None:
        self._batches = batches
        self._i = 0

    def __aiter__(self) -> _Replay:
        return self

    async def __anext__(self) -> Any:
        await trio.lowlevel.checkpoint()
        i = self._i
        if i >= len(self._batches):
            raise StopAsyncIteration
        self._i = i + 1
        return self._batches[i]


class ReplayProvider:
    """A provider that streams recorded batches with no I/O."""

    name = "replay"

    def __init__(self, batches: list[Any]) -> None:
        self.batches = batches

    def open(self) -> Any:
        return nullcontext()

    @asynccontextmanager
    async def chat_completion_stream(self, request: Any) -> Any:
        yield _Replay(self.batches)

    async def chat_completion(self, request: Any) -> Any:
        raise NotImplementedError

    async def list_models(self) -> Any:
        return []

    async def count_tokens(self, request: Any) -> int:
        return 0


async def _consume(provider: Any, messages: Any, config: Any) -> int:
    n = 0
    async with provider.chat_completion_stream(
        ChatRequest(messages=messages, tools=(), config=config)
    ) as batches:
        async for batch in batches:
            for _event in batch:
                n += 1
    return n


async def _hop(size: dict[str, Any]) -> dict[str, Any]:
    from kova import InferenceConfig, Message, Text
    from kova.actors import open_runtime
    from kova.agent._provider_ref import spawn_provider

    chunks, repeats = size["chunks"], size["repeats"]
    api = size.get("api", "openai")
    messages = (Message(role="user", content=(Text(text="hi"),)),)
    config = InferenceConfig(model=f"bench-n{chunks}", max_tokens=1024)

    real = make_provider(size["base_url"], api)
    recorded: list[Any] = []
    real_cpu: list[float] = []
    async with real.open():
        async with real.chat_completion_stream(
            ChatRequest(messages=messages, tools=(), config=config)
        ) as batches:
            async for batch in batches:
                recorded.append(batch)
        events = sum(len(b) for b in recorded)
        for _ in range(repeats):
            gc.collect()
            t0 = time.process_time()
            await _consume(real, messages, config)
            real_cpu.append((time.process_time() - t0) / events * 1e6)

    replay = ReplayProvider(recorded)
    direct: list[float] = []
    actor: list[float] = []
    async with open_runtime() as runtime:
        ref = await spawn_provider(runtime, replay)
        for _ in range(repeats + 1):  # the first round of each is a warm-up
            gc.collect()
            t0 = time.process_time()
            assert await _consume(replay, messages, config) == events
            direct.append((time.process_time() - t0) / events * 1e6)
            gc.collect()
            t0 = time.process_time()
            assert await _consume(ref, messages, config) == events
            actor.append((time.process_time() - t0) / events * 1e6)
        await ref.stop()
    direct, actor = direct[1:], actor[1:]
    hop_us = statistics.median(actor) - statistics.median(direct)
    event_us = statistics.median(real_cpu)
    return {
        "api": api,
        "chunks": chunks,
        "events": events,
        "batches": len(recorded),
        "events_per_batch": events / len(recorded),
        "stream": real_cpu,
        "direct": direct,
        "actor": actor,
        "hop_us": hop_us,
        "event_us": event_us,
        "hop_share": hop_us / event_us,
    }


def actor_hop(size: dict[str, Any]) -> dict[str, Any]:
    return trio.run(_hop, size)
