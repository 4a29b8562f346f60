"""The agent path's per-call overhead, in one process, next to the floor.

    .venv/bin/python bench/agentpath.py [--calls 200] [--rounds 7] [--api openai] [--profile]

Starts the mock server and, in one trio run, interleaves rounds of:

- (b) ``calls`` sequential non-streaming calls: the floor (raw httpx2), kova's provider
  called directly, the same through a provider actor, and ``Agent.run`` on an agent
  without tools;
- (e) ``calls`` agent turns with one tool round trip: the floor's hand-written loop and
  ``Agent.run`` on an agent with one ``@tool``: an ``async def`` (as the floor's tool), a
  plain ``def`` (kova runs it in a worker thread) and a plain ``def`` declared
  ``@tool(inline=True)`` (called in the turn's task, as the floor calls its function).
- (b) ``Agent.run`` on an *instant* provider (no I/O: it returns one fixed answer), alone,
  and after each floor call: the agent's own work per call, and what it costs beside real
  I/O. The second row minus the floor is usually about three times the first: the agent's
  code, run between HTTP calls, evicts what the HTTP path kept warm in the CPU's caches and
  branch predictors, a cost instruction counts (``bench/instructions.py``) do not show.

Every client is open for the whole run and the rounds alternate between them, so machine
noise hits them alike. Prints the median client CPU and wall per call (us) and the ratio to
the floor of the same round. ``--profile`` instead runs ``cProfile`` over one round of
``Agent.run`` calls and one of tool turns and prints the top functions by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import logging
import os
import pstats
import statistics
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import trio  # noqa: E402
from clients.floor import Httpx2Trio  # noqa: E402
from clients.kova_client import Kova, KovaActor, KovaAgent  # noqa: E402
from run import MockServer, _pin_client, prepare_bodies  # noqa: E402

from kova import InferenceConfig, Message, StopReason, Text, Usage  # noqa: E402
from kova.agent import AgentBuilder  # noqa: E402
from kova.providers import ModelResponse  # noqa: E402

ANSWER = 20


class _Instant:
    """A provider with no I/O: every call returns the same short answer at once."""

    name = os.environ.get("INSTANT_NAME", "instant")

    def __init__(self) -> None:
        self._answer = ModelResponse(
            content=(Text(text="sunny"),),
            stop_reason=StopReason.END_TURN,
            usage=Usage(input_tokens=10, output_tokens=5),
        )

    def open(self) -> _Nothing:
        return _Nothing()

    async def chat_completion(self, request: object) -> ModelResponse:
        return self._answer

    def chat_completion_stream(self, request: object) -> Any:
        raise NotImplementedError("the instant provider answers calls only")


class _Nothing:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc_info: object) -> None:
        return None


async def _round(fn: Any, n: int) -> tuple[float, float]:
    gc.collect()
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        await fn()
    return (time.process_time() - c0) / n * 1e6, (time.perf_counter() - w0) / n * 1e6


_TOOLS: Any = None


async def alternate(
    calls: dict[str, Any], base_of: dict[str, str], n: int, rounds: int
) -> dict[str, tuple[float, float, float, float]]:
    """Interleave ``rounds`` rounds of ``n`` calls of every row (the order reversed every
    other round, so drift hits every row alike); per row the medians of CPU and wall per
    call (us) and of its ratios to its base row (``base_of[row]``) in the same round."""
    cpu: dict[str, list[float]] = {k: [] for k in calls}
    wall: dict[str, list[float]] = {k: [] for k in calls}
    ratio_cpu: dict[str, list[float]] = {k: [] for k in calls}
    ratio_wall: dict[str, list[float]] = {k: [] for k in calls}
    for index in range(rounds):
        order = list(calls.items())
        if index % 2:
            order.reverse()
        here = {label: await _round(fn, n) for label, fn in order}
        for label in calls:
            base = here[base_of[label]]
            cpu[label].append(here[label][0])
            wall[label].append(here[label][1])
            ratio_cpu[label].append(here[label][0] / base[0])
            ratio_wall[label].append(here[label][1] / base[1])
    med = statistics.median
    return {
        label: (med(cpu[label]), med(wall[label]), med(ratio_cpu[label]), med(ratio_wall[label]))
        for label in calls
    }


def report(title: str, base: str, medians: dict[str, tuple[float, float, float, float]]) -> None:
    """Print :func:`alternate`'s medians as a markdown table."""
    print(title)
    print(f"| row | CPU us/call | wall us/call | CPU x {base} | wall x {base} |")
    print("|---|---:|---:|---:|---:|")
    for label, (cpu, wall, ratio_cpu, ratio_wall) in medians.items():
        print(f"| {label} | {cpu:.1f} | {wall:.1f} | {ratio_cpu:.4f} | {ratio_wall:.4f} |")


def main_on_mock_server(bench: Any) -> None:
    """``bench(base_url, api, calls, rounds)`` in one trio run beside the mock server
    (scenario b's bodies), with the usual ``--calls``, ``--rounds`` and ``--api``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--api", default="openai")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    server = MockServer()
    _pin_client()
    try:
        size = {"answer": ANSWER, "calls": args.calls, "turns": args.calls}
        server.prepare(args.api, prepare_bodies("b", size, size))
        trio.run(bench, server.base_url, args.api, args.calls, args.rounds)
    finally:
        server.close()


async def _hand_loop(provider: Any, model: str) -> None:
    """The floor's hand-written loop on kova's provider (what the agent adds is the rest)."""
    global _TOOLS
    from clients.floor import PROMPT
    from payloads import TOOL_RESULT

    from kova import InferenceConfig, Message, Text, ToolDefinition, ToolResult
    from kova.providers import ChatRequest

    if _TOOLS is None:
        _TOOLS = (
            (
                ToolDefinition(
                    name="get_weather",
                    description="Weather for a city.",
                    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
                ),
            ),
            InferenceConfig(model=model, max_tokens=1024),
        )
    tools, config = _TOOLS
    history = [Message(role="user", content=(Text(text=PROMPT),))]
    for _ in range(4):
        response = await provider.chat_completion(
            ChatRequest(messages=history, tools=tools, config=config)
        )
        calls = response.tool_uses
        if not calls:
            return
        history.append(Message.assistant(response.content))
        history.append(
            Message.tool_results([ToolResult(content=TOOL_RESULT, tool_use_id=c.id) for c in calls])
        )


async def _bench(base_url: str, api: str, n: int, rounds: int, profile: bool) -> None:
    turn_model = f"bench-tool-n{ANSWER}"
    floor = Httpx2Trio(base_url, api)
    direct = Kova(base_url, api)
    actor = KovaActor(base_url, api)
    agent = KovaAgent(base_url, api)
    instant = AgentBuilder().provider(_Instant()).build()
    plain = _def_tool_agent(base_url, api, inline=False)
    inline = _def_tool_agent(base_url, api, inline=True)
    async with floor, direct, actor, agent:
        # The tool agent opens lazily (its runtime enters the bench client's stack) on the
        # first tool turn: before the instant agent's runtime, so they close in order.
        await agent.turn(turn_model)
        async with instant, plain, inline:
            defs = (plain, inline)
            await _rows(floor, direct, actor, agent, instant, api, n, rounds, profile, defs)


def _def_tool_agent(base_url: str, api: str, *, inline: bool) -> Any:
    """An agent whose one tool is a plain ``def`` (in a worker thread, or ``inline``)."""
    from clients.kova_client import make_provider
    from payloads import TOOL_RESULT

    from kova.tools import tool

    def get_weather(city: str) -> str:
        """Weather for a city.

        Args:
            city: The city name.
        """
        return str(TOOL_RESULT)

    provider = make_provider(base_url, api)
    try:
        made = tool(get_weather, inline=inline)
    except TypeError:  # a tree from before @tool(inline=...) (849e8be): its thread hop only
        made = tool(get_weather)
    return AgentBuilder().provider(provider).tool(made).build()


async def _rows(
    floor: Any,
    direct: Any,
    actor: Any,
    agent: Any,
    instant: Any,
    api: str,
    n: int,
    rounds: int,
    profile: bool,
    defs: tuple[Any, Any],
) -> None:
    call_model = f"bench-n{ANSWER}"
    turn_model = f"bench-tool-n{ANSWER}"
    history = [Message.user("What is the weather in Paris?")]
    instant_config = InferenceConfig(model=call_model, max_tokens=1024)
    turn_config = InferenceConfig(model=turn_model, max_tokens=1024)

    async def floor_then_instant() -> None:
        await floor.call(call_model)
        await instant.run(history, config=instant_config)

    rows: dict[str, Any] = {
        "b floor": lambda: floor.call(call_model),
        "b kova provider": lambda: direct.call(call_model),
        "b provider actor": lambda: actor.call(call_model),
        "b Agent.run": lambda: agent.call(call_model),
        "b Agent.run, instant provider": lambda: instant.run(history, config=instant_config),
        "b floor, then Agent.run on an instant provider": floor_then_instant,
        "e floor loop": lambda: floor.turn(turn_model),
        "e same loop on kova provider": lambda: _hand_loop(direct.provider, turn_model),
        "e Agent.run + tool": lambda: agent.turn(turn_model),
        "e Agent.run + plain def tool (thread)": lambda: defs[0].run(history, config=turn_config),
        "e Agent.run + plain def tool (inline=True)": lambda: defs[1].run(
            history, config=turn_config
        ),
    }
    only = os.environ.get("ROWS")
    if only:
        rows = {k: v for k, v in rows.items() if k[0] in only or k == "b floor"}
        if "e" in only:
            rows["e floor loop"] = lambda: floor.turn(turn_model)
    for fn in rows.values():  # warm-up (imports, connections, caches)
        for _ in range(5):
            await fn()
    if profile:
        for label in os.environ.get("PROFILE_ROWS", "b Agent.run,e Agent.run + tool").split(","):
            profiler = cProfile.Profile(time.process_time)
            profiler.enable()
            await _round(rows[label], n)
            profiler.disable()
            print(f"== {label}: {n} calls, top by own time")
            stats = pstats.Stats(profiler)
            if os.environ.get("PROFILE_DUMP"):
                stats.dump_stats(os.environ["PROFILE_DUMP"] + label.replace(" ", "_"))
            stats.sort_stats(os.environ.get("PROFILE_SORT", "tottime")).print_stats(
                int(os.environ.get("PROFILE_TOP", "25"))
            )
        return
    cpu: dict[str, list[float]] = {k: [] for k in rows}
    wall: dict[str, list[float]] = {k: [] for k in rows}
    ratio_cpu: dict[str, list[float]] = {k: [] for k in rows}
    ratio_wall: dict[str, list[float]] = {k: [] for k in rows}
    for _ in range(rounds):
        here: dict[str, tuple[float, float]] = {}
        for label, fn in rows.items():
            here[label] = await _round(fn, n)
            cpu[label].append(here[label][0])
            wall[label].append(here[label][1])
        for label in rows:
            base = here["b floor" if label.startswith("b") else "e floor loop"]
            ratio_cpu[label].append(here[label][0] / base[0])
            ratio_wall[label].append(here[label][1] / base[1])
    print(f"{api} format, {n} calls a round, median of {rounds} interleaved rounds")
    print("| row | CPU us/call | min | wall us/call | min | CPU x floor | calls/s x floor |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label in rows:
        med = statistics.median
        print(
            f"| {label} | {med(cpu[label]):.0f} | {min(cpu[label]):.0f} | "
            f"{med(wall[label]):.0f} | {min(wall[label]):.0f} | "
            f"{med(ratio_cpu[label]):.3f} | {med(1 / r for r in ratio_wall[label]):.3f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--api", default="openai")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    server = MockServer()
    _pin_client()  # the client on the other core, as in run.py
    try:
        size = {"answer": ANSWER, "calls": args.calls, "turns": args.calls}
        server.prepare(args.api, prepare_bodies("b", size, size))
        server.prepare(args.api, prepare_bodies("e", size, size))
        trio.run(_bench, server.base_url, args.api, args.calls, args.rounds, args.profile)
    finally:
        server.close()


if __name__ == "__main__":
    main()
