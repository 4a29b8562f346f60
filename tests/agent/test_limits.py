"""Usage limits through the agent: each limit exactly at its edge, per agent and per call."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from pydantic import BaseModel

from kova import Message
from kova.agent import Agent, AgentBuilder, TurnCompleted, UsageLimits
from kova.errors import BuildError, UsageLimitExceeded
from kova.testing import FunctionProvider, ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import ToolRegistry, tool

if TYPE_CHECKING:
    from collections.abc import Sequence

HISTORY = (Message.user("go"),)
RUNS: list[int] = []


@tool
def step(n: int) -> str:
    """Do step n."""
    RUNS.append(n)
    return f"step {n} done"


@pytest.fixture(autouse=True)
def _clear() -> None:
    RUNS.clear()


def looping(calls_per_step: int = 1) -> FunctionProvider:
    """A model that always asks for more tools (10 in, 5 out per call)."""
    return FunctionProvider(
        lambda request: reply_tool_calls(*[("step", {"n": i}) for i in range(calls_per_step)])
    )


@pytest.mark.parametrize("limit", [1, 3])
async def test_the_requests_limit_sends_exactly_that_many_calls(limit: int) -> None:
    provider = looping()
    agent = AgentBuilder().provider(provider).tool(step).usage_limits(requests=limit).build()
    async with agent:
        with pytest.raises(UsageLimitExceeded) as caught:
            await agent.run(HISTORY)
    assert len(provider.requests) == limit
    assert len(RUNS) == limit  # every reply's tools ran; the next call was not sent
    assert (caught.value.limit, caught.value.value, caught.value.figure) == (
        "requests",
        limit,
        limit + 1,
    )


async def test_a_turn_exactly_at_the_requests_limit_finishes() -> None:
    provider = ScriptedProvider([reply_tool_calls(("step", {"n": 1})), reply_text("done")])
    async with AgentBuilder().provider(provider).tool(step).build() as agent:
        response = await agent.run(HISTORY, limits=UsageLimits(requests=2))
    assert response.text == "done"


async def test_the_tool_calls_limit_does_not_start_the_step_that_would_go_over() -> None:
    provider = looping(calls_per_step=2)
    agent = AgentBuilder().provider(provider).tool(step).build()
    async with agent:
        with pytest.raises(UsageLimitExceeded) as caught:
            await agent.run(HISTORY, limits=UsageLimits(tool_calls=4))
    assert sorted(RUNS) == [0, 0, 1, 1]  # two steps of two: exactly 4; the third never started
    assert (caught.value.limit, caught.value.figure) == ("tool_calls", 6)


@pytest.mark.parametrize(
    ("limits", "figure"),
    [
        (UsageLimits(input_tokens=20), 30),
        (UsageLimits(output_tokens=10), 15),
        (UsageLimits(total_tokens=30), 45),
    ],
)
async def test_token_limits_allow_the_edge_and_end_the_turn_past_it(
    limits: UsageLimits, figure: int
) -> None:
    # Two calls land exactly on each limit; the third goes over.
    provider = looping()
    async with AgentBuilder().provider(provider).tool(step).build() as agent:
        with pytest.raises(UsageLimitExceeded) as caught:
            await agent.run(HISTORY, limits=limits)
        assert caught.value.figure == figure
        assert len(provider.requests) == 3
        assert len(RUNS) == 2  # the reply that went over did not get its tools run
        # At the edge the turn finishes.
        edge = ScriptedProvider([reply_tool_calls(("step", {"n": 1})), reply_text("done")])
    async with AgentBuilder().provider(edge).tool(step).build() as agent:
        assert (await agent.run(HISTORY, limits=limits)).text == "done"


async def test_counting_tokens_before_each_request() -> None:
    provider = looping()
    limits = UsageLimits(input_tokens=100, count_tokens_before_request=True)
    agent = AgentBuilder().provider(provider).tool(step).usage_limits(limits).build()
    big = Message.user("x" * 1000)  # about 250 tokens by the offline estimate
    async with agent:
        with pytest.raises(UsageLimitExceeded) as caught:
            await agent.run([big])
    assert provider.requests == []  # counted, then refused before sending
    assert caught.value.limit == "input_tokens"
    assert caught.value.figure > 100


async def test_a_streamed_turn_over_a_limit_raises_from_the_iteration() -> None:
    provider = looping()
    async with AgentBuilder().provider(provider).tool(step).build() as agent:
        events = []
        with pytest.raises(UsageLimitExceeded):
            async with agent.stream(HISTORY, limits=UsageLimits(requests=1)) as stream:
                async for event in stream:
                    events.append(event)
    assert not any(isinstance(event, TurnCompleted) for event in events)


async def test_limit_options_are_checked() -> None:
    with pytest.raises(BuildError, match="requests"):
        AgentBuilder().usage_limits(requests=-1)
    with pytest.raises(BuildError, match="not both"):
        AgentBuilder().usage_limits(UsageLimits(), requests=1)
    with pytest.raises(BuildError, match="UsageLimits"):
        AgentBuilder().usage_limits({"requests": 1})  # type: ignore[arg-type]
    agent = AgentBuilder().provider(ScriptedProvider([reply_text("x")])).build()
    async with agent:
        with pytest.raises(TypeError, match="limits"):
            await agent.run(HISTORY, limits={"requests": 1})  # type: ignore[arg-type]


# --- tools are read for every model call ------------------------------------------------------


async def test_tool_definitions_are_read_for_every_model_call() -> None:
    registry = ToolRegistry()

    @tool
    def install() -> str:
        """Swap the tools: add 'fresh', remove 'step'."""
        registry.register(fresh)
        registry.unregister("step")
        return "swapped"

    @tool
    def fresh() -> str:
        """A tool that appeared mid-turn."""
        return "new"

    registry.register(step)
    registry.register(install)
    provider = ScriptedProvider([reply_tool_calls(("install", {})), reply_text("done")])
    async with AgentBuilder().provider(provider).tool_registry(registry).build() as agent:
        await agent.run(HISTORY)
    first, second = (sorted(t.name for t in r.request.tools) for r in provider.requests)
    assert first == ["install", "step"]
    assert second == ["fresh", "install"]  # the very next call, in the same turn


# --- the same limits through stream_structured ---------------------------------------------


class Answer(BaseModel):
    answer: str


ANSWER = json.dumps({"answer": "done"})


async def drain_structured(
    agent: Agent, history: Sequence[Message], limits: object
) -> list[object]:
    seen: list[object] = []
    async with agent.stream_structured(history, Answer, limits=limits) as values:  # type: ignore[arg-type]
        async for value in values:
            seen.append(value)
    return seen


@pytest.mark.parametrize(
    ("limits", "kind", "figure", "requests", "runs"),
    [
        (UsageLimits(requests=2), "requests", 3, 2, 2),
        (UsageLimits(tool_calls=1), "tool_calls", 2, 2, 1),
        (UsageLimits(input_tokens=20), "input_tokens", 30, 3, 2),
        (UsageLimits(output_tokens=10), "output_tokens", 15, 3, 2),
        (UsageLimits(total_tokens=30), "total_tokens", 45, 3, 2),
    ],
)
async def test_stream_structured_enforces_each_limit(
    limits: UsageLimits, kind: str, figure: int, requests: int, runs: int
) -> None:
    provider = looping()
    async with AgentBuilder().provider(provider).tool(step).build() as agent:
        with pytest.raises(UsageLimitExceeded) as caught:
            await drain_structured(agent, HISTORY, limits)
        assert (caught.value.limit, caught.value.figure) == (kind, figure)
        assert len(provider.requests) == requests
        assert len(RUNS) == runs
        # At the edge (one tool step, then the answer: 2 requests, 1 call, 20/10/30 tokens)
        # the structured value arrives.
    edge = ScriptedProvider([reply_tool_calls(("step", {"n": 1})), reply_text(ANSWER)])
    async with AgentBuilder().provider(edge).tool(step).build() as agent:
        at_edge = UsageLimits(requests=2, tool_calls=1, input_tokens=20, output_tokens=10)
        assert (await drain_structured(agent, HISTORY, at_edge))[-1] == Answer(answer="done")


async def test_stream_structured_counts_tokens_before_each_request() -> None:
    provider = looping()
    limits = UsageLimits(input_tokens=100, count_tokens_before_request=True)
    async with AgentBuilder().provider(provider).tool(step).build() as agent:
        with pytest.raises(UsageLimitExceeded) as caught:
            await drain_structured(agent, [Message.user("x" * 1000)], limits)
    assert provider.requests == []
    assert caught.value.limit == "input_tokens"


async def test_stream_structured_limits_apply_to_each_attempt_and_replace_the_agents() -> None:
    # As run_structured: a re-ask is a new attempt with the same limits, and limits= replaces
    # the builder's (which would refuse the first request here).
    provider = ScriptedProvider([reply_text('{"answer": 3}'), reply_text(ANSWER)])
    agent = AgentBuilder().provider(provider).usage_limits(input_tokens=1).build()
    async with agent:
        seen = await drain_structured(agent, HISTORY, UsageLimits(requests=1))
        assert seen[-1] == Answer(answer="done")
        assert len(provider.requests) == 2
        with pytest.raises(TypeError, match="limits"):
            agent.stream_structured(HISTORY, Answer, limits={"requests": 1})  # type: ignore[call-overload]
