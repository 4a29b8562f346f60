"""What a call costs: kova's prices equal genai-prices' own calculation, the caller's Prices
come first, an unknown model has no cost, and an agent's turn reports its cost (the response,
usage_by_agent, the model-call events)."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
import warnings
from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest
import trio

from kova import InferenceConfig, Usage
from kova._observe import ModelCallFinished
from kova.agent import AgentBuilder, Prices, UsageLimits
from kova.agent._cost import Pricer
from kova.agent._state_json import (
    limits_from_json,
    limits_to_json,
    usage_from_json,
    usage_to_json,
)
from kova.errors import BuildError, SerializationError, UsageLimitExceeded
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import (
    ScriptedProvider,
    open_anthropic_server,
    open_openai_server,
    reply_text,
    reply_tool_calls,
)
from kova.tools import tool

if TYPE_CHECKING:
    from pathlib import Path

genai_prices = pytest.importorskip("genai_prices")

PRICES = Prices({"scripted": {"input": 1, "output": 2}})  # USD per million tokens

# The sheet's provider, and how kova reaches it: its wire format's name and base URL.
_HOSTS = {
    "openai": ("openai", "https://api.openai.com/v1"),
    "anthropic": ("anthropic", "https://api.anthropic.com"),
    "google": ("gemini", "https://generativelanguage.googleapis.com"),
    "aws": ("bedrock", "https://bedrock-runtime.us-east-1.amazonaws.com"),
    "groq": ("openai", "https://api.groq.com/openai/v1"),
    "deepseek": ("openai", "https://api.deepseek.com"),
    "mistral": ("openai", "https://api.mistral.ai/v1"),
    "x-ai": ("openai", "https://api.x.ai/v1"),
    "together": ("openai", "https://api.together.xyz/v1"),
    "fireworks": ("openai", "https://api.fireworks.ai/inference/v1"),
    "azure": ("openai", "https://kova-test.openai.azure.com/openai/deployments/d"),
    "openrouter": ("openai", "https://openrouter.ai/api/v1"),
    "cohere": ("openai", "https://api.cohere.ai/compatibility/v1"),
    "perplexity": ("openai", "https://api.perplexity.ai"),
}

PLAIN = {"input_tokens": 1_200, "output_tokens": 300}
CACHED = {
    "input_tokens": 50_000,
    "cache_read_tokens": 30_000,
    "cache_creation_tokens": 8_000,
    "output_tokens": 900,
}
REASONING = {"input_tokens": 3_000, "output_tokens": 4_000, "reasoning_tokens": 2_500}
AUDIO = {
    "input_tokens": 2_000,
    "input_audio_tokens": 800,
    "output_tokens": 600,
    "output_audio_tokens": 200,
}
LONG = {  # past the 200k-token tier of the models that have one
    "input_tokens": 250_000,
    "cache_read_tokens": 100_000,
    "output_tokens": 2_000,
    "reasoning_tokens": 500,
}

CASES = [
    ("openai", "gpt-4o", PLAIN),
    ("openai", "gpt-4o-2024-08-06", CACHED),
    ("openai", "gpt-4o-mini", CACHED),
    ("openai", "gpt-4.1", CACHED),
    ("openai", "gpt-4.1-mini", PLAIN),
    ("openai", "o3", REASONING),
    ("openai", "o4-mini", REASONING),
    ("openai", "gpt-5", REASONING),
    ("openai", "gpt-5-mini", CACHED),
    ("openai", "gpt-4o-audio-preview", AUDIO),
    ("openai", "o1", REASONING),
    ("anthropic", "claude-sonnet-4-5", CACHED),
    ("anthropic", "claude-sonnet-4-5", LONG),
    ("anthropic", "claude-sonnet-4-5-20250929", REASONING),
    ("anthropic", "claude-opus-4-1", CACHED),
    ("anthropic", "claude-3-5-haiku-latest", PLAIN),
    ("anthropic", "claude-haiku-4-5", CACHED),
    ("anthropic", "claude-sonnet-4-0", LONG),
    ("anthropic", "claude-3-7-sonnet-latest", REASONING),
    ("google", "gemini-2.5-pro", REASONING),
    ("google", "gemini-2.5-pro", LONG),
    ("google", "gemini-2.5-flash", CACHED),
    ("google", "gemini-2.5-flash", AUDIO),
    ("google", "gemini-2.0-flash", AUDIO),
    ("google", "gemini-2.5-flash-lite", REASONING),
    ("google", "gemini-1.5-pro", LONG),
    ("aws", "anthropic.claude-3-5-sonnet-20240620-v1:0", CACHED),
    ("aws", "us.anthropic.claude-sonnet-4-20250514-v1:0", REASONING),
    ("aws", "amazon.nova-pro-v1:0", CACHED),
    ("aws", "amazon.nova-lite-v1:0", PLAIN),
    ("aws", "meta.llama3-70b-instruct-v1:0", PLAIN),
    ("groq", "llama-3.3-70b-versatile", PLAIN),
    ("groq", "llama-3.1-8b-instant", CACHED),
    ("deepseek", "deepseek-chat", CACHED),
    ("deepseek", "deepseek-reasoner", REASONING),
    ("mistral", "mistral-large-latest", PLAIN),
    ("mistral", "mistral-small-latest", PLAIN),
    ("x-ai", "grok-3", CACHED),
    ("x-ai", "grok-4", REASONING),
    ("together", "meta-llama/Llama-3.3-70B-Instruct-Turbo", PLAIN),
    ("fireworks", "accounts/fireworks/models/llama-v3p1-8b-instruct", PLAIN),
    ("azure", "gpt-4o", CACHED),
    ("azure", "gpt-4o-mini", REASONING),
    ("openrouter", "anthropic/claude-sonnet-4", CACHED),
    ("openrouter", "openai/gpt-4o", PLAIN),
    ("cohere", "command-r-plus", PLAIN),
    ("perplexity", "sonar", PLAIN),
    ("openai", "gpt-4.1-nano", REASONING),
    ("anthropic", "claude-opus-4-1-20250805", LONG),
    ("google", "gemini-2.0-flash-lite", CACHED),
]

_GENAI_KEYS = {
    "cache_creation_tokens": "cache_write_tokens",
    "reasoning_tokens": "output_reasoning_tokens",
}


def _genai_cost(provider_id: str, model: str, counts: dict[str, int]) -> Decimal:
    usage = genai_prices.Usage(**{_GENAI_KEYS.get(k, k): value for k, value in counts.items()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        price = genai_prices.calc_price(usage, model, provider_id=provider_id)
    total: Decimal = price.total_price
    return total


def _pricer(provider_id: str, prices: Prices | None = None) -> Pricer:
    name, base_url = _HOSTS[provider_id]
    return Pricer(prices, SimpleNamespace(name=name, transport=SimpleNamespace(base_url=base_url)))


def test_fifty_cases_across_eleven_providers() -> None:
    assert len(CASES) == 50
    assert len({provider for provider, _, _ in CASES}) == len(_HOSTS)


@pytest.mark.parametrize(("provider_id", "model", "counts"), CASES)
def test_cost_equals_genai_prices(provider_id: str, model: str, counts: dict[str, int]) -> None:
    expected = _genai_cost(provider_id, model, counts)
    assert expected > 0
    cost = _pricer(provider_id).cost(Usage(**counts), model)
    assert cost == expected
    assert type(cost) is Decimal


def test_cached_and_reasoning_tokens_have_their_own_prices() -> None:
    pricer = _pricer("anthropic")
    plain = pricer.cost(Usage(input_tokens=50_000, output_tokens=900), "claude-sonnet-4-5")
    cached = pricer.cost(Usage(**CACHED), "claude-sonnet-4-5")
    assert plain is not None
    assert cached is not None
    # 30k read at $0.30 instead of $3, 8k written at $3.75 instead of $3 (per million).
    assert plain - cached == Decimal("0.081") - Decimal("0.006")
    gpt5 = _pricer("openai")
    # o-series reasoning tokens are output tokens, at the output price.
    assert gpt5.cost(Usage(**REASONING), "gpt-5") == gpt5.cost(
        Usage(input_tokens=3_000, output_tokens=4_000), "gpt-5"
    )


def test_an_unknown_model_has_no_cost() -> None:
    assert _pricer("openai").cost(Usage(**PLAIN), "my-own-model") is None
    assert _pricer("openai").cost(Usage(**PLAIN), None) is None
    # A provider kova cannot place (a scripted one, Ollama's local models): no sheet at all.
    local = Pricer(None, SimpleNamespace(name="ollama", transport=SimpleNamespace(base_url="x")))
    assert local.cost(Usage(**PLAIN), "llama3.2") is None
    assert Pricer(None, object()).cost(Usage(**PLAIN), "gpt-4o") is None


def test_prices_come_before_the_sheet_and_match_by_name_or_prefix() -> None:
    prices = Prices(
        {
            "gpt-4o": {"input": "2", "output": 8},
            "gateway/*": {"input": 1, "output": 4, "cache_read": 0.1},
            "gateway/big-*": {"input": 10, "output": 40},
            "flat": {"input": 0, "output": 0, "request": "0.01"},
        }
    )
    pricer = _pricer("openai", prices)
    million = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert pricer.cost(million, "GPT-4o") == Decimal(10)
    assert pricer.cost(million, "gateway/small") == Decimal(5)
    assert pricer.cost(million, "gateway/big-one") == Decimal(50)  # the longest prefix
    cached = Usage(input_tokens=1_000_000, cache_read_tokens=500_000)
    assert pricer.cost(cached, "gateway/small") == Decimal("0.55")
    assert pricer.cost(million, "flat") == Decimal("0.01")
    assert pricer.cost(million, "gpt-4o-mini") == _genai_cost(
        "openai", "gpt-4o-mini", {"input_tokens": 1_000_000, "output_tokens": 1_000_000}
    )
    own_only = _pricer("openai", Prices({"mine": {"input": 1, "output": 1}}, sheet=False))
    assert own_only.cost(million, "gpt-4o") is None
    assert own_only.cost(million, "mine") == Decimal(2)


@pytest.mark.parametrize(
    ("models", "message"),
    [
        ({"m": {"input": 1}}, "need output"),
        ({"m": {"input": 1, "output": 1, "vision": 2}}, "unknown kinds ['vision']"),
        ({"m": {"input": -1, "output": 1}}, "at least 0"),
        ({"m": {"input": "cheap", "output": 1}}, "must be a number"),
        ({"m": {"input": float("nan"), "output": 1}}, "must be finite"),
        ({"m": {"input": True, "output": 1}}, "must be a number"),
        ({"": {"input": 1, "output": 1}}, "non-empty name"),
        ({"M": {"input": 1, "output": 1}, "m": {"input": 1, "output": 1}}, "priced twice"),
        ({"m": [1, 2]}, "must be a mapping"),
    ],
)
def test_bad_prices_are_refused(models: object, message: str) -> None:
    with pytest.raises(BuildError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Prices(models)  # type: ignore[arg-type]


def test_a_float_price_is_read_by_its_shortest_repr() -> None:
    prices = Prices({"m": {"input": 0.15, "output": 0.6}})
    assert prices.models["m"]["input"] == Decimal("0.15")


def test_usage_sums_its_cost_only_when_every_part_with_tokens_has_one() -> None:
    priced = Usage(input_tokens=10, output_tokens=5, cost=Decimal("0.25"))
    unpriced = Usage(input_tokens=10, output_tokens=5)
    assert (Usage() + priced).cost == Decimal("0.25")
    assert (priced + priced).cost == Decimal("0.50")
    assert (priced + unpriced).cost is None
    assert (unpriced + priced).cost is None
    assert (priced + Usage()).cost == Decimal("0.25")
    assert priced == unpriced  # the counts are equal; cost is not part of equality
    with pytest.raises(TypeError, match=r"decimal\.Decimal"):
        Usage(cost=0.25)  # type: ignore[arg-type]


def test_usage_json_keeps_the_cost_exactly() -> None:
    usage = Usage(input_tokens=3, output_tokens=4, input_audio_tokens=1, cost=Decimal("1E-7"))
    again = usage_from_json(usage_to_json(usage))
    assert again.cost == Decimal("1E-7")
    assert again.input_audio_tokens == 1
    older = {k: v for k, v in usage_to_json(usage).items() if "audio" not in k and k != "cost"}
    assert usage_from_json(older).cost is None  # stored before costs: still read
    with pytest.raises(SerializationError, match="decimal"):
        usage_from_json({**usage_to_json(usage), "cost": "lots"})


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: sunny"


async def test_a_turn_reports_its_cost_on_the_response_usage_by_agent_and_events() -> None:
    first = Usage(input_tokens=1_000, output_tokens=40, cache_read_tokens=512)
    second = Usage(input_tokens=1_100, output_tokens=20, reasoning_tokens=8)
    script = [
        reply_tool_calls(("lookup", {"city": "Oslo"}), usage=first),
        reply_text("ok", usage=second),
    ]
    events: list[ModelCallFinished] = []
    async with open_openai_server(script) as server:
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(base_url=server.base_url, model="gpt-4o-mini", api_key="k")
        )
        agent = AgentBuilder().provider(provider).tool(lookup).name("pricer").build()
        async with agent:
            with agent.telemetry.subscribe(
                lambda event: events.append(event) if isinstance(event, ModelCallFinished) else None
            ):
                response = await agent.run("weather?")
    expected = [
        _genai_cost(
            "openai",
            "gpt-4o-mini",
            {"input_tokens": 1_000, "output_tokens": 40, "cache_read_tokens": 512},
        ),
        _genai_cost(
            "openai",
            "gpt-4o-mini",
            {"input_tokens": 1_100, "output_tokens": 20, "reasoning_tokens": 8},
        ),
    ]
    assert response.cost == sum(expected) == response.usage.cost
    assert response.usage_by_agent["pricer"].cost == sum(expected)
    assert [event.usage.cost for event in events if event.usage is not None] == expected


async def test_the_anthropic_format_prices_cache_writes() -> None:
    usage = Usage(input_tokens=9_000, output_tokens=100, cache_creation_tokens=8_000)
    async with open_anthropic_server([reply_text("ok", usage=usage)]) as server:
        provider = AnthropicProvider(
            AnthropicConfig(base_url=server.base_url, model="claude-sonnet-4-5", api_key="k")
        )
        async with AgentBuilder().provider(provider).build() as agent:
            response = await agent.run("hi")
    assert response.cost == _genai_cost(
        "anthropic",
        "claude-sonnet-4-5",
        {"input_tokens": 9_000, "output_tokens": 100, "cache_creation_tokens": 8_000},
    )


async def test_an_unpriced_model_gives_a_turn_no_cost_and_prices_give_it_one() -> None:
    async with AgentBuilder().provider(ScriptedProvider([reply_text("a")])).build() as agent:
        assert (await agent.run("hi")).cost is None
    builder = AgentBuilder().provider(ScriptedProvider([reply_text("a")])).prices(PRICES)
    async with builder.build() as agent:
        response = await agent.run("hi")
    # reply_text reports 10 in / 5 out.
    assert response.cost == Decimal(10 * 1 + 5 * 2) / 1_000_000


def test_the_builder_checks_prices_and_budget() -> None:
    with pytest.raises(BuildError, match=r"kova\.agent\.Prices"):
        AgentBuilder().prices({"m": {"input": 1, "output": 1}})  # type: ignore[arg-type]
    with pytest.raises(BuildError, match=r"kova\.agent\.Budget"):
        AgentBuilder().budget(5)  # type: ignore[arg-type]


@pytest.mark.parametrize("prompt", [199_999, 200_000, 200_001])
def test_a_tier_applies_to_all_tokens_once_the_prompt_is_past_it(prompt: int) -> None:
    counts = {"input_tokens": prompt, "cache_read_tokens": 1_000, "output_tokens": 1_000}
    for provider_id, model in (("anthropic", "claude-sonnet-4-5"), ("google", "gemini-2.5-pro")):
        expected = _genai_cost(provider_id, model, counts)
        assert _pricer(provider_id).cost(Usage(**counts), model) == expected


# -- UsageLimits(cost=...) -----------------------------------------------------------------

# reply_text and reply_tool_calls report 10 in / 5 out: 20 micro-USD a call at these prices.
CALL = Decimal(10 * 1 + 5 * 2) / 1_000_000


def _looping(replies: int) -> ScriptedProvider:
    return ScriptedProvider(
        [reply_tool_calls(("lookup", {"city": str(i)})) for i in range(replies)]
        + [reply_text("done")]
    )


async def test_a_turn_over_its_cost_limit_fails_with_no_messages() -> None:
    builder = AgentBuilder().provider(_looping(5)).prices(PRICES).tool(lookup)
    async with builder.usage_limits(cost=CALL * 2).build() as agent:
        with pytest.raises(UsageLimitExceeded) as caught:
            await agent.run("go")
    error = caught.value
    assert (error.limit, error.value, error.figure) == ("cost", CALL * 2, CALL * 3)
    assert str(error) == "usage limit cost=0.00004 exceeded: the turn has spent $0.00006"
    # Exactly at the limit is allowed; a per-call limit replaces the agent's.
    async with AgentBuilder().provider(_looping(1)).prices(PRICES).tool(lookup).build() as agent:
        response = await agent.run("go", limits=UsageLimits(cost=CALL * 2))
    assert response.cost == CALL * 2


async def test_the_cost_limit_counts_the_agents_a_turn_runs_as_tools() -> None:
    inner = AgentBuilder().provider(_looping(3)).prices(PRICES).tool(lookup).name("helper").build()
    outer_script = ScriptedProvider(
        [reply_tool_calls(("helper", {"input": "look"})), reply_text("done")]
    )
    outer = AgentBuilder().provider(outer_script).prices(PRICES).tool(inner.as_tool())
    async with outer.usage_limits(cost=CALL * 3).build() as agent:
        with pytest.raises(UsageLimitExceeded) as caught:
            await agent.run("go")
    # The outer call, then the inner agent's second call takes the turn to 3, its third to 4.
    assert (caught.value.limit, caught.value.figure) == ("cost", CALL * 4)


async def test_an_unpriced_turn_is_not_stopped_by_a_cost_limit() -> None:
    async with AgentBuilder().provider(_looping(2)).tool(lookup).build() as agent:
        response = await agent.run("go", limits=UsageLimits(cost=Decimal(0)))
    assert response.cost is None


@pytest.mark.parametrize(
    ("cost", "error"),
    [(-1, ValueError), ("x", ValueError), (True, TypeError), (float("nan"), ValueError)],
)
def test_a_bad_cost_limit_is_refused(cost: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"UsageLimits\.cost"):
        UsageLimits(cost=cost)  # type: ignore[arg-type]


def test_a_cost_limit_is_a_decimal_and_survives_json() -> None:
    assert UsageLimits(cost=0.1).cost == Decimal("0.1")  # type: ignore[arg-type]
    limits = UsageLimits(cost=Decimal("0.000001"), requests=3)
    assert limits_from_json(limits_to_json(limits)) == limits
    assert limits_from_json(limits_to_json(UsageLimits())).cost is None


# -- telemetry -----------------------------------------------------------------------------


async def test_spans_and_the_metrics_collector_carry_the_cost() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from kova.telemetry import open_metrics
    from kova.telemetry.otel import OtelSubscriber

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    replies = [reply_tool_calls(("lookup", {"city": "x"})), reply_text("a"), reply_text("b")]
    async with open_metrics() as collector:
        provider = ScriptedProvider(replies, name="scripted")
        builder = AgentBuilder().provider(provider).prices(PRICES).tool(lookup)
        async with builder.metrics(collector).build() as agent:
            subscriber = OtelSubscriber(
                tracer_provider=tracer_provider, meter_provider=meter_provider
            )
            with agent.telemetry.subscribe(subscriber):
                await agent.run("go")
        unpriced = AgentBuilder().provider(ScriptedProvider([reply_text("c")]))
        async with unpriced.metrics(collector).build() as agent:
            await agent.run("go")
        snapshot = await collector.snapshot()
    data = reader.get_metrics_data()
    tracer_provider.shutdown()
    meter_provider.shutdown()
    assert data is not None
    points = [
        point.value
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "kova.client.cost"
        for point in metric.data.data_points  # type: ignore[union-attr]
    ]
    assert sum(points) == pytest.approx(float(CALL * 2))
    assert snapshot.cost == CALL * 2
    assert snapshot.unpriced_llm_request_count == 1
    costs = {
        span.name: (span.attributes or {}).get("kova.cost")
        for span in exporter.get_finished_spans()
    }
    assert costs["chat scripted"] == float(CALL)
    assert costs["invoke_agent kova"] == float(CALL * 2)


# -- journaled turns -----------------------------------------------------------------------


async def test_a_journaled_turn_counts_each_calls_cost_once_across_a_restart(
    tmp_path: Path,
) -> None:
    from kova import Message, ToolAnnotations
    from kova.agent import Budget
    from kova.durable import SqliteJournal

    journal = SqliteJournal(tmp_path / "j.db")
    runs: list[str] = []

    @tool(annotations=ToolAnnotations(read_only=True))
    async def read(name: str) -> str:
        """Read something slowly."""
        runs.append(name)
        if len(runs) == 1:
            await trio.sleep_forever()
        return f"{name} read"

    first = Usage(input_tokens=100, output_tokens=10)
    second = Usage(input_tokens=200, output_tokens=20)
    replies = [
        reply_tool_calls(("read", {"name": "x"}), usage=first),
        reply_text("ok", usage=second),
    ]
    model_calls: list[object] = []

    def model(request: object) -> object:
        model_calls.append(request)
        return replies[len(model_calls) - 1]

    budget = Budget(1)
    history = [Message.user("read x")]

    def agent() -> AgentBuilder:
        provider = ScriptedProvider(model)
        return AgentBuilder().provider(provider).prices(PRICES).tool(read).budget(budget)

    builder = agent().inference_config(InferenceConfig(max_tokens=50))
    async with builder.build() as running:  # the first call is recorded, then it stops
        with trio.move_on_after(1):
            await running.run(history, journal=journal, turn_id="t")
    async with agent().inference_config(InferenceConfig(max_tokens=50)).build() as running:
        response = await running.run(history, journal=journal, turn_id="t")
        again = await running.run(history, journal=journal, turn_id="t")  # from the journal
    expected = Decimal(100 + 10 * 2 + 200 + 20 * 2) / 1_000_000
    assert len(model_calls) == 2  # the recorded call was not sent again
    assert response.cost == expected
    assert response.usage_by_agent["kova"].cost == expected
    assert again.cost == expected
    assert budget.spent == expected  # each call spent once; the answered turn spent nothing
    assert budget.reserved == 0


# -- more paths ----------------------------------------------------------------------------


async def test_a_streamed_turn_is_priced_and_budgeted_like_a_run() -> None:
    from kova.agent import Budget, TurnCompleted
    from kova.testing import StreamReply

    usage = Usage(input_tokens=1_000, output_tokens=40, cache_read_tokens=512)
    budget = Budget(1)
    events: list[ModelCallFinished] = []
    stream = StreamReply(response=reply_text("streamed answer", usage=usage), chunk_chars=4)
    async with open_openai_server([stream]) as server:
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(base_url=server.base_url, model="gpt-4o-mini", api_key="k")
        )
        builder = AgentBuilder().provider(provider).budget(budget)
        agent = builder.inference_config(InferenceConfig(max_tokens=100)).build()
        async with agent:
            with agent.telemetry.subscribe(
                lambda event: events.append(event) if isinstance(event, ModelCallFinished) else None
            ):
                async with agent.stream("hi") as turn:
                    completed = [event async for event in turn if isinstance(event, TurnCompleted)]
    expected = _genai_cost(
        "openai",
        "gpt-4o-mini",
        {"input_tokens": 1_000, "output_tokens": 40, "cache_read_tokens": 512},
    )
    assert completed[0].response.cost == expected
    assert [event.usage.cost for event in events if event.usage is not None] == [expected]
    assert (budget.spent, budget.reserved) == (expected, 0)


async def test_each_agent_run_as_a_tool_has_its_cost_in_usage_by_agent() -> None:
    inner = AgentBuilder().provider(_looping(1)).prices(PRICES).tool(lookup).name("helper")
    outer_script = ScriptedProvider(
        [reply_tool_calls(("helper", {"input": "look"})), reply_text("done")]
    )
    double = Prices({"scripted": {"input": 2, "output": 4}})
    outer = AgentBuilder().provider(outer_script).prices(double).tool(inner.build().as_tool())
    async with outer.name("boss").build() as agent:
        response = await agent.run("go")
    # Each agent prices its own calls with its own prices.
    assert response.usage_by_agent["helper"].cost == CALL * 2
    assert response.usage_by_agent["boss"].cost == CALL * 2 * 2
    assert response.cost == CALL * 6


def test_a_fallback_provider_is_priced_by_the_model_that_answered() -> None:
    pricer = Pricer(None, SimpleNamespace(name="fallback(openai, anthropic)"))
    counts = {"input_tokens": 2_000, "output_tokens": 100}
    assert pricer.cost(Usage(**counts), "claude-sonnet-4-5") == _genai_cost(
        "anthropic", "claude-sonnet-4-5", counts
    )
    assert pricer.cost(Usage(**counts), "gpt-4o") == _genai_cost("openai", "gpt-4o", counts)


# -- priced when read ----------------------------------------------------------------------

_LAZY = """
import sys, trio
from kova import Usage
from kova.agent import AgentBuilder
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import open_openai_server, reply_text

USAGE = Usage(input_tokens=1_000, output_tokens=40, cache_read_tokens=512)

def loaded():
    return sorted({name.split(".")[0] for name in sys.modules} & {"genai_prices", "pydantic"})

async def main():
    script = [reply_text("a", usage=USAGE), reply_text("b", usage=USAGE)]
    async with open_openai_server(script) as server:
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(base_url=server.base_url, model="gpt-4o-mini", api_key="k")
        )
        async with AgentBuilder().provider(provider).name("n").build() as agent:
            print("opened", loaded())
            first = await agent.run("hi")
            second = await agent.run("again")
            print("ran", loaded())
    print("cost", first.cost, first.usage_by_agent["n"].cost, second.usage.cost)
    print("read", loaded())

trio.run(main)
"""


def test_an_agent_that_nobody_asks_a_cost_of_never_loads_the_price_sheet() -> None:
    """Opening and running an agent imports neither genai-prices nor pydantic (16 MB) when
    no budget or cost limit needs one; the cost read afterwards is what pricing at the call
    gave."""
    done = subprocess.run(
        [sys.executable, "-c", _LAZY], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "opened []"
    assert lines[1] == "ran []"
    expected = _genai_cost(
        "openai",
        "gpt-4o-mini",
        {"input_tokens": 1_000, "output_tokens": 40, "cache_read_tokens": 512},
    )
    assert lines[2] == f"cost {expected} {expected} {expected}"
    assert lines[3] == "read ['genai_prices', 'pydantic']"


def test_a_usage_priced_later_sums_and_copies_as_one_priced_at_once() -> None:
    calls: list[tuple[str | None, str | None, float]] = []

    def price(usage: Usage, answered: str | None, asked: str | None, when: float) -> Decimal:
        calls.append((answered, asked, when))
        return Decimal(usage.input_tokens) / 1000

    later = Usage(input_tokens=3, output_tokens=1).priced_later((price, "a", "b", 5.0))
    unpriced = Usage(input_tokens=1)
    total = Usage()
    for _ in range(5_000):  # a long conversation's sum: no recursion when it is read
        total = total + later
    assert calls == []
    assert (later + unpriced).cost is None  # a part with tokens and no cost
    assert calls == [("a", "b", 5.0)]  # each usage is priced once
    assert total.cost == Decimal(15)
    assert (Usage() + later).cost == later.cost == Decimal("0.003")
    assert calls == [("a", "b", 5.0)]
    fresh = Usage(input_tokens=2).priced_later((price, None, "b", 6.0))
    assert pickle.loads(pickle.dumps(fresh)).cost == Decimal("0.002")
    assert copy.copy(Usage(input_tokens=4).priced_later((price, None, None, 0.0))).cost == Decimal(
        "0.004"
    )
    assert repr(Usage(input_tokens=1).priced_later((price, None, None, 0.0))).endswith(
        "cost=Decimal('0.001'))"
    )
    assert later == Usage(input_tokens=3, output_tokens=1)
    every = Usage(**{name: index + 1 for index, name in enumerate(Usage.__record_fields__[:-1])})
    assert every.priced_later((price, None, None, 0.0)) == every  # every count kept
    with pytest.raises(AttributeError, match="costs"):
        later.costs  # type: ignore[attr-defined]  # noqa: B018


def test_a_dated_price_is_read_at_the_time_of_the_call() -> None:
    """Priced when read, a call is still priced at the sheet's price of its own time."""
    pricer = Pricer(None, SimpleNamespace(name="anthropic"))
    counts = {"input_tokens": 300_000, "output_tokens": 1_000}
    model = "claude-sonnet-4-6"  # its price changed on 2026-03-13
    before, after = datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC)
    costs = [
        pricer.cost_of(Usage(**counts), model, None, day.timestamp()) for day in (before, after)
    ]
    usage = genai_prices.Usage(**counts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = [
            genai_prices.calc_price(
                usage, model, provider_id="anthropic", genai_request_timestamp=day
            ).total_price
            for day in (before, after)
        ]
    assert costs == expected
    assert costs[0] != costs[1]


_READERS = """
import sys, tempfile, os, threading, trio
from kova import Usage
from kova.agent import AgentBuilder
from kova.durable import SqliteJournal
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import open_openai_server, reply_text

USAGE = Usage(input_tokens=1_000, output_tokens=40)

def loaded():
    return "genai_prices.data" in sys.modules

on_loop = []

def watch(event, args):
    if event == "import" and args[0] == "genai_prices.data":
        on_loop.append(threading.current_thread() is threading.main_thread())

sys.addaudithook(watch)

def agent_on(server):
    provider = OpenAiCompatibleProvider(
        OpenAiConfig(base_url=server.base_url, model="gpt-4o-mini", api_key="k")
    )
    return AgentBuilder().provider(provider).build()

async def main():
    script = [reply_text("a", usage=USAGE)]
    mode = sys.argv[1]
    async with open_openai_server(script) as server:
        agent = agent_on(server)
        if mode == "subscriber":
            agent.telemetry.subscribe(lambda event: None)
        async with agent:
            print("opened", loaded())
            if mode == "journal":
                with tempfile.TemporaryDirectory() as folder:
                    journal = SqliteJournal(os.path.join(folder, "j.db"))
                    await agent.run("hi", journal=journal, turn_id="t")
            print("ran", loaded())
    print("imported on the loop", any(on_loop))

trio.run(main)
"""


@pytest.mark.parametrize(
    ("mode", "opened"), [("subscriber", "opened True"), ("journal", "opened False")]
)
def test_an_agent_that_reads_costs_as_it_runs_loads_the_sheet_before_its_first_call(
    mode: str, opened: str
) -> None:
    """A telemetry subscriber reads every call's cost, a journal stores it: the sheet is
    loaded in a worker thread before the call (when the agent opens; when the journaled turn
    starts), so the first read does not import it on the event loop."""
    done = subprocess.run(
        [sys.executable, "-c", _READERS, mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [opened, "ran True", "imported on the loop False"]
