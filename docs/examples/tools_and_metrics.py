"""Tools and metrics end to end, with a scripted model (no network, no API key).

Run it: python docs/examples/tools_and_metrics.py
"""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import TYPE_CHECKING, Literal

import trio

from kova import JSONValue, Message, ToolResult
from kova.agent import AgentBuilder
from kova.telemetry import open_metrics
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import InvalidToolArguments, ToolRegistry, tool

if TYPE_CHECKING:
    from collections.abc import Mapping


class Unit(enum.Enum):
    CELSIUS = "c"
    FAHRENHEIT = "f"


@dataclasses.dataclass
class Place:
    """A place on the map.

    Attributes:
        city: The city name.
        country: ISO country code, when the city name is ambiguous.
    """

    city: str
    country: str | None = None


@tool
def get_weather(place: Place, unit: Unit = Unit.CELSIUS, days: int = 1) -> dict[str, object]:
    """Get the weather forecast for a place.

    Args:
        place: Where.
        unit: Temperature unit.
        days: How many days ahead, 1 to 3.
    """
    # A sync function: kova runs it in a worker thread. Arguments arrive converted: `place`
    # is a Place, `unit` a Unit.
    degrees = -3 if unit is Unit.CELSIUS else 27
    return {"city": place.city, "forecast": [f"{degrees}°{unit.value.upper()}, snow"] * days}


class Calculator:
    """A tool written by hand: any object with these four members is a Tool."""

    name = "calculate"
    description = "Add or multiply two numbers."
    parameters: Mapping[str, JSONValue] = {
        "type": "object",
        "properties": {
            "op": {"enum": ["add", "mul"]},
            "a": {"type": "number"},
            "b": {"type": "number"},
        },
        "required": ["op", "a", "b"],
    }

    async def execute(self, arguments: Mapping[str, JSONValue]) -> ToolResult:
        a, b = float(arguments["a"]), float(arguments["b"])  # type: ignore[arg-type]
        op: Literal["add", "mul"] = arguments["op"]  # type: ignore[assignment]
        return ToolResult(content=str(a + b if op == "add" else a * b))


async def main() -> None:
    registry = ToolRegistry([get_weather, Calculator()])
    print("tools:", registry.names())
    print(json.dumps(get_weather.parameters["properties"]["unit"]))  # type: ignore[index]

    # The agent loop validates every call against the tool's schema before running it.
    try:
        registry.validate_arguments("get_weather", {"place": {"town": "Oslo"}, "days": "2"})
    except InvalidToolArguments as error:
        print(error)

    # A model that first gets the arguments wrong, reads the in-band error, then fixes them.
    model = ScriptedProvider(
        [
            reply_tool_calls(("get_weather", {"place": "Oslo"})),
            reply_tool_calls(
                ("get_weather", {"place": {"city": "Oslo"}, "days": 2}),
                ("calculate", {"op": "mul", "a": 6, "b": 7}),
            ),
            reply_text("Snow in Oslo for two days, and the answer is 42."),
        ]
    )
    async with open_metrics() as metrics:
        agent = AgentBuilder().provider(model).tool_registry(registry).metrics(metrics).build()
        async with agent:
            response = await agent.run([Message.user("Weather in Oslo? And 6 times 7?")])
        for message in response.new_messages:
            for result in message.content:
                if isinstance(result, ToolResult):
                    status = "error" if result.is_error else "ok"
                    print(f"[{status}] {result.text}")
        print(response.text)

        snapshot = await metrics.snapshot()
        print(
            f"{snapshot.llm_request_count} LLM calls, {snapshot.total_tokens} tokens, "
            f"tools: {snapshot.tool_success_count} ok / {snapshot.tool_error_count} failed, "
            f"tool p50 {snapshot.tool_duration_ms.p50:.3f} ms"
        )


if __name__ == "__main__":
    trio.run(main)
