"""What an input guard that passes costs beside the model: a 50 ms guard beside a 200 ms
model answer (issue 50's Done-when: nothing beyond max(model, guard)).

    .venv/bin/python bench/guard_latency.py [--rounds 15] [--json out.json]

The fake OpenAI-compatible server of bench/guard_trips.py (loopback, a thread of its own)
answers after 200 ms, with the real provider over HTTP, run and streamed. In alternating
rounds, one turn each of:

- ``floor``: the agent without guards (the model's 200 ms and kova's own cost);
- ``beside``: an ``InputGuard`` that sleeps 50 ms and passes, beside the model call;
- ``blocking``: the same guard with ``blocking=True`` (before the call: ~250 ms, for scale).

Prints the median wall time of each and its ratio to the floor of the same run; ``beside``
should be 1.00 (the guard hidden behind the model), ``blocking`` about 1.25.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from contextlib import AsyncExitStack
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import trio  # noqa: E402
from guard_trips import Server  # noqa: E402

from kova.agent import AgentBuilder, InputGuard, RetryConfig  # noqa: E402
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig  # noqa: E402

PROMPT = "chunks=10 gap=0.02"  # ten chunks 20 ms apart: 200 ms, streamed or whole
KINDS = ("floor", "beside", "blocking")


async def _screen(text: str) -> None:
    await trio.sleep(0.05)


def _agent(base_url: str, kind: str) -> Any:
    config = OpenAiConfig(model="fake", base_url=base_url, api_key="sk-fake", timeout=30)
    builder = (
        AgentBuilder()
        .provider(OpenAiCompatibleProvider(config))
        .retry_config(RetryConfig(max_retries=0))
    )
    if kind != "floor":
        builder.guards(InputGuard(_screen, blocking=kind == "blocking"))
    return builder.build()


async def _rounds(base_url: str, rounds: int) -> dict[str, dict[str, list[float]]]:
    times: dict[str, dict[str, list[float]]] = {
        how: {kind: [] for kind in KINDS} for how in ("run", "stream")
    }
    agents = {kind: _agent(base_url, kind) for kind in KINDS}
    async with AsyncExitStack() as stack:
        for agent in agents.values():
            await stack.enter_async_context(agent)
        for agent in agents.values():  # warm: a connection each
            await agent.run(PROMPT)
        for index in range(rounds):
            order = KINDS if index % 2 == 0 else tuple(reversed(KINDS))
            for kind in order:
                agent = agents[kind]
                started = time.perf_counter()
                await agent.run(PROMPT)
                times["run"][kind].append(time.perf_counter() - started)
                started = time.perf_counter()
                async with agent.stream(PROMPT) as events:
                    async for _ in events:
                        pass
                times["stream"][kind].append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    server = Server()
    server.start()
    try:
        times = trio.run(_rounds, server.base_url, args.rounds)
    finally:
        server.stop()
    figures: dict[str, Any] = {"rounds": args.rounds}
    for how, kinds in times.items():
        floor = statistics.median(kinds["floor"])
        figures[how] = {
            kind: {
                "median_ms": round(statistics.median(values) * 1000, 2),
                "x_floor": round(statistics.median(values) / floor, 3),
            }
            for kind, values in kinds.items()
        }
    print(json.dumps(figures, indent=2))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(figures, file, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
