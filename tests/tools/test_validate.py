"""Argument validation against a JSON Schema (``kova/tools/_validate.py``)."""

import types

import attrs
import pytest

from kova import ToolError
from kova.tools import (
    ArgumentValidator,
    InvalidToolArguments,
    ToolDefinitionError,
    argument_problems,
    validate_arguments,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1},
        "unit": {"enum": ["c", "f"]},
        "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "points": {
            "anyOf": [
                {
                    "type": "array",
                    "items": {"type": "object", "properties": {"x": {"type": "integer"}}},
                },
                {"type": "null"},
            ]
        },
    },
    "required": ["city"],
    "additionalProperties": False,
}


@attrs.frozen(kw_only=True)
class Case:
    name: str
    arguments: object
    problems: tuple[str, ...]


CASES = [
    Case(name="valid", arguments={"city": "Oslo", "days": 2}, problems=()),
    Case(name="valid_null", arguments={"city": "Oslo", "limit": None}, problems=()),
    Case(name="missing", arguments={}, problems=("$: 'city' is a required property",)),
    Case(name="not_object", arguments=[1], problems=("$: [1] is not of type 'object'",)),
    Case(
        name="several",
        arguments={"city": 1, "days": 0, "unit": "k", "x": 1},
        problems=(
            "$: Additional properties are not allowed ('x' was unexpected)",
            "$.city: 1 is not of type 'string'",
            "$.days: 0 is less than the minimum of 1",
            "$.unit: 'k' is not one of ['c', 'f']",
        ),
    ),
    Case(
        name="optional_names_both_types",
        arguments={"city": "a", "limit": "ten"},
        problems=("$.limit: 'ten' is not of type 'integer' or 'null'",),
    ),
    Case(
        name="union_points_at_the_nested_value",
        arguments={"city": "a", "points": [{"x": "1"}]},
        problems=("$.points[0].x: '1' is not of type 'integer'",),
    ),
    Case(
        name="tuple_and_mapping_proxy_are_json",
        arguments=types.MappingProxyType({"city": "a", "points": ({"x": 1},)}),
        problems=(),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_argument_problems(case: Case) -> None:
    assert argument_problems(SCHEMA, case.arguments) == case.problems


def test_validate_arguments_raises_with_every_problem() -> None:
    with pytest.raises(InvalidToolArguments) as caught:
        validate_arguments(SCHEMA, {"city": 5, "days": "x"}, tool_name="weather")
    error = caught.value
    assert isinstance(error, ToolError)
    assert error.tool_name == "weather"
    assert error.problems == (
        "$.city: 5 is not of type 'string'",
        "$.days: 'x' is not of type 'integer'",
    )
    assert str(error) == (
        "invalid arguments for tool 'weather':\n"
        "- $.city: 5 is not of type 'string'\n"
        "- $.days: 'x' is not of type 'integer'"
    )


def test_validate_arguments_accepts_valid_arguments() -> None:
    validate_arguments(SCHEMA, {"city": "Oslo"})


def test_invalid_schema_is_a_definition_error() -> None:
    with pytest.raises(ToolDefinitionError, match="not a valid JSON Schema"):
        argument_problems({"type": "no-such-type"}, {})


def test_schema_draft_comes_from_dollar_schema() -> None:
    # Draft 7 ignores prefixItems; 2020-12 (the default) enforces it.
    schema = {"type": "array", "prefixItems": [{"type": "integer"}]}
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", **schema}
    assert argument_problems(draft7, ["x"]) == ()
    assert argument_problems(schema, ["x"]) == ("$[0]: 'x' is not of type 'integer'",)


def test_many_problems_are_capped_and_counted() -> None:
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    arguments = {f"k{index:02}": "x" for index in range(25)}
    problems = argument_problems(schema, arguments)
    assert len(problems) == 21
    assert problems[0] == "$.k00: 'x' is not of type 'integer'"
    assert problems[-1] == "... and 5 more problems"


def test_long_values_are_cut() -> None:
    problems = argument_problems({"type": "integer"}, "y" * 1000)
    assert len(problems[0]) == 300
    assert problems[0].endswith("...")


def test_validator_keeps_its_schema_and_compiles_once() -> None:
    validator = ArgumentValidator(SCHEMA)
    assert validator.schema is SCHEMA
    validator.compile()
    compiled = validator._validator
    assert validator.problems({"city": "x"}) == ()
    assert validator._validator is compiled
