"""What the harness features cost a turn that does not use them: ``Agent.run`` with a context
policy that never needs to compact, and with deferred tools the model never searches,
against the plain agent, alternating.

    .venv/bin/python bench/harness.py [--calls 300] [--rounds 9] [--api openai]

Starts the mock server and, in one trio run, interleaves rounds of ``calls`` sequential
``Agent.run`` calls (scenario b: one non-streamed call) on these agents over the same
provider:

- **plain**: an agent with one tool, nothing else: the baseline;
- **context**: the same with ``.context(ClearToolResults(), SlidingWindow(),
  window=128_000)``: every call is estimated against the window (it always fits);
- **deferred**: the same with 20 more tools, all ``defer=True``: the model is offered the one
  tool and ``search_tools`` and never searches (the request carries one definition more).

The same agents on an *instant* provider (no I/O) show the absolute cost per call without
the HTTP path's noise. Prints the median CPU and wall per call (us) and each row's ratio to
``plain`` in the same round; the issues' targets: within 2% of the turn without the feature.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from agentpath import ANSWER, _Instant, alternate, main_on_mock_server, report  # noqa: E402
from clients.kova_client import make_provider  # noqa: E402

from kova import InferenceConfig, Message  # noqa: E402
from kova.agent import AgentBuilder, ClearToolResults, SlidingWindow  # noqa: E402
from kova.tools import tool  # noqa: E402


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return "sunny"


def _deferred(number: int) -> Any:
    def rarely(x: int) -> int:
        return x

    rarely.__name__ = f"rarely_used_{number}"
    rarely.__doc__ = f"A rarely used operation number {number} on invoices."
    return tool(defer=True)(rarely)


DEFERRED = [_deferred(n) for n in range(20)]


def _agents(provider_factory: Any) -> dict[str, Any]:
    return {
        "plain": AgentBuilder().provider(provider_factory()).tool(get_weather).build(),
        "context": AgentBuilder()
        .provider(provider_factory())
        .tool(get_weather)
        .context(ClearToolResults(), SlidingWindow(), window=128_000)
        .build(),
        "deferred": AgentBuilder()
        .provider(provider_factory())
        .tools(get_weather, *DEFERRED)
        .build(),
    }


async def _bench(base_url: str, api: str, n: int, rounds: int) -> None:
    model = f"bench-n{ANSWER}"
    config = InferenceConfig(model=model, max_tokens=1024)
    history = [Message.user("What is the weather in Paris?")]
    rows: dict[str, Any] = {}
    for group, agents in (
        ("Agent.run", _agents(lambda: make_provider(base_url, api))),
        ("Agent.run, instant provider", _agents(_Instant)),
    ):
        for label, agent in agents.items():
            rows[f"{group}: {label}"] = (agent, group)
    async with contextlib.AsyncExitStack() as stack:
        for agent, _ in rows.values():
            await stack.enter_async_context(agent)
        calls = {
            label: (lambda agent=agent: agent.run(history, config=config))
            for label, (agent, _) in rows.items()
        }
        for fn in calls.values():  # warm-up
            for _ in range(10):
                await fn()
        medians = await alternate(
            calls, {label: f"{group}: plain" for label, (_, group) in rows.items()}, n, rounds
        )
    report(
        f"{api} format, {n} calls a round, median of {rounds} alternating rounds", "plain", medians
    )


def main() -> None:
    main_on_mock_server(_bench)


if __name__ == "__main__":
    main()
