"""TestProvider calls every tool once with schema-made arguments, then answers; structured
output valid for its schema; kova_no_network refuses real provider requests."""

from __future__ import annotations

import dataclasses
import datetime
import json
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING, Any, Literal

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from kova import Message, Role
from kova.agent import AgentBuilder, ToolCallStarted, TurnCompleted
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import (
    RealNetworkRequestError,
    TestProvider,
    no_network,
    open_openai_server,
    reply_text,
    value_for_schema,
)
from kova.tools import tool

if TYPE_CHECKING:
    from pathlib import Path

calls: list[tuple[str, dict[str, Any]]] = []


class Window(BaseModel):
    start: datetime.date
    days: int = Field(ge=1, le=14)


@tool
def book(city: str, nights: int, window: Window, kind: Literal["hotel", "hostel"]) -> str:
    """Book a room.

    Args:
        city: where.
        nights: how many nights.
        window: when.
        kind: what sort of place.
    """
    calls.append(("book", {"city": city, "nights": nights, "window": window, "kind": kind}))
    return f"booked {kind} in {city}"


@tool
def weather(city: str, unit: Literal["C", "F"] = "C") -> str:
    """The weather.

    Args:
        city: where.
        unit: the unit.
    """
    calls.append(("weather", {"city": city, "unit": unit}))
    return "sunny"


async def test_it_calls_every_tool_once_with_valid_arguments_then_answers() -> None:
    calls.clear()
    provider = TestProvider()
    async with AgentBuilder().provider(provider).tools(book, weather).build() as agent:
        response = await agent.run("plan a trip")
    assert sorted(name for name, _ in calls) == ["book", "weather"]
    booked = dict(calls)["book"]
    assert booked["window"] == Window(start=datetime.date(2025, 1, 1), days=1)
    assert booked["kind"] == "hotel"
    # Every argument passed the tools' own validation: no call came back as an error.
    results = response.new_messages[1]
    assert results.role is Role.TOOL
    assert not any(block.is_error for block in results.content)  # type: ignore[union-attr]
    assert json.loads(response.text) == {"book": "booked hotel in a", "weather": "sunny"}
    assert response.llm_calls == 2


async def test_it_streams_and_can_call_some_tools_or_none() -> None:
    calls.clear()
    provider = TestProvider(call_tools=["weather"], text="all done")
    async with AgentBuilder().provider(provider).tools(book, weather).build() as agent:
        async with agent.stream([Message.user("hi")]) as events:
            seen = [event async for event in events]
    assert [e.name for e in seen if isinstance(e, ToolCallStarted)] == ["weather"]
    assert isinstance(seen[-1], TurnCompleted)
    assert seen[-1].response.text == "all done"
    async with AgentBuilder().provider(TestProvider(call_tools=False)).tool(book).build() as agent:
        assert (await agent.run("hi")).text == "success (no tool calls)"


@dataclasses.dataclass
class Trip:
    city: str
    nights: int
    window: Window
    tags: list[str]


async def test_structured_output_is_valid_for_the_requested_type() -> None:
    async with AgentBuilder().provider(TestProvider()).build() as agent:
        trip, response = await agent.run_structured("plan", Trip)
        assert isinstance(trip, Trip)
        assert response.output_retries == 0
        count, _ = await agent.run_structured("how many", list[int])
        assert count == [1]


def test_it_is_not_collected_as_a_test_class() -> None:
    assert TestProvider.__test__ is False


class Deep(BaseModel):
    name: str = Field(min_length=2, max_length=5)
    ratio: float = Field(gt=0, lt=1)
    step: int = Field(multiple_of=5, ge=7)
    when: datetime.datetime
    choice: Literal["a", "b"] | None
    children: list[Deep] = Field(default_factory=list, max_length=0)
    lookup: dict[str, int] = Field(min_length=1)


@pytest.mark.parametrize("model", [Deep, Window, Trip, list[Window], dict[str, Window]])
def test_made_up_values_validate_under_their_schema(model: Any) -> None:
    from pydantic import TypeAdapter

    adapter = TypeAdapter(model)
    schema = adapter.json_schema()
    value = value_for_schema(schema)
    jsonschema.validate(value, schema)
    adapter.validate_python(value)


_SIMPLE = st.sampled_from(
    [
        {"type": "string", "minLength": 3},
        {"type": "integer", "minimum": -5, "exclusiveMaximum": 0},
        {"type": "number", "exclusiveMinimum": 2.5},
        {"type": "boolean"},
        {"type": "null"},
        {"enum": ["x", 2]},
        {"type": "string", "format": "email"},
        {"type": ["integer", "null"], "maximum": -10},
    ]
)
_SCHEMAS = st.recursive(
    _SIMPLE,
    lambda inner: st.one_of(
        st.builds(
            lambda items, low: {"type": "array", "items": items, "minItems": low},
            inner,
            st.integers(0, 3),
        ),
        st.builds(
            lambda props: {
                "type": "object",
                "properties": props,
                "required": sorted(props),
                "additionalProperties": False,
            },
            st.dictionaries(st.text("abc", min_size=1, max_size=3), inner, max_size=3),
        ),
        st.builds(lambda a, b: {"anyOf": [a, b]}, inner, inner),
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(_SCHEMAS)
def test_made_up_values_validate_for_generated_schemas(schema: dict[str, Any]) -> None:
    jsonschema.validate(value_for_schema(schema), schema)


async def test_kova_no_network_refuses_a_real_request_and_lets_loopback_through(
    kova_no_network: list[str],
) -> None:
    real = OpenAiCompatibleProvider(OpenAiConfig(model="gpt-4.1", api_key="sk-test"))
    async with AgentBuilder().provider(real).build() as agent:
        with pytest.raises(RealNetworkRequestError, match=r"https://api\.openai\.com/"):
            await agent.run("hi")
    assert kova_no_network == ["https://api.openai.com/v1/chat/completions"]
    kova_no_network.clear()  # refused on purpose: the fixture's teardown would fail the test

    async with open_openai_server([reply_text("fine")]) as server:
        local = OpenAiCompatibleProvider(
            OpenAiConfig(base_url=server.base_url, model="m", api_key="k")
        )
        async with AgentBuilder().provider(local).build() as agent:
            assert (await agent.run("hi")).text == "fine"
    assert kova_no_network == []


def test_a_swallowed_real_request_still_fails_the_test(tmp_path: Path) -> None:
    """The plugin as users get it (the pytest11 entry point), in a pytest of its own."""
    (tmp_path / "test_sloppy.py").write_text(
        textwrap.dedent(
            """
            from kova.agent import AgentBuilder
            from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig

            async def test_sloppy():
                real = OpenAiCompatibleProvider(OpenAiConfig(model="m", api_key="sk"))
                async with AgentBuilder().provider(real).build() as agent:
                    try:
                        await agent.run("hi")
                    except BaseException:
                        pass  # the code under test hides the failure
            """
        )
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\ntrio_mode = true\nkova_no_network = true\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 passed, 1 error" in result.stdout
    assert "kova_no_network: 1 real provider request(s) refused: https://api.openai.com/" in (
        result.stdout
    )


def test_no_network_works_without_pytest() -> None:
    with no_network() as refused:
        pass
    assert refused == []
