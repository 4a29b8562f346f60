"""The tool pool: every step of an agent runs in its caller's task (a streamed one in a task
of the turn stream's nursery), under one limit of ``max_concurrent_tools``."""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING

import trio
import trio.testing

from kova import Role
from kova.actors import open_runtime
from kova.agent import AgentBuilder, ToolCallFinished, ToolCallStarted
from kova.testing import FunctionProvider, reply_text, reply_tool_calls
from kova.tools import tool

if TYPE_CHECKING:
    from kova.providers import ChatRequest, ModelResponse

_CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="none")


def _one_call_per_prompt(request: ChatRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role is Role.TOOL:
        return reply_text("done")
    return reply_tool_calls(("slow", {"tag": last.text}))


async def test_streamed_and_plain_steps_share_one_limit_and_no_actor_runs_them(
    autojump_clock: trio.testing.MockClock,
) -> None:
    running = peak = 0

    @tool
    async def slow(tag: str) -> str:
        """Take a second.

        Args:
            tag: which turn called.
        """
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await trio.sleep(1)
        running -= 1
        return tag

    # No fail_after around the block: the agent loads jsonschema in a worker thread as it
    # opens, and the autojump clock would reach any deadline while it waits for it.
    async with open_runtime() as runtime:
        agent = (
            AgentBuilder()
            .provider(FunctionProvider(_one_call_per_prompt))
            .runtime(runtime)
            .tool(slow)
            .max_concurrent_tools(1)
            .build()
        )
        async with agent:
            # The agent's actors: its provider's only (the tool pool is no actor).
            assert [name for name in runtime.supervisor.children if "tool" in name] == []
            streamed: list[str] = []

            async def stream_one() -> None:
                async with agent.stream("streamed") as events:
                    async for event in events:
                        if isinstance(event, ToolCallFinished):
                            streamed.append(event.result.text)

            ran: list[str] = []

            async def run_one() -> None:
                ran.append((await agent.run("not streamed")).text)

            # A non-streamed step (the turn's own task) and two streamed ones (tasks of
            # their streams' nurseries) share one limit of 1 tool at a time.
            started = trio.current_time()
            with trio.fail_after(10):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(run_one)
                    nursery.start_soon(stream_one)
                    nursery.start_soon(stream_one)
        assert (ran, streamed) == (["done"], ["streamed", "streamed"])
        assert peak == 1
        assert trio.current_time() - started == 3.0


async def test_a_streamed_step_sees_the_consumers_context_and_ends_before_its_block(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[str] = []
    ended: list[str] = []

    @tool
    async def slow(tag: str) -> str:
        """Take a minute.

        Args:
            tag: which turn called.
        """
        seen.append(_CALLER.get())
        _CALLER.set("the tool's")  # its own: never the consumer's
        try:
            await trio.sleep(60)
        finally:
            ended.append(tag)
        return tag

    agent = AgentBuilder().provider(FunctionProvider(_one_call_per_prompt)).tool(slow).build()
    async with agent:
        _CALLER.set("the consumer's")
        async with agent.stream("left early") as events:
            async for event in events:
                if isinstance(event, ToolCallStarted):
                    break  # the tool is about to run in the stream's task
            await trio.sleep(1)  # it runs while the consumer is elsewhere
            assert seen == ["the consumer's"]
            assert ended == []
        # Leaving the block cancelled the step's task and waited for it.
        assert ended == ["left early"]
        assert _CALLER.get() == "the consumer's"


async def test_a_stream_of_an_agent_without_tools_still_answers_and_brackets_a_call() -> None:
    """An agent with no tools opens no nursery for its stream; a call the model makes anyway
    is answered in the consumer's frame, bracketed as ever."""

    def model(request: ChatRequest) -> ModelResponse:
        if request.messages[-1].role is Role.TOOL:
            return reply_text("done")
        return reply_tool_calls(("missing", {}))

    agent = AgentBuilder().provider(FunctionProvider(model)).build()
    async with agent, agent.stream("hi") as events:
        kinds = [
            (type(event).__name__, event.result.is_error)
            if isinstance(event, ToolCallFinished)
            else type(event).__name__
            for event in [event async for event in events]
            if isinstance(event, ToolCallStarted | ToolCallFinished)
        ]
    assert kinds == ["ToolCallStarted", ("ToolCallFinished", True)]


async def test_a_tool_that_runs_its_own_agent_again_does_not_wait_for_its_own_slot(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A lone call runs in its turn's task: a tool that asks the same agent again (a plain
    # function tool calling agent.run) holds the agent's only slot while the inner turn's
    # lone call needs one. It runs in that task's slot instead of waiting for it forever
    # (before the tool pool's own limit, trio's CapacityLimiter refused the second token).
    def answer(request: ChatRequest) -> ModelResponse:
        last = request.messages[-1]
        if last.role is Role.TOOL:
            return reply_text("done")
        return reply_tool_calls(("ask", {"depth": len(last.text)}))

    depths: list[int] = []

    @tool
    async def ask(depth: int) -> str:
        """Ask the agent again, three levels down.

        Args:
            depth: how deep this call is.
        """
        depths.append(depth)
        if depth >= 3:
            return "bottom"
        return (await agent.run("x" * (depth + 1))).text

    agent = (
        AgentBuilder().provider(FunctionProvider(answer)).tool(ask).max_concurrent_tools(1).build()
    )
    async with agent:
        with trio.fail_after(5):
            response = await agent.run("x")
    assert depths == [1, 2, 3]
    assert response.text == "done"


async def test_parallel_calls_inside_an_own_call_run_in_their_callers_slot(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The inner turn's two calls run in tasks of its step's nursery: children of the task
    # whose call holds the only slot. They do not wait for it (it waits for them); a call
    # from outside still waits its turn.
    def answer(request: ChatRequest) -> ModelResponse:
        last = request.messages[-1]
        if last.role is Role.TOOL:
            return reply_text("done")
        if last.text == "inner":
            return reply_tool_calls(("ask", {"depth": 1}), ("ask", {"depth": 1}))
        return reply_tool_calls(("ask", {"depth": 0}))

    running = peak = 0

    @tool
    async def ask(depth: int) -> str:
        """Ask the agent again once.

        Args:
            depth: how deep this call is.
        """
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        try:
            if depth:
                await trio.sleep(1)
                return "leaf"
            return (await agent.run("inner")).text
        finally:
            running -= 1

    agent = (
        AgentBuilder().provider(FunctionProvider(answer)).tool(ask).max_concurrent_tools(1).build()
    )
    async with agent:
        with trio.fail_after(5):
            started = trio.current_time()
            response = await agent.run("outer")
    assert response.text == "done"
    assert peak == 3  # the outer call and its two inner calls at once
    assert trio.current_time() - started == 1.0
