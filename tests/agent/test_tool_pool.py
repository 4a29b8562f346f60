"""The tool pool across restarts: every step runs on the current incarnation's runner."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import structlog.testing
import trio
import trio.testing

from kova import ActorFailed, Role, ToolUse
from kova.actors import open_runtime
from kova.agent import AgentBuilder, ToolCallFinished
from kova.agent._tool_pool import GetToolRunner, RunToolCalls
from kova.testing import FunctionProvider, reply_text, reply_tool_calls
from kova.tools import tool

if TYPE_CHECKING:
    from kova.providers import ChatRequest, ModelResponse


async def test_a_restarted_pool_runs_the_next_step_on_its_new_limiter(
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

    def model(request: ChatRequest) -> ModelResponse:
        last = request.messages[-1]
        if last.role is Role.TOOL:
            return reply_text("done")
        return reply_tool_calls(("slow", {"tag": last.text}))

    async def broken_sink(event: object) -> None:
        raise RuntimeError("the pool's event sink broke")

    # No fail_after around the block: the agent loads jsonschema in a worker thread as it
    # opens, and the autojump clock would reach any deadline while it waits for it.
    with structlog.testing.capture_logs() as logs:
        async with open_runtime() as runtime:
            agent = (
                AgentBuilder()
                .provider(FunctionProvider(model))
                .runtime(runtime)
                .tool(slow)
                .max_concurrent_tools(1)
                .build()
            )
            async with agent:
                assert (await agent.run("before")).text == "done"  # the first runner
                (name,) = [n for n in runtime.supervisor.children if n.startswith("tool_pool")]
                pool = runtime.supervisor.ref(name)
                # A fault in the pool's own task (its event sink raises): it crashes and its
                # supervisor starts a new incarnation, with a new capacity limiter.
                call = ToolUse(id="c1", name="slow", input={"tag": "fault"})
                with pytest.raises(ActorFailed):
                    await pool.call(RunToolCalls(calls=(call,), on_event=broken_sink))

                new_runner = await pool.call(GetToolRunner())  # once restarted
                assert not new_runner.closed

                streamed: list[str] = []

                async def stream_one() -> None:
                    async with agent.stream("streamed") as events:
                        async for event in events:
                            if isinstance(event, ToolCallFinished):
                                streamed.append(event.result.text)

                ran: list[str] = []

                async def run_one() -> None:
                    ran.append((await agent.run("not streamed")).text)

                # A non-streamed step (the turn's own task, on the runner) and a streamed one
                # (served by the new incarnation) share one limit of 1 tool at a time: the
                # non-streamed step does not run on the crashed incarnation's limiter.
                started = trio.current_time()
                with trio.fail_after(10):
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(run_one)
                        nursery.start_soon(stream_one)
            assert (ran, streamed) == (["done"], ["streamed"])
            assert peak == 1
            assert trio.current_time() - started == 2.0
    assert [entry["actor"] for entry in logs if entry["event"] == "actor.crashed"] == [name]
