"""kova.temporal against a real Temporal server (the dev server the suite starts): turns run
as AgentWorkflow, each model call and tool call an activity of the worker in this process,
the model kova's fake OpenAI server on loopback.

Plain functions that run their own asyncio loop: Temporal's client and worker are asyncio
code, and kova runs inside the worker through kova.asyncio."""

from __future__ import annotations

from typing import Any

import trio
from temporal_helpers import builder, fake_openai, run, unique
from temporalio.client import Client

import kova.temporal
from kova import Message
from kova.testing import ScriptRequest, reply_text, reply_tool_calls
from kova.tools import ToolContext, tool


def test_a_turn_with_parallel_tools_completes(temporal_address: str) -> None:
    running = 0
    most = 0
    keys: list[str] = []

    @tool
    async def weather(city: str, ctx: ToolContext) -> str:
        """The weather in a city."""
        nonlocal running, most
        running += 1
        most = max(most, running)
        keys.append(ctx.idempotency_key)
        await trio.sleep(0.2)
        running -= 1
        return f"sunny in {city}"

    def script(request: ScriptRequest) -> Any:
        if request.messages[-1].role.value == "tool":
            results = [block.text for block in request.messages[-1].content]
            return reply_text(" / ".join(results))
        return reply_tool_calls(
            ("weather", {"city": "Oslo"}),
            ("weather", {"city": "Rome"}),
            ("weather", {"city": "Lima"}),
        )

    with fake_openai(script) as base_url:

        async def main() -> Any:
            client = await Client.connect(temporal_address)
            queue = unique("parallel")
            agents = {"forecaster": builder(base_url, weather)}
            async with kova.temporal.worker(client, task_queue=queue, agents=agents):
                return await kova.temporal.run_turn(
                    client,
                    agent="forecaster",
                    history=[Message.user("Weather in three cities?")],
                    task_queue=queue,
                    id=unique("turn"),
                )

        response = run(main)
    assert response.text == "sunny in Oslo / sunny in Rome / sunny in Lima"
    assert response.llm_calls == 2
    assert [message.role.value for message in response.new_messages] == [
        "assistant",
        "tool",
        "assistant",
    ]
    assert most == 3  # the three calls ran at once
    assert len(set(keys)) == 3
