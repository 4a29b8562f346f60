"""What the cost bookkeeping costs: ``Agent.run`` with and without it, alternating.

    .venv/bin/python bench/cost.py [--calls 300] [--rounds 9] [--api openai]

Starts the mock server and, in one trio run, interleaves rounds of ``calls`` sequential
``Agent.run`` calls (scenario b: one non-streamed call, no tools) on four agents over the
same provider:

- **none**: the agent's meter replaced by one that does nothing (no pricing, no budget):
  the agent without any cost bookkeeping, the baseline;
- **unpriced**: a default agent; the mock server's model (``bench-n20``) is not in the
  ``genai-prices`` sheet, so every call looks its model up (a cached miss) and has no cost;
- **priced**: ``AgentBuilder().prices(Prices({"bench-*": ...}))``: every call is priced;
- **budget**: priced, and every call reserves its worst case against a ``Budget`` (the
  prompt counted offline) and settles it.

The same four on an *instant* provider (no I/O) show the bookkeeping's absolute cost per
call, without the HTTP path's noise. Prints the median CPU and wall per call (us) and each
row's ratio to ``none`` in the same round; the issue's target is under 2% of ``Agent.run``.
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
from kova.agent import AgentBuilder, Budget, Prices  # noqa: E402

PRICES = Prices({"bench-*": {"input": "0.15", "output": "0.60", "cache_read": "0.075"}})


class _NoPricer:
    def needs_sheet(self) -> bool:
        return False


class _NoMeter:
    """A meter that does nothing: the agent as it was before costs."""

    pricer = _NoPricer()
    budget = None
    prices = False

    def wants_sheet(self, limits: object, reads_costs: bool = False) -> bool:
        return False

    def priced(self, response: Any, model: object) -> Any:
        return response


def _agents(provider_factory: Any) -> dict[str, Any]:
    none = AgentBuilder().provider(provider_factory()).build()
    none._context.meter = _NoMeter()  # type: ignore[assignment]
    return {
        "none": none,
        "unpriced": AgentBuilder().provider(provider_factory()).build(),
        "priced": AgentBuilder().provider(provider_factory()).prices(PRICES).build(),
        "budget": AgentBuilder()
        .provider(provider_factory())
        .prices(PRICES)
        .budget(Budget(10**9))
        .build(),
    }


async def _bench(base_url: str, api: str, n: int, rounds: int) -> None:
    model = f"bench-n{ANSWER}"
    config = InferenceConfig(model=model, max_tokens=1024)
    history = [Message.user("What is the weather in Paris?")]
    http = _agents(lambda: make_provider(base_url, api))
    instant = _agents(_Instant)
    rows: dict[str, Any] = {}
    for group, agents in (("Agent.run", http), ("Agent.run, instant provider", instant)):
        for label, agent in agents.items():
            rows[f"{group}: {label}"] = (agent, group)
    async with contextlib.AsyncExitStack() as stack:
        for agent, _ in rows.values():
            await stack.enter_async_context(agent)
        calls = {
            label: (lambda agent=agent: agent.run(history, config=config))
            for label, (agent, _) in rows.items()
        }
        for fn in calls.values():  # warm-up: imports, connections, the price lookups
            for _ in range(10):
                await fn()
        medians = await alternate(
            calls, {label: f"{group}: none" for label, (_, group) in rows.items()}, n, rounds
        )
    report(
        f"{api} format, {n} calls a round, median of {rounds} alternating rounds", "none", medians
    )


def main() -> None:
    main_on_mock_server(_bench)


if __name__ == "__main__":
    main()
