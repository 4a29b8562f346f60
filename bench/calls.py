"""Python calls per ``Agent.run`` on an instant provider (no I/O), counted by cProfile:
deterministic, so a noisy machine cannot blur it.

    PYTHONPATH=<tree> .venv/bin/python bench/calls.py [--runs 1000] [--stream] [--list]
        [--instructions]

Opens one agent on ``bench/agentpath.py``'s ``_Instant`` provider, warms it up, then
profiles ``--runs`` calls of ``agent.run("hi")`` (``--stream``: one ``agent.stream("hi")``
read to its end, on an instant streaming provider) and prints the Python calls per run;
``--list`` adds each function's calls per run. Also prints the modules an opened, run agent
loaded in all (``sys.modules``; genai_prices and pydantic are the pricing's). Point
PYTHONPATH at the tree to measure (the shared venv's editable install otherwise imports
another checkout's kova). ``--instructions`` instead runs this script under valgrind's
callgrind twice (200 and 1,000 calls, no profiler) and prints the instructions per call (the
difference over the difference: start-up and warm-up cancel out).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import trio  # noqa: E402


async def _main(
    runs: int, stream: bool, listing: bool, profile: bool = True, tool: bool = False
) -> None:
    import agentpath

    import kova
    from kova import StopReason, TextDelta, ToolUse, Usage
    from kova._models import StopEvent, UsageEvent
    from kova.agent import AgentBuilder
    from kova.providers import ModelResponse
    from kova.tools import tool as as_tool

    class _InstantStream(agentpath._Instant):
        """Streams one short answer in two batches, with no I/O."""

        def chat_completion_stream(self, request: object) -> _Batches:
            return _Batches()

    class _Batches:
        async def __aenter__(self) -> _Batches:
            self._left = [
                [TextDelta(text="sun")],
                [TextDelta(text="ny"), StopEvent(stop_reason=StopReason.END_TURN)],
                [UsageEvent(usage=Usage(input_tokens=10, output_tokens=5))],
            ]
            return self

        async def __aexit__(self, *exc_info: object) -> None:
            return None

        def __aiter__(self) -> _Batches:
            return self

        async def __anext__(self) -> object:
            if not self._left:
                raise StopAsyncIteration
            return self._left.pop(0)

    class _InstantTool(agentpath._Instant):
        """Asks for one tool call, then answers: one tool round trip per turn, no I/O."""

        def __init__(self) -> None:
            super().__init__()
            self._call = ModelResponse(
                content=(ToolUse(id="c1", name="get_weather", input={"city": "Paris"}),),
                stop_reason=StopReason.TOOL_USE,
                usage=Usage(input_tokens=10, output_tokens=5),
            )

        async def chat_completion(self, request: object) -> ModelResponse:
            last = request.messages[-1]  # type: ignore[attr-defined]
            return self._answer if last.role == "tool" else self._call

    async def get_weather(city: str) -> str:
        """Weather for a city.

        Args:
            city: The city name.
        """
        return "sunny"

    builder = AgentBuilder()
    if tool:
        builder = builder.provider(_InstantTool()).tool(as_tool(get_weather))
    else:
        builder = builder.provider(_InstantStream() if stream else agentpath._Instant())
    agent = builder.build()

    async def once() -> None:
        if stream:
            async with agent.stream("hi") as events:
                async for _ in events:
                    pass
        else:
            await agent.run("hi")

    async with agent:
        for _ in range(50):
            await once()
        if not profile:
            for _ in range(runs):
                await once()
            return
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(runs):
            await once()
        profiler.disable()
    stats = pstats.Stats(profiler)
    total = sum(value[1] for value in stats.stats.values())  # type: ignore[attr-defined]
    print(f"kova from {os.path.dirname(kova.__file__)}")
    what = "stream" if stream else "run"
    print(f"{what}{' + tool' if tool else ''}: {total / runs:.1f} Python calls per call")
    loaded = [m.split(".")[0] for m in sys.modules]
    print(
        f"modules loaded: {len(loaded)}; genai_prices {loaded.count('genai_prices')},"
        f" pydantic {loaded.count('pydantic')}"
    )
    if listing:
        rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][1])  # type: ignore[attr-defined]
        for (path, _line, name), value in rows:
            where = path.split("/kova/")[-1] if "/kova/" in path else os.path.basename(path)
            print(f"{value[1] / runs:6.1f} {where}:{name}")


def _instructions(stream: bool, tool: bool) -> None:
    counts = []
    sizes = (200, 1000)
    for runs in sizes:
        command = [sys.executable, __file__, "--runs", str(runs), "--no-profile"]
        found = []
        for _ in range(2):  # the lower of two: a stray import or bytecode write adds to one
            result = subprocess.run(
                ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command]
                + (["--stream"] if stream else [])
                + (["--tool"] if tool else []),
                capture_output=True,
                text=True,
                env=dict(os.environ, PYTHONHASHSEED="0"),
                check=True,
            )
            found.append(int(re.findall(r"Collected : (\d+)", result.stderr)[-1]))
        counts.append(min(found))
    per = (counts[1] - counts[0]) / (sizes[1] - sizes[0])
    what = "stream" if stream else "run"
    print(f"{what}{' + tool' if tool else ''}: {per / 1000:,.1f}k instructions per call")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--tool", action="store_true", help="one async def tool call a turn")
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--no-profile", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.instructions:
        _instructions(args.stream, args.tool)
    elif args.no_profile:
        trio.run(_main, args.runs, args.stream, False, False, args.tool)
    else:
        trio.run(_main, args.runs, args.stream, args.list, True, args.tool)


if __name__ == "__main__":
    main()
