"""A Temporal turn counts each model call's cost once, from the usage its activity recorded:
the workflow never prices anything, so a replay of its history gives the same figures."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from temporal_helpers import fake_openai, run, unique
from temporalio.client import Client

import kova.temporal
from kova import Message, Usage
from kova.agent import AgentBuilder, Budget, Prices, Turn
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import ScriptRequest, reply_text, reply_tool_calls
from kova.tools import tool

PRICES = Prices({"priced-model": {"input": 1, "output": 2, "cache_read": "0.5"}})
FIRST = Usage(input_tokens=1_000, output_tokens=100, cache_read_tokens=400)
SECOND = Usage(input_tokens=1_200, output_tokens=50)
# per million tokens: 600 + 400 * 0.5 + 100 * 2, then 1200 + 50 * 2
COST = Decimal(600 + 200 + 200 + 1_200 + 100) / 1_000_000


@tool
async def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def test_a_temporal_turn_counts_each_calls_cost_once_also_in_a_replay(
    temporal_address: str,
) -> None:
    from temporalio.worker import Replayer

    def script(request: ScriptRequest) -> Any:
        if request.messages[-1].role.value == "tool":
            return reply_text("done", usage=SECOND)
        return reply_tool_calls(("weather", {"city": "Oslo"}), usage=FIRST)

    budget = Budget(1)
    with fake_openai(script) as base_url:
        config = OpenAiConfig(base_url=base_url, model="priced-model", api_key="k", max_tokens=64)
        agent = (
            AgentBuilder()
            .provider(OpenAiCompatibleProvider(config))
            .prices(PRICES)
            .budget(budget)
            .tool(weather)
        )

        async def main() -> Any:
            client = await Client.connect(temporal_address)
            queue = unique("cost")
            async with kova.temporal.worker(client, task_queue=queue, agents={"a": agent}):
                handle = await kova.temporal.start_turn(
                    client,
                    agent="a",
                    history=[Message.user("weather?")],
                    task_queue=queue,
                    id=unique("turn"),
                )
                response = await kova.temporal.response(handle)
                finished = Turn.from_json(await handle.result())
            replayer = Replayer(workflows=[kova.temporal.AgentWorkflow])  # Temporal's defaults
            await replayer.replay_workflow(await handle.fetch_history())
            return response, finished

        response, finished = run(main)
    assert response.cost == COST
    assert response.usage_by_agent["kova"].cost == COST
    assert finished.usage.cost == COST
    # The worker's agent reserved and settled each call against its budget (an attempt
    # Temporal ran again, on a slow machine, is spent again: it was sent again).
    assert budget.spent >= COST
    assert budget.reserved == 0
