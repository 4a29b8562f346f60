"""Type hints and docstrings to JSON Schema (``kova/tools/_schema.py``, through ``@tool``)."""

import dataclasses
import enum
import functools
import re
import typing
from collections.abc import Mapping, Sequence
from typing import (
    Annotated,
    Any,
    Literal,
    NewType,
    NotRequired,
    Optional,
    Required,
    TypedDict,
    Union,
)

import attrs
import pydantic
import pytest

from kova.tools import ToolDefinitionError, tool
from kova.tools._schema import parse_docstring


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Point:
    """A point on the plane.

    Attributes:
        x: Horizontal position.
        y: Vertical position.
    """

    x: int
    y: float = 0.0


@attrs.frozen(kw_only=True)
class Box:
    label: str
    _size: int = attrs.field(default=1, alias="size")
    tags: tuple[str, ...] = attrs.field(factory=tuple)


class Options(TypedDict, total=False):
    verbose: bool
    depth: int


class Needed(TypedDict):
    key: str


class Mixed(TypedDict):
    key: str
    extra: NotRequired[int]


class MostlyOptional(TypedDict, total=False):
    key: Required[str]
    extra: int


class Sub(pydantic.BaseModel):
    z: str


class Model(pydantic.BaseModel):
    a: int
    subs: list[Sub] = []


@dataclasses.dataclass
class Node:
    value: int
    children: "list[Node]"


UserId = NewType("UserId", int)


def property_schema(hint: object) -> dict[str, Any]:
    """The schema ``@tool`` builds for one required parameter of type ``hint``."""

    def function(value):  # type: ignore[no-untyped-def]
        return value

    function.__annotations__ = {"value": hint}
    built = tool(function)
    return dict(built.parameters["properties"]["value"])  # type: ignore[index, arg-type]


@attrs.frozen(kw_only=True)
class Case:
    hint: object
    schema: dict[str, Any]


CASES = [
    Case(hint=str, schema={"type": "string"}),
    Case(hint=int, schema={"type": "integer"}),
    Case(hint=float, schema={"type": "number"}),
    Case(hint=bool, schema={"type": "boolean"}),
    Case(hint=None, schema={"type": "null"}),
    Case(hint=Any, schema={}),
    Case(hint=UserId, schema={"type": "integer"}),
    Case(hint=Optional[int], schema={"anyOf": [{"type": "integer"}, {"type": "null"}]}),  # noqa: UP045
    Case(hint=int | str, schema={"anyOf": [{"type": "integer"}, {"type": "string"}]}),
    Case(hint=Union[int, None], schema={"anyOf": [{"type": "integer"}, {"type": "null"}]}),  # noqa: UP007
    Case(hint=list[str], schema={"type": "array", "items": {"type": "string"}}),
    Case(hint=Sequence[int], schema={"type": "array", "items": {"type": "integer"}}),
    Case(hint=list, schema={"type": "array"}),
    Case(hint=tuple[int, ...], schema={"type": "array", "items": {"type": "integer"}}),
    Case(
        hint=tuple[int, str],
        schema={
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "string"}],
            "items": False,
            "minItems": 2,
            "maxItems": 2,
        },
    ),
    Case(hint=set[str], schema={"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
    Case(
        hint=dict[str, int], schema={"type": "object", "additionalProperties": {"type": "integer"}}
    ),
    Case(hint=Mapping[str, Any], schema={"type": "object", "additionalProperties": {}}),
    Case(hint=dict, schema={"type": "object"}),
    Case(hint=Literal["a", "b"], schema={"type": "string", "enum": ["a", "b"]}),
    Case(hint=Literal[1, "x"], schema={"enum": [1, "x"]}),
    Case(hint=Color, schema={"type": "string", "enum": ["red", "blue"]}),
    Case(hint=Level, schema={"type": "integer", "enum": [1, 2]}),
    Case(
        hint=Annotated[str, "A city name"], schema={"type": "string", "description": "A city name"}
    ),
    Case(
        hint=Annotated[int, pydantic.Field(description="From a Field")],
        schema={"type": "integer", "description": "From a Field"},
    ),
    Case(
        hint=Mixed,
        schema={
            "type": "object",
            "properties": {"key": {"type": "string"}, "extra": {"type": "integer"}},
            "required": ["key"],
            "additionalProperties": False,
        },
    ),
    Case(
        hint=MostlyOptional,
        schema={
            "type": "object",
            "properties": {"key": {"type": "string"}, "extra": {"type": "integer"}},
            "required": ["key"],
            "additionalProperties": False,
        },
    ),
    Case(
        hint=Point,
        schema={
            "type": "object",
            "properties": {
                "x": {"type": "integer", "description": "Horizontal position."},
                "y": {"type": "number", "description": "Vertical position.", "default": 0.0},
            },
            "required": ["x"],
            "additionalProperties": False,
            "description": "A point on the plane.",
        },
    ),
    Case(
        hint=Box,
        schema={
            "type": "object",
            "properties": {
                "label": {"type": "string"},
                "size": {"type": "integer", "default": 1},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["label"],
            "additionalProperties": False,
        },
    ),
    Case(
        hint=Options,
        schema={
            "type": "object",
            "properties": {"verbose": {"type": "boolean"}, "depth": {"type": "integer"}},
            "additionalProperties": False,
        },
    ),
    Case(
        hint=Needed,
        schema={
            "type": "object",
            "properties": {"key": {"type": "string"}},
            "required": ["key"],
            "additionalProperties": False,
        },
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: repr(case.hint))
def test_hint_becomes_schema(case: Case) -> None:
    assert property_schema(case.hint) == case.schema


def test_function_schema_has_required_defaults_and_docs() -> None:
    @tool
    def get_weather(city: str, days: int = 1, unit: Literal["c", "f"] = "c") -> str:
        """Get the weather forecast.

        Uses the national weather service.

        Args:
            city: The city name,
                for example "Oslo".
            days (int): How many days ahead.

        Returns:
            The forecast text.
        """
        return city

    assert get_weather.name == "get_weather"
    assert get_weather.description == (
        "Get the weather forecast.\n\nUses the national weather service."
    )
    assert get_weather.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": 'The city name, for example "Oslo".'},
            "days": {"type": "integer", "description": "How many days ahead.", "default": 1},
            "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
        },
        "required": ["city"],
        "additionalProperties": False,
    }


def test_enum_default_is_its_value() -> None:
    @tool
    def paint(color: Color = Color.BLUE) -> str:
        return color.value

    assert paint.parameters["properties"] == {  # type: ignore[comparison-overlap]
        "color": {"type": "string", "enum": ["red", "blue"], "default": "blue"}
    }


def test_pydantic_model_definitions_are_hoisted_to_the_root() -> None:
    @tool
    def store(model: Model) -> str:
        return "ok"

    parameters = store.parameters
    assert parameters["$defs"] == {"Sub": Sub.model_json_schema()}
    model_schema = parameters["properties"]["model"]  # type: ignore[index, call-overload]
    assert model_schema["properties"]["subs"]["items"] == {"$ref": "#/$defs/Sub"}
    assert "$defs" not in model_schema


def test_no_parameters_gives_an_empty_object_schema() -> None:
    @tool
    def ping() -> str:
        return "pong"

    assert ping.parameters == {"type": "object", "properties": {}, "additionalProperties": False}


@attrs.frozen(kw_only=True)
class Rejected:
    function: typing.Callable[..., object]
    fragment: str


def _self(self, x: int) -> int:  # type: ignore[no-untyped-def]
    return x


def _args(*numbers: int) -> int:
    return sum(numbers)


def _kwargs(**options: str) -> str:
    return ""


def _bytes(data: bytes) -> int:
    return len(data)


def _int_keys(data: dict[int, str]) -> int:
    return len(data)


def _recursive(node: Node) -> int:
    return node.value


def _generator(n: int) -> typing.Iterator[int]:
    yield n


REJECTED = [
    Rejected(function=_self, fragment="parameter 'self'"),
    Rejected(function=_args, fragment="*numbers cannot be given by a model"),
    Rejected(function=_kwargs, fragment="**options cannot be given by a model"),
    Rejected(function=_bytes, fragment="parameter 'data': cannot describe type <class 'bytes'>"),
    Rejected(function=_int_keys, fragment="use dict[str, ...]"),
    Rejected(function=_recursive, fragment="Node contains itself"),
    Rejected(function=_generator, fragment="a generator cannot be a tool"),
]


@pytest.mark.parametrize("case", REJECTED, ids=lambda case: case.function.__name__)
def test_unusable_signature_is_rejected_at_decoration(case: Rejected) -> None:
    with pytest.raises(ToolDefinitionError, match=re.escape(case.fragment)):
        tool(case.function)


def test_method_self_is_rejected_with_advice() -> None:
    with pytest.raises(ToolDefinitionError, match="not a method"):

        class Service:
            @tool
            def lookup(self, key: str) -> str:
                return key


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "dotted.name"])
def test_bad_tool_name_is_rejected(name: str) -> None:
    with pytest.raises(ToolDefinitionError, match="must be 1 to 64 characters"):
        tool(name=name)(_bytes)


def test_unresolvable_hint_is_a_definition_error() -> None:
    def function(value: "NoSuchType") -> str:  # type: ignore[name-defined]  # noqa: F821
        return ""

    with pytest.raises(ToolDefinitionError, match="cannot resolve its type hints"):
        tool(function)


DOCSTRING = """Summary line.

Longer explanation
on two lines.

Args:
    path (str): Where to look.
    depth: How deep to go, counted
        in directory levels.
    *extra: Ignored.

Raises:
    ValueError: never listed as an argument.
"""


def test_parse_docstring_reads_google_style() -> None:
    description, arguments = parse_docstring(DOCSTRING)
    assert description == "Summary line.\n\nLonger explanation on two lines."
    assert arguments == {
        "path": "Where to look.",
        "depth": "How deep to go, counted in directory levels.",
        "extra": "Ignored.",
    }


def test_parse_docstring_without_sections() -> None:
    assert parse_docstring("Just a summary.") == ("Just a summary.", {})
    assert parse_docstring(None) == ("", {})


def test_partial_uses_the_remaining_parameters() -> None:
    def add(a: int, b: int) -> int:
        return a + b

    partial_tool = tool(name="add_one")(functools.partial(add, b=1))
    assert partial_tool.parameters == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 1}},
        "required": ["a"],
        "additionalProperties": False,
    }


def test_nameless_callable_needs_a_name() -> None:
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ToolDefinitionError, match=r"pass @tool\(name=...\)"):
        tool(functools.partial(add, b=1))
