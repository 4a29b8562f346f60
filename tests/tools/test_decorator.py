"""``@tool`` at run time: validation, conversion, threads and results."""

import dataclasses
import datetime
import enum
import json
import threading
from typing import Literal

import attrs
import pydantic
import pytest
import trio
import trio.lowlevel
import trio.testing

from kova import Image, Text, ToolResult
from kova.tools import FunctionTool, Tool, ToolDefinitionError, definition, tool


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Point:
    x: int
    y: float = 0.0


@attrs.frozen(kw_only=True)
class Box:
    label: str
    color: Color = Color.RED


class Sub(pydantic.BaseModel):
    z: str


class Payload(pydantic.BaseModel):
    a: int
    subs: list[Sub] = []


@tool
def add(a: int, b: int = 2) -> int:
    """Add two numbers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


@tool(name="weather", description="Report the weather.")
async def get_weather(city: str, unit: Literal["c", "f"] = "c") -> str:
    await trio.lowlevel.checkpoint()
    return f"12{unit} in {city}"


def test_decorated_function_is_a_tool_and_still_callable() -> None:
    assert isinstance(add, Tool)
    assert isinstance(add, FunctionTool)
    assert add(1, b=5) == 6
    assert add.__name__ == "add"
    assert add.__doc__ is not None
    assert add.__doc__.startswith("Add two numbers.")


def test_options_override_name_and_description() -> None:
    assert get_weather.name == "weather"
    assert get_weather.description == "Report the weather."
    assert definition(get_weather).name == "weather"
    assert definition(get_weather).parameters is get_weather.parameters


async def test_async_function_runs_directly() -> None:
    assert await get_weather.execute({"city": "Oslo", "unit": "f"}) == ToolResult(
        content="12f in Oslo"
    )


async def test_sync_function_runs_in_a_worker_thread() -> None:
    seen: list[int] = []

    @tool
    def where() -> str:
        seen.append(threading.get_ident())
        return "done"

    assert await where.execute({}) == ToolResult(content="done")
    assert seen
    assert seen[0] != threading.get_ident()


async def test_an_inline_sync_function_runs_in_the_calling_task_without_a_thread() -> None:
    seen: list[tuple[int, object]] = []

    @tool(inline=True)
    def where() -> str:
        """Where it runs."""
        seen.append((threading.get_ident(), trio.lowlevel.current_task()))
        return "done"

    assert await where.execute({}) == ToolResult(content="done")
    assert seen == [(threading.get_ident(), trio.lowlevel.current_task())]


@pytest.mark.parametrize("inline", [1, "yes", None])
def test_inline_must_be_a_bool(inline: object) -> None:
    with pytest.raises(ToolDefinitionError, match="inline must be a bool"):

        @tool(inline=inline)  # type: ignore[call-overload]
        def quick() -> str:
            return "x"


def test_an_async_function_cannot_be_inline() -> None:
    with pytest.raises(ToolDefinitionError, match="inline=True is for a plain function"):

        @tool(inline=True)
        async def quick() -> str:
            return "x"


async def test_non_string_result_becomes_json_text() -> None:
    assert await add.execute({"a": 1}) == ToolResult(content="3")


async def test_invalid_arguments_return_an_error_result_without_calling() -> None:
    calls: list[object] = []

    @tool
    def record(a: int, tag: str = "") -> str:
        calls.append(a)
        return "called"

    result = await record.execute({"a": "one", "extra": True})
    assert result.is_error
    assert result.text == (
        "invalid arguments for tool 'record':\n"
        "- $: Additional properties are not allowed ('extra' was unexpected)\n"
        "- $.a: 'one' is not of type 'integer'"
    )
    assert calls == []


async def test_missing_required_argument_is_reported() -> None:
    result = await add.execute({"b": 1})
    assert result == ToolResult.error(
        "invalid arguments for tool 'add':\n- $: 'a' is a required property"
    )


async def test_arguments_are_converted_to_hinted_types() -> None:
    received: dict[str, object] = {}

    @tool
    async def take(
        color: Color,
        points: list[Point],
        box: Box,
        payload: Payload,
        ratio: float,
        pair: tuple[int, str],
        maybe: Color | None = None,
        tags: frozenset[str] = frozenset(),
    ) -> str:
        received.update(
            color=color, points=points, box=box, payload=payload, ratio=ratio, pair=pair,
            maybe=maybe, tags=tags,
        )  # fmt: skip
        return "ok"

    result = await take.execute(
        {
            "color": "blue",
            "points": [{"x": 1}, {"x": 2, "y": 3.5}],
            "box": {"label": "b", "color": "blue"},
            "payload": {"a": 1, "subs": [{"z": "q"}]},
            "ratio": 2,
            "pair": [1, "x"],
            "maybe": None,
            "tags": ["a", "b"],
        }
    )
    assert result == ToolResult(content="ok")
    assert received == {
        "color": Color.BLUE,
        "points": [Point(x=1), Point(x=2, y=3.5)],
        "box": Box(label="b", color=Color.BLUE),
        "payload": Payload(a=1, subs=[Sub(z="q")]),
        "ratio": 2.0,
        "pair": (1, "x"),
        "maybe": None,
        "tags": frozenset({"a", "b"}),
    }
    assert isinstance(received["ratio"], float)


async def test_positional_only_parameters_are_bound_positionally() -> None:
    @tool
    def divide(numerator: int, denominator: int = 1, /, *, places: int = 2) -> str:
        return f"{numerator / denominator:.{places}f}"

    assert await divide.execute({"numerator": 1, "denominator": 3}) == ToolResult(content="0.33")
    assert await divide.execute({"numerator": 7, "places": 0}) == ToolResult(content="7")


@attrs.frozen(kw_only=True)
class ResultCase:
    value: object
    expected: ToolResult


class Size(enum.Enum):
    SMALL = "s"


RESULT_CASES = [
    ResultCase(value="plain", expected=ToolResult(content="plain")),
    ResultCase(
        value=ToolResult.error("kept as is"),
        expected=ToolResult(content="kept as is", is_error=True),
    ),
    ResultCase(value=Text(text="t"), expected=ToolResult(content=(Text(text="t"),))),
    ResultCase(
        value=[Text(text="t"), Image(url="https://example.com/a.png")],
        expected=ToolResult(content=(Text(text="t"), Image(url="https://example.com/a.png"))),
    ),
    ResultCase(value=None, expected=ToolResult(content="null")),
    ResultCase(value={"a": [1, 2.5, True]}, expected=ToolResult(content='{"a": [1, 2.5, true]}')),
    ResultCase(value=[], expected=ToolResult(content="[]")),
    ResultCase(value=Point(x=1), expected=ToolResult(content='{"x": 1, "y": 0.0}')),
    ResultCase(value=Box(label="b"), expected=ToolResult(content='{"label": "b", "color": "red"}')),
    ResultCase(value=Sub(z="é"), expected=ToolResult(content='{"z": "é"}')),
    ResultCase(value=Size.SMALL, expected=ToolResult(content='"s"')),
    ResultCase(value={"b", "a"}, expected=ToolResult(content='["a", "b"]')),
    ResultCase(value=datetime.date(2025, 1, 2), expected=ToolResult(content='"2025-01-02"')),
]


@pytest.mark.parametrize("case", RESULT_CASES, ids=lambda case: type(case.value).__name__)
async def test_return_value_becomes_a_tool_result(case: ResultCase) -> None:
    @tool
    async def produce() -> object:
        return case.value

    assert await produce.execute({}) == case.expected


async def test_unserializable_result_is_an_in_band_error() -> None:
    @tool
    async def produce() -> object:
        return object()

    result = await produce.execute({})
    assert result.is_error
    assert "returned a object" in result.text


async def test_exception_in_the_tool_propagates_to_the_loop() -> None:
    @tool
    def explode() -> str:
        raise LookupError("no such record")

    with pytest.raises(LookupError, match="no such record"):
        await explode.execute({})


async def test_cancelling_a_sync_tool_waits_for_the_thread_by_default() -> None:
    release = threading.Event()
    events: list[str] = []

    @tool
    def slow() -> str:
        release.wait(timeout=10)
        events.append("thread finished")
        return "late"

    cancel_scope = trio.CancelScope()

    async def run() -> None:
        with cancel_scope:
            await slow.execute({})
        events.append("call returned")

    with trio.fail_after(10):  # a guard only; the test itself never waits on the clock
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await trio.testing.wait_all_tasks_blocked()
            cancel_scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert events == []  # cancelled, but still waiting for the thread
            release.set()
    assert events == ["thread finished", "call returned"]


async def test_cancelling_a_sync_tool_can_abandon_the_thread() -> None:
    release = threading.Event()
    done = threading.Event()

    @tool(abandon_on_cancel=True)
    def slow() -> str:
        release.wait(timeout=10)
        done.set()
        return "late"

    cancel_scope = trio.CancelScope()
    returned: list[bool] = []

    async def run() -> None:
        with cancel_scope:
            await slow.execute({})
        returned.append(done.is_set())

    with trio.fail_after(10):  # a guard only
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await trio.testing.wait_all_tasks_blocked()
            cancel_scope.cancel()
    assert returned == [False]  # returned while the thread was still blocked
    release.set()


async def test_sync_tools_take_their_threads_from_the_runs_thread_limit() -> None:
    limiter = trio.to_thread.current_default_thread_limiter()
    limiter.total_tokens = 1
    started, release = threading.Event(), threading.Event()
    events: list[str] = []

    @tool
    def first() -> str:
        events.append("first started")
        started.set()
        release.wait(timeout=10)
        return "first"

    @tool
    def second() -> str:
        events.append("second started")
        return "second"

    with trio.fail_after(10):  # a guard only
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first.execute, {})
            # Waited for in a thread of its own limiter (the default one's only thread is busy).
            await trio.to_thread.run_sync(started.wait, 10, limiter=trio.CapacityLimiter(1))
            nursery.start_soon(second.execute, {})
            await trio.testing.wait_all_tasks_blocked()
            assert events == ["first started"]  # the one thread is taken: second waits
            assert limiter.borrowed_tokens == 1
            release.set()
    assert events == ["first started", "second started"]
    assert limiter.borrowed_tokens == 0


async def test_a_sync_tool_cancelled_while_waiting_for_a_thread_never_runs() -> None:
    limiter = trio.to_thread.current_default_thread_limiter()
    limiter.total_tokens = 1
    holder = object()
    await limiter.acquire_on_behalf_of(holder)  # every thread taken
    ran: list[bool] = []

    @tool
    def work() -> str:
        ran.append(True)
        return "done"

    scope = trio.CancelScope()

    async def run() -> None:
        with scope:
            await work.execute({})

    with trio.fail_after(10):  # a guard only
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await trio.testing.wait_all_tasks_blocked()  # waiting for a thread
            scope.cancel()
    assert scope.cancelled_caught
    assert ran == []
    assert limiter.borrowed_tokens == 1
    limiter.release_on_behalf_of(holder)
    assert await work.execute({}) == ToolResult(content="done")
    assert ran == [True]


def test_schema_is_valid_json() -> None:
    json.dumps(add.parameters)


class AsyncCallable:
    async def __call__(self, text: str) -> str:
        await trio.lowlevel.checkpoint()
        return text.upper()


async def test_callable_instance_with_async_call_runs_directly() -> None:
    shout = tool(name="shout")(AsyncCallable())
    assert shout.parameters["required"] == ["text"]
    assert await shout.execute({"text": "hi"}) == ToolResult(content="HI")


class Holder:
    @staticmethod
    @tool
    def double(value: int) -> int:
        return value * 2


async def test_staticmethod_tool_in_a_class() -> None:
    assert Holder.double(2) == 4
    assert await Holder.double.execute({"value": 5}) == ToolResult(content="10")


async def test_union_converts_through_the_matching_branch() -> None:
    received: list[object] = []

    @tool
    def pick(value: float | Color | bool) -> str:
        received.append(value)
        return "ok"

    for raw in (3, "red", True, 2.5):
        assert await pick.execute({"value": raw}) == ToolResult(content="ok")
    assert received == [3.0, Color.RED, True, 2.5]
    assert [type(value) for value in received] == [float, Color, bool, float]
