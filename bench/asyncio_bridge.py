"""What the asyncio bridge costs: ``Agent.run`` and ``Agent.stream`` through ``kova.asyncio``
against the same agent under ``trio.run``, in the same run.

    .venv/bin/python bench/asyncio_bridge.py [--calls 200] [--streams 40] [--chunks 200]
                                             [--rounds 5] [--json out.json]

Starts the benchmark mock server (bench/mockserver.py, its own process, OpenAI format) and
runs, in interleaved rounds, one event loop per round for each mode:

- ``trio``: ``trio.run``, the agent opened with ``async with agent``;
- ``asyncio``: ``asyncio.run``, the agent opened with ``kova.asyncio.open_agent`` (kova as a
  trio guest run on the asyncio loop, its I/O waits in trio's helper thread);
- ``uvloop``: the same on uvloop.

Each round makes ``calls`` sequential ``run`` calls (a 20-word answer) and ``streams``
sequential streamed turns of ``chunks`` chunks each, with the real OpenAI-compatible provider
over HTTP. Prints the median wall and CPU (process time, every thread) per call and per
streamed event, and each bridge mode's ratio to trio's figure of the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import trio  # noqa: E402
import uvloop  # noqa: E402
from clients.kova_client import make_provider  # noqa: E402
from run import MockServer, prepare_bodies  # noqa: E402

import kova.asyncio  # noqa: E402
from kova import InferenceConfig, Message, TextDelta  # noqa: E402
from kova.agent import Agent, AgentBuilder  # noqa: E402

MODES = ("trio", "asyncio", "uvloop")
ANSWER = 20


def build(base_url: str) -> Agent:
    return AgentBuilder().provider(make_provider(base_url, "openai")).build()


class Turns:
    """The round's work, the same under every mode: ``run`` and ``stream`` are the agent's
    methods, or the bridged agent's."""

    def __init__(self, calls: int, streams: int, chunks: int) -> None:
        self.calls = calls
        self.streams = streams
        self.history = [Message.user("hello")]
        self.call_config = InferenceConfig(model=f"bench-n{ANSWER}")
        self.stream_config = InferenceConfig(model=f"bench-n{chunks}")

    async def run_calls(self, run: Any) -> dict[str, float]:
        gc.collect()
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(self.calls):
            response = await run(self.history, config=self.call_config)
            assert response.text
        return {
            "wall": (time.perf_counter() - wall) / self.calls * 1e6,
            "cpu": (time.process_time() - cpu) / self.calls * 1e6,
        }

    async def streamed(self, stream: Any) -> dict[str, float]:
        """``streams`` streamed turns; figures per text event."""
        gc.collect()
        events = 0
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(self.streams):
            async with stream(self.history, config=self.stream_config) as turn:
                async for event in turn:
                    events += isinstance(event, TextDelta)
        return _per_event(cpu, wall, events)


async def _trio_round(base_url: str, turns: Turns) -> dict[str, dict[str, float]]:
    async with build(base_url) as agent:
        return {
            "run": await turns.run_calls(agent.run),
            "stream": await turns.streamed(agent.stream),
        }


async def _bridge_round(base_url: str, turns: Turns) -> dict[str, dict[str, float]]:
    async with kova.asyncio.open_agent(build(base_url)) as bridged:
        return {
            "run": await turns.run_calls(bridged.run),
            "stream": await turns.streamed(bridged.stream),
        }


def _per_event(cpu: float, wall: float, events: int) -> dict[str, float]:
    assert events, "the streams yielded no text"
    return {
        "wall": (time.perf_counter() - wall) / events * 1e6,
        "cpu": (time.process_time() - cpu) / events * 1e6,
    }


def one_round(mode: str, base_url: str, turns: Turns) -> dict[str, dict[str, float]]:
    if mode == "trio":
        return trio.run(_trio_round, base_url, turns)
    if mode == "uvloop":
        return uvloop.run(_bridge_round(base_url, turns))
    return asyncio.run(_bridge_round(base_url, turns))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--streams", type=int, default=40)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)

    server = MockServer()
    try:
        size = {"calls": args.calls, "answer": ANSWER, "chunks": args.chunks}
        warmup = {"calls": 1, "answer": ANSWER, "chunks": args.chunks}
        server.prepare(
            "openai", prepare_bodies("b", size, warmup) + prepare_bodies("c", size, warmup)
        )
        turns = Turns(args.calls, args.streams, args.chunks)
        for mode in MODES:  # warm-up: imports, the first connection
            one_round(mode, server.base_url, Turns(2, 1, args.chunks))
        rounds: dict[str, list[dict[str, dict[str, float]]]] = {mode: [] for mode in MODES}
        for _ in range(args.rounds):
            for mode in MODES:
                rounds[mode].append(one_round(mode, server.base_url, turns))
    finally:
        server.close()

    figures: dict[str, Any] = {}
    for mode in MODES:
        figures[mode] = {
            path: {
                measure: statistics.median(r[path][measure] for r in rounds[mode])
                for measure in ("wall", "cpu")
            }
            for path in ("run", "stream")
        }
    print(
        f"kova.asyncio bridge vs trio.run, same run ({args.rounds} rounds, medians; "
        f"{args.calls} calls, {args.streams} streams x {args.chunks} chunks per round)"
    )
    print(f"{'path':<30} {'wall us':>10} {'cpu us':>10} {'wall x trio':>12} {'cpu x trio':>11}")
    for path, unit in (("run", "per call"), ("stream", "per event")):
        base = figures["trio"][path]
        for mode in MODES:
            figure = figures[mode][path]
            label = f"agent.{path} {'under trio.run' if mode == 'trio' else 'via ' + mode} ({unit})"
            print(
                f"{label:<30} {figure['wall']:>10.1f} {figure['cpu']:>10.1f} "
                f"{figure['wall'] / base['wall']:>11.2f}x {figure['cpu'] / base['cpu']:>10.2f}x"
            )
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"args": vars(args), "figures": figures}, out, indent=2)
    return figures


if __name__ == "__main__":
    main()
