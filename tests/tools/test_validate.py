"""Argument validation against a JSON Schema (``kova/tools/_validate.py``)."""

import decimal
import types

import attrs
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kova import ToolError
from kova.tools import (
    ArgumentValidator,
    InvalidToolArguments,
    ToolDefinitionError,
    argument_problems,
    tool,
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


# The fast path: a predicate trusted only when it says "valid", so it must never say so where
# jsonschema finds a problem. Checked over random schemas of the keywords it models and random
# values (including the ones jsonschema treats specially: bools against numbers, integral
# floats, Decimals, tuples as arrays, huge ints).

_LEAF_SCHEMAS = st.one_of(
    st.just({}),
    st.just(True),
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(
                ["string", "integer", "number", "boolean", "null", "array", "object"]
            )
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.lists(
                st.sampled_from(["string", "integer", "number", "null"]),
                min_size=1,
                max_size=3,
                unique=True,
            )
        }
    ),
    st.fixed_dictionaries(
        {
            "enum": st.lists(
                st.one_of(st.text(max_size=3), st.integers(0, 2), st.booleans()),
                min_size=1,
                max_size=4,
            )
        }
    ),
    st.fixed_dictionaries({"const": st.text(max_size=3)}),
    st.fixed_dictionaries(
        {
            st.sampled_from(
                ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]
            ): st.one_of(st.integers(-3, 3), st.floats(-3, 3, allow_nan=False))
        }
    ).map(dict),
    st.dictionaries(
        st.sampled_from(["minLength", "maxLength", "minItems", "maxItems"]),
        st.integers(0, 3),
        min_size=1,
    ),
)


def _extend(children: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    names = st.sampled_from(["a", "b", "c"])
    return st.one_of(
        st.builds(
            lambda props, required, additional: {
                "type": "object",
                "properties": props,
                "required": sorted(set(required)),
                **({} if additional is None else {"additionalProperties": additional}),
            },
            st.dictionaries(names, children, max_size=3),
            st.lists(names, max_size=2),
            st.one_of(st.none(), st.booleans(), children),
        ),
        st.builds(lambda items: {"items": items}, children),
        st.builds(lambda branches: {"anyOf": branches}, st.lists(children, min_size=1, max_size=3)),
        st.builds(
            lambda a, b: {**a, **b} if isinstance(a, dict) and isinstance(b, dict) else a,
            children,
            children,
        ),
    )


_SCHEMAS = st.recursive(_LEAF_SCHEMAS, _extend, max_leaves=8)
_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-5, 5),
        st.just(2**80),
        st.floats(-5, 5, allow_nan=False),
        st.just(1.0),
        st.just(decimal.Decimal("-7")),
        st.text(max_size=4),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), children, max_size=4),
    ),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(schema=_SCHEMAS, value=_VALUES)
@example(schema={"minimum": 0}, value=decimal.Decimal("-7"))
@example(schema={"maximum": 1.5}, value=2**80)
@example(schema={"type": "integer"}, value=True)
@example(schema={"enum": [1, "1"]}, value=True)
@example(schema={"type": "object", "additionalProperties": False}, value={"a": 1})
@example(schema={"type": "object", "properties": {"a": {"type": "string"}}}, value={"a": 1})
@example(schema={"type": "object", "properties": {"a": {"type": "boolean"}}}, value={"a": 0})
@example(schema={"type": "object", "required": ["a"]}, value=["a"])
def test_fast_path_never_accepts_what_jsonschema_refuses(schema: object, value: object) -> None:
    from jsonschema import Draft202012Validator

    from kova.tools._validate import _lenient, fast_check

    fast = fast_check(schema)
    if fast is not None and fast(value):
        assert not list(_lenient(Draft202012Validator)(schema).iter_errors(value)), (schema, value)


def test_fast_path_covers_the_schemas_tool_writes() -> None:
    from typing import Literal

    from kova.tools._tool import definition
    from kova.tools._validate import fast_check

    def forecast(
        city: str,
        days: int = 3,
        unit: Literal["c", "f"] = "c",
        tags: list[str] | None = None,
        ratio: float = 1.0,
        exact: bool = False,
    ) -> str:
        """Weather."""
        return city

    schema = definition(tool(forecast)).parameters
    check = fast_check(schema)
    assert check is not None
    assert check(
        {"city": "Paris", "days": 2, "unit": "f", "tags": ["x"], "ratio": 2, "exact": True}
    )
    # Invalid arguments are never decided by the fast path: jsonschema words the problems.
    assert not check({"city": "Paris", "unit": "k"})
    validator = ArgumentValidator(schema)
    assert validator.problems({"city": "Paris", "days": 1.5}) == (
        "$.days: 1.5 is not of type 'integer'",
    )


def test_schemas_outside_the_fast_path_still_validate() -> None:
    from kova.tools._validate import fast_check

    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$"}}}
    assert fast_check(schema) is None
    assert ArgumentValidator(schema).problems({"code": "abc"}) == (
        "$.code: 'abc' does not match '^[A-Z]+$'",
    )
