"""A budget in money shared by agents: each call reserves its worst case before it is sent and
settles its real cost after; a call that does not fit is refused before it reaches the
server; cancelled and failed calls never leave a reservation behind."""

from __future__ import annotations

import random
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING

import pytest
import trio
import trio.lowlevel
import trio.testing

from kova import InferenceConfig, Message, Usage
from kova.actors import open_runtime
from kova.agent import AgentBuilder, Budget, Prices, RetryConfig, UsageLimits
from kova.errors import BudgetExceeded, BuildError, RateLimited
from kova.providers import heuristic_count_tokens
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import (
    ErrorReply,
    ScriptedProvider,
    ScriptRequest,
    open_anthropic_server,
    open_openai_server,
    reply_text,
)

if TYPE_CHECKING:
    from kova.agent import Agent

pytest.importorskip("genai_prices")

PRICES = Prices({"scripted": {"input": 1, "output": 2}})  # USD per million tokens


def _worst(request_tokens: int, max_tokens: int) -> Decimal:
    return (Decimal(request_tokens) * 1 + Decimal(max_tokens) * 2) / 1_000_000


@pytest.mark.parametrize(
    ("amount", "window", "message"),
    [
        (-1, None, "at least 0"),
        ("lots", None, "a number of USD"),
        (True, None, "a number of USD"),
        (float("inf"), None, "finite"),
        ([1], None, "Decimal, int, float or numeric str"),
        (1, 0, "positive duration"),
        (1, "1h", "seconds or a datetime.timedelta"),
    ],
)
def test_a_bad_budget_is_refused(amount: object, window: object, message: str) -> None:
    with pytest.raises(BuildError, match=message):
        Budget(amount, window=window)  # type: ignore[arg-type]


def test_a_new_budget_has_everything_left() -> None:
    budget = Budget("1.50", window=timedelta(hours=1))
    assert (budget.amount, budget.window) == (Decimal("1.50"), 3600.0)
    assert (budget.spent, budget.reserved, budget.left) == (0, 0, Decimal("1.50"))
    assert repr(budget) == "Budget(1.50, window=3600)"


async def test_a_call_reserves_its_worst_case_and_settles_its_cost() -> None:
    budget = Budget(1)
    seen: list[tuple[Decimal, Decimal]] = []

    def model(request: ScriptRequest) -> object:
        seen.append((budget.reserved, budget.spent))
        return reply_text("ok", usage=Usage(input_tokens=7, output_tokens=3))

    builder = AgentBuilder().provider(ScriptedProvider(model)).prices(PRICES).budget(budget)
    builder = builder.inference_config(InferenceConfig(max_tokens=100))
    async with builder.build() as agent:
        response = await agent.run("hello")
    counted = heuristic_count_tokens([Message.user("hello")])
    assert seen == [(_worst(counted, 100), 0)]
    assert response.cost == Decimal(7 + 3 * 2) / 1_000_000
    assert (budget.spent, budget.reserved) == (response.cost, 0)
    assert budget.left == 1 - response.cost


async def test_a_call_that_does_not_fit_fails_before_it_is_sent() -> None:
    budget = Budget("0.0001")
    async with open_openai_server([reply_text("never")]) as server:
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(base_url=server.base_url, model="gpt-4o", api_key="k", max_tokens=1000)
        )
        async with AgentBuilder().provider(provider).budget(budget).build() as agent:
            with pytest.raises(BudgetExceeded) as caught:
                await agent.run("hello")
        assert server.requests == []
    error = caught.value
    assert error.budget is budget
    assert error.left == Decimal("0.0001")
    # 1000 output tokens at gpt-4o's $10 per million, and the prompt at $2.50.
    assert error.needed > Decimal("0.01")
    assert "was not sent" in str(error)
    assert (budget.spent, budget.reserved) == (0, 0)


async def test_an_unpriced_model_or_an_unbounded_call_cannot_be_budgeted() -> None:
    builder = AgentBuilder().provider(ScriptedProvider([reply_text("x")])).budget(Budget(1))
    async with builder.inference_config(InferenceConfig(max_tokens=10)).build() as agent:
        with pytest.raises(BuildError, match="no known price"):
            await agent.run("hi")
    builder = AgentBuilder().provider(ScriptedProvider([reply_text("x")])).budget(Budget(1))
    async with builder.prices(PRICES).build() as agent:
        with pytest.raises(BuildError, match="max_tokens"):
            await agent.run("hi")


async def test_a_provider_error_frees_the_reservation_a_cancelled_call_spends_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    budget = Budget(1)

    async def model(request: ScriptRequest) -> object:
        if request.messages[-1].text == "slow":
            await trio.sleep(10)
        return ErrorReply(status_code=429, message="slow down")

    builder = AgentBuilder().provider(ScriptedProvider(model)).prices(PRICES).budget(budget)
    builder = builder.inference_config(InferenceConfig(max_tokens=100)).retry_config(
        RetryConfig(max_retries=0)
    )
    async with builder.build() as agent:
        with pytest.raises(RateLimited):
            await agent.run("fail")
        assert (budget.spent, budget.reserved) == (0, 0)
        with trio.move_on_after(1):
            await agent.run("slow")
        worst = _worst(heuristic_count_tokens([Message.user("slow")]), 100)
        assert (budget.spent, budget.reserved) == (worst, 0)


async def test_a_window_lets_spending_expire(autojump_clock: trio.testing.MockClock) -> None:
    budget = Budget("0.001", window=60)
    usage = Usage(input_tokens=100, output_tokens=100)
    script = ScriptedProvider([reply_text("a", usage=usage) for _ in range(3)])
    builder = AgentBuilder().provider(script).prices(PRICES).budget(budget)
    async with builder.inference_config(InferenceConfig(max_tokens=200)).build() as agent:
        await agent.run("one")
        await trio.sleep(30)
        await agent.run("two")
        assert budget.spent == Decimal("0.0006")
        await trio.sleep(31)
        assert budget.spent == Decimal("0.0003")  # the first call left the window
        await trio.sleep(30)
        assert budget.spent == 0
        await agent.run("three")
        assert budget.spent == Decimal("0.0003")


async def test_a_budget_serves_one_trio_run_at_a_time() -> None:
    budget = Budget(1)
    usage = Usage(input_tokens=10, output_tokens=5)
    release = trio.Event()

    async def slow(request: ScriptRequest) -> object:
        await release.wait()
        return reply_text("slow", usage=usage)

    def builder(model: object) -> AgentBuilder:
        built = AgentBuilder().provider(ScriptedProvider(model)).prices(PRICES).budget(budget)  # type: ignore[arg-type]
        return built.inference_config(InferenceConfig(max_tokens=5))

    async def elsewhere() -> None:  # another thread's trio run
        async with builder([reply_text("quick", usage=usage)]).build() as agent:
            await agent.run("hi")

    async with builder(slow).build() as agent, trio.open_nursery() as nursery:
        nursery.start_soon(agent.run, "wait")
        await trio.testing.wait_all_tasks_blocked()
        assert budget.reserved > 0
        with pytest.raises(BuildError, match="calls in flight in another trio run"):
            await trio.to_thread.run_sync(trio.run, elsewhere)
        release.set()
    assert budget.reserved == 0
    # No call in flight: a run after this one (run_sync makes one per call) takes it over.
    await trio.to_thread.run_sync(trio.run, elsewhere)
    assert budget.spent == 2 * Decimal(10 + 5 * 2) / 1_000_000
    assert budget.reserved == 0


def test_run_sync_turns_share_a_budget_one_after_another() -> None:
    budget = Budget(1)
    usage = Usage(input_tokens=10, output_tokens=5)
    provider = ScriptedProvider([reply_text("a", usage=usage), reply_text("b", usage=usage)])
    builder = AgentBuilder().provider(provider).prices(PRICES).budget(budget)
    agent = builder.inference_config(InferenceConfig(max_tokens=5)).build()
    agent.run_sync("one")
    agent.run_sync("two")
    assert budget.spent == 2 * Decimal(10 + 5 * 2) / 1_000_000


# -- many agents, one budget ----------------------------------------------------------------

TURNS = 1_000
CANCELLED = 200
MAX_TOKENS = 400


async def test_a_thousand_concurrent_turns_over_four_agents_stay_within_one_budget() -> None:
    rng = random.Random(47)
    budget = Budget("0.5")
    real_spend: list[Decimal] = []  # what the servers' answers cost, as the agents price them
    reached: set[str] = set()  # the turns whose request reached a server
    agents: list[Agent] = []

    async def model(request: ScriptRequest) -> object:
        turn = request.messages[-1].text
        reached.add(turn)
        counted = heuristic_count_tokens(request.messages, request.tools)
        usage = Usage(
            input_tokens=rng.randint(1, counted),
            output_tokens=rng.randint(1, MAX_TOKENS),
        )
        for _ in range(rng.randrange(5)):
            await trio.lowlevel.checkpoint()
        real_spend.append(
            agents[int(turn.split("-")[0])]
            .driver_context()
            .meter.pricer.cost(usage, request.config.model)
        )  # type: ignore[arg-type]
        return reply_text("done", usage=usage)

    outcomes = {"ok": 0, "refused": 0, "cancelled": 0}
    refused: set[str] = set()
    cancelled: set[str] = set()
    to_cancel = set(rng.sample(range(TURNS), CANCELLED))

    async def turn(index: int) -> None:
        agent = agents[index % 4]
        name = f"{index % 4}-{index}"
        for _ in range(rng.randrange(20)):
            await trio.lowlevel.checkpoint()
        with trio.CancelScope() as scope:
            if index in to_cancel:

                async def cancel() -> None:
                    for _ in range(rng.randrange(60)):
                        await trio.lowlevel.checkpoint()
                    scope.cancel()

                nursery.start_soon(cancel)
            try:
                await agent.run(name)
            except BudgetExceeded:
                outcomes["refused"] += 1
                refused.add(name)
                return
            outcomes["ok"] += 1
        if scope.cancelled_caught:
            outcomes["cancelled"] += 1
            cancelled.add(name)

    async with (
        open_openai_server(model) as openai,
        open_anthropic_server(model) as anthropic,
        open_runtime() as runtime,
    ):
        for index in range(4):
            if index % 2:
                provider: object = AnthropicProvider(
                    AnthropicConfig(
                        base_url=anthropic.base_url,
                        model=("claude-3-5-haiku-latest", "claude-haiku-4-5")[index // 2],
                        api_key="k",
                        max_tokens=MAX_TOKENS,
                    )
                )
            else:
                provider = OpenAiCompatibleProvider(
                    OpenAiConfig(
                        base_url=openai.base_url,
                        model=("gpt-4o-mini", "gpt-4.1-mini")[index // 2],
                        api_key="k",
                        max_tokens=MAX_TOKENS,
                    )
                )
            builder = AgentBuilder().provider(provider).runtime(runtime).budget(budget)  # type: ignore[arg-type]
            agents.append(builder.name(f"agent{index}").build())
        async with agents[0], agents[1], agents[2], agents[3], trio.open_nursery() as nursery:
            for index in range(TURNS):
                nursery.start_soon(turn, index)

    assert sum(outcomes.values()) == TURNS
    assert outcomes["refused"] > 100, outcomes  # the budget ran out
    assert outcomes["ok"] > 100, outcomes
    assert outcomes["cancelled"] > 50, outcomes
    # Cancelled before their request was sent, and while the server was answering it.
    assert len(cancelled & reached) > 10
    assert len(cancelled - reached) > 3
    assert budget.reserved == 0  # no reservation leaked
    assert sum(real_spend) <= budget.spent <= budget.amount
    assert refused.isdisjoint(reached)  # a refused call never reached a server


async def test_a_counted_prompt_is_the_worst_case_of_the_call_that_follows() -> None:
    """With count_tokens_before_request the provider's own count, not kova's estimate, is
    what the budget reserves for the prompt."""
    budget = Budget(1)
    seen: list[Decimal] = []

    def model(request: ScriptRequest) -> object:
        seen.append(budget.reserved)
        return reply_text("ok", usage=Usage(input_tokens=10, output_tokens=5))

    async with open_anthropic_server(model, count_tokens=lambda messages, tools: 5_000) as server:
        provider = AnthropicProvider(
            AnthropicConfig(
                base_url=server.base_url, model="claude-haiku-4-5", api_key="k", max_tokens=100
            )
        )
        limits = UsageLimits(input_tokens=1_000_000, count_tokens_before_request=True)
        builder = AgentBuilder().provider(provider).budget(budget).usage_limits(limits)
        async with builder.build() as agent:
            await agent.run("hi")
    # claude-haiku-4-5: $1 input, $1.25 cache write (the dearest input price), $5 output.
    assert seen == [(Decimal(5_000) * Decimal("1.25") + 100 * 5) / 1_000_000]
