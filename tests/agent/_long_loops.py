"""Seeded long tool loops on the wire-level fake servers, for the generated test of issue 49
(tests/agent/test_context_long_loops.py runs 120; bench/context_loops.py runs 1,000).

Each run: one of the five native formats or Responses, a small window, a random policy that
ends in one of kova's bounding strategies, a model that calls a tool 8-40 times (one to three
calls a step, results of random sizes, now and then one larger than the window) and then
answers. The fake server is the judge: it counts a request over the window as an overflow
(and answers it as the provider would), checks that every tool call in a request has its
result right after it and every result its call, and its own wire checks refuse anything
malformed (the run then fails).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import attrs
from _fake_formats import NATIVE

from kova import Message, ToolResult, ToolUse
from kova.agent import AgentBuilder, ClearToolResults, SlidingWindow, Summarize
from kova.providers import heuristic_count_tokens
from kova.testing import ErrorReply, Script, reply_text, reply_tool_calls
from kova.tools import tool

if TYPE_CHECKING:
    from collections.abc import Sequence

    from kova.testing import ScriptRequest


@tool
async def read(n: int, size: int) -> str:
    """Read a part.

    Args:
        n: which part.
        size: how many characters.
    """
    return f"part {n}: " + "x" * size


@attrs.define
class Tally:
    """What the fake servers saw over the runs."""

    runs: int = 0
    requests: int = 0
    summaries: int = 0
    overflows: int = 0
    unpaired: list[str] = attrs.field(factory=list)
    compacted_runs: int = 0
    by_format: dict[str, int] = attrs.field(factory=dict)


def _pair_faults(messages: Sequence[Message]) -> list[str]:
    faults = []
    for index, message in enumerate(messages):
        calls = [b.id for b in message.content if isinstance(b, ToolUse)]
        results = [b.tool_use_id for b in message.content if isinstance(b, ToolResult)]
        if calls:
            after = messages[index + 1] if index + 1 < len(messages) else None
            answered = (
                [b.tool_use_id for b in after.content if isinstance(b, ToolResult)]
                if after is not None
                else []
            )
            if sorted(answered) != sorted(calls):
                faults.append(f"calls {calls} answered by {answered}")
        if results:
            before = messages[index - 1] if index else None
            made = (
                [b.id for b in before.content if isinstance(b, ToolUse)]
                if before is not None
                else []
            )
            if sorted(results) != sorted(made):
                faults.append(f"results {results} for calls {made}")
    return faults


async def one_run(seed: int, tally: Tally) -> None:
    """One seeded long tool loop, counted in ``tally``; raises if the turn fails."""
    rng = random.Random(seed)
    fmt = NATIVE[seed % len(NATIVE)]
    window = rng.choice([2_000, 3_000, 4_000, 6_000])
    steps = rng.randint(8, 40)
    first: list = [ClearToolResults(keep_last=rng.randint(0, 4))] if rng.random() < 0.6 else []
    last = SlidingWindow() if rng.random() < 0.6 else Summarize(keep_last=rng.randint(2, 6))
    strategies = [*first, last]
    if isinstance(last, Summarize) and rng.random() < 0.5:
        strategies.append(SlidingWindow())  # a summary that alone cannot make it fit
    done = 0

    def model(request: ScriptRequest):
        nonlocal done
        messages = request.messages
        tally.requests += 1
        faults = _pair_faults(messages)
        tally.unpaired.extend(f"{fmt.name} seed {seed}: {fault}" for fault in faults)
        if heuristic_count_tokens(messages, request.tools) > window:
            tally.overflows += 1
            return ErrorReply(400, "prompt is too long", "invalid_request_error")
        if "<conversation>" in messages[-1].text:
            tally.summaries += 1
            return reply_text(f"notes: {done} parts read so far")
        if done >= steps:
            return reply_text(f"read {done} parts")
        calls = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            size = rng.choice([rng.randint(10, 400), rng.randint(400, 4_000)])
            if rng.random() < 0.04:
                size = window * 6  # alone larger than the window
            calls.append(("read", {"n": done, "size": size}))
            done += 1
        return reply_tool_calls(*calls)

    async with fmt.open_server(Script(model)) as server:
        builder = AgentBuilder().provider(fmt.build(server)).tools(read).max_iterations(200)
        builder = builder.context(*strategies, window=window)
        async with builder.build() as agent:
            response = await agent.run([Message.user("read every part")])
    assert response.text.startswith("read "), response.text
    tally.runs += 1
    tally.by_format[fmt.name] = tally.by_format.get(fmt.name, 0) + 1
    if response.compaction is not None:
        tally.compacted_runs += 1
    assert len([r for r in server.requests if r.decoded is not None]) >= steps // 3
