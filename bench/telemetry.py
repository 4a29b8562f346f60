"""What observing a turn costs: nobody listening, a no-op subscriber, OpenTelemetry.

One turn = a streamed answer asking for two tool calls, then a streamed 200-chunk answer,
from the scripted provider (no network: only kova's own path is measured). Each mode runs
``--turns`` turns per round, ``--rounds`` rounds interleaved, and reports the median
CPU microseconds per turn (process time, so a busy machine's scheduling does not count; one
trio run per round).

``--modes none`` uses only APIs that predate the event stream, so the same script measures
``main`` before it: ``PYTHONPATH=/path/to/old/checkout python bench/telemetry.py --modes
none`` against this checkout's figure is the "nobody listens costs nothing" check.

    python bench/telemetry.py                       # none, subscriber, otel
    python bench/telemetry.py --modes none --turns 300
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import trio

from kova import Message
from kova.agent import AgentBuilder
from kova.testing import ScriptedProvider, StreamReply, reply_text, reply_tool_calls
from kova.tools import tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def script(turns: int) -> list[Any]:
    replies: list[Any] = []
    for _ in range(turns):
        replies.append(
            StreamReply(
                response=reply_tool_calls(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4}))
            )
        )
        replies.append(StreamReply(response=reply_text("x" * 200), chunk_chars=1))
    return replies


def attach(agent: Any, mode: str) -> Any:
    if mode == "none":
        return None
    if mode == "subscriber":
        return agent.telemetry.subscribe(lambda event: None)
    if mode == "otel":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from kova.telemetry.otel import OtelSubscriber

        provider = TracerProvider()
        exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        return agent.telemetry.subscribe(OtelSubscriber(tracer_provider=provider))
    raise SystemExit(f"unknown mode {mode!r}")


async def one_round(mode: str, turns: int) -> float:
    provider = ScriptedProvider(script(turns + 1))
    history = [Message.user("add these")]
    async with AgentBuilder().provider(provider).tool(add).build() as agent:
        attach(agent, mode)
        async with agent.stream(history) as events:  # warm-up turn
            async for _ in events:
                pass
        started = time.process_time()
        for _ in range(turns):
            async with agent.stream(history) as events:
                async for _ in events:
                    pass
        return (time.process_time() - started) / turns * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="none,subscriber,otel")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    modes = args.modes.split(",")
    samples: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(args.rounds):
        for mode in modes:  # interleaved, so machine noise hits every mode alike
            samples[mode].append(trio.run(one_round, mode, args.turns))
    for mode in modes:
        values = samples[mode]
        print(
            f"{mode:<11} median {statistics.median(values):8.1f} us/turn  "
            f"min {min(values):8.1f}  max {max(values):8.1f}  ({args.rounds} x {args.turns} turns)"
        )


if __name__ == "__main__":
    main()
