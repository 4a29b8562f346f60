"""``ToolRegistry`` (``kova/tools/_registry.py``)."""

import attrs
import pytest

from kova import ToolDefinition, ToolNotFoundError, ToolResult
from kova.tools import (
    DuplicateToolError,
    InvalidToolArguments,
    ToolDefinitionError,
    ToolRegistry,
    tool,
)


@tool
def echo(text: str) -> str:
    """Repeat the text."""
    return text


@attrs.frozen(kw_only=True)
class Weather:
    """A hand-written tool: a frozen attrs class with the four members."""

    name: str = "get_weather"
    description: str = "Get current weather for a city"
    parameters: dict[str, object] = attrs.field(
        factory=lambda: {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        }
    )

    async def execute(self, arguments):  # type: ignore[no-untyped-def]
        return ToolResult(content=f"72F, sunny in {arguments['city']}")


def test_register_get_names_definitions() -> None:
    registry = ToolRegistry([echo])
    weather = Weather()
    registry.register(weather)
    assert registry.get("get_weather") is weather
    assert registry.get("echo") is echo
    assert registry.get("missing") is None
    assert registry.names() == ["echo", "get_weather"]
    assert list(registry) == [echo, weather]
    assert len(registry) == 2
    assert "echo" in registry
    assert "missing" not in registry
    assert registry.definitions() == [
        ToolDefinition(name="echo", description="Repeat the text.", parameters=echo.parameters),
        ToolDefinition(
            name="get_weather",
            description="Get current weather for a city",
            parameters=weather.parameters,
        ),
    ]


def test_duplicate_name_is_rejected() -> None:
    registry = ToolRegistry([echo])
    with pytest.raises(DuplicateToolError, match="'echo' is already registered") as caught:
        registry.register(tool(name="echo")(lambda text: text))
    assert caught.value.tool_name == "echo"
    assert registry.get("echo") is echo


def test_duplicates_in_the_constructor_are_rejected() -> None:
    with pytest.raises(DuplicateToolError):
        ToolRegistry([echo, echo])


def test_clones_share_registrations() -> None:
    registry = ToolRegistry()
    clone = registry.clone()
    registry.register(echo)
    clone.register(Weather())
    assert registry.names() == clone.names() == ["echo", "get_weather"]
    assert clone.unregister("echo") is echo
    assert "echo" not in registry
    assert registry.unregister("echo") is None


def test_independent_registries_do_not_share() -> None:
    first = ToolRegistry()
    second = ToolRegistry()
    first.register(echo)
    assert len(second) == 0


def test_non_tool_is_rejected() -> None:
    with pytest.raises(ToolDefinitionError, match="is not a Tool"):
        ToolRegistry().register(lambda: None)  # type: ignore[arg-type]


def test_empty_name_is_rejected() -> None:
    with pytest.raises(ToolDefinitionError, match="empty name"):
        ToolRegistry().register(Weather(name=""))


def test_validate_arguments_uses_the_tools_schema() -> None:
    registry = ToolRegistry([Weather()])
    registry.validate_arguments("get_weather", {"city": "Oslo"})
    with pytest.raises(InvalidToolArguments) as caught:
        registry.validate_arguments("get_weather", {"town": "Oslo"})
    assert caught.value.problems == ("$: 'city' is a required property",)
    assert caught.value.tool_name == "get_weather"
    with pytest.raises(ToolNotFoundError):
        registry.validate_arguments("nope", {})


def test_validate_arguments_compiles_a_schema_once() -> None:
    registry = ToolRegistry([echo])
    registry.validate_arguments("echo", {"text": "a"})
    entry = registry._store.entries["echo"]
    first = entry.validator
    registry.validate_arguments("echo", {"text": "b"})
    assert entry.validator is first


async def test_registered_tool_executes() -> None:
    registry = ToolRegistry([Weather()])
    found = registry.get("get_weather")
    assert found is not None
    assert await found.execute({"city": "Oslo"}) == ToolResult(content="72F, sunny in Oslo")


@tool(defer=True)
def rarely(x: int) -> int:
    """A rarely used tool."""
    return x


class Changing:
    """A hand-written tool whose description changes (its definition is read every time)."""

    name = "changing"
    parameters: dict[str, object] = {"type": "object", "properties": {}}  # noqa: RUF012

    def __init__(self) -> None:
        self.description = "before"

    async def execute(self, arguments):  # type: ignore[no-untyped-def]
        return ToolResult(content="ok")


def test_split_definitions_is_kept_until_the_tools_change() -> None:
    registry = ToolRegistry([echo, rarely])
    split = registry.split_definitions()
    assert [[d.name for d in part] for part in split] == [["echo"], ["rarely"]]
    assert registry.split_definitions() is split  # every turn reads it: worked out once
    registry.clone().register(Weather())
    upfront, deferred = registry.split_definitions()
    assert [d.name for d in upfront] == ["echo", "get_weather"]
    assert [d.name for d in deferred] == ["rarely"]
    registry.unregister("echo")
    assert [d.name for d in registry.split_definitions()[0]] == ["get_weather"]


def test_split_definitions_reads_a_changing_tool_every_time() -> None:
    changing = Changing()
    registry = ToolRegistry([echo, changing])
    assert registry.split_definitions()[0][1].description == "before"
    changing.description = "after"
    assert registry.split_definitions()[0][1].description == "after"
