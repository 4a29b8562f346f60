"""The responseSchema sanitizer: one test per keyword Gemini rejects or spells differently."""

from __future__ import annotations

import pytest

from kova.providers.gemini._schema import ALLOWED_KEYWORDS, sanitize_schema

_VALUES = {"example", "default", "enum", "required", "propertyOrdering"}


def _keys(schema: object) -> set[str]:
    """Every keyword used anywhere in ``schema`` (property names and values excluded)."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            found.add(key)
            if key == "properties":
                for sub in value.values():
                    found |= _keys(sub)
            elif key not in _VALUES:
                found |= _keys(value)
    elif isinstance(schema, list):
        for item in schema:
            found |= _keys(item)
    return found


@pytest.mark.parametrize(
    "keyword",
    [
        "$schema",
        "$id",
        "$comment",
        "not",
        "if",
        "then",
        "else",
        "patternProperties",
        "discriminator",
        "dependentRequired",
        "unevaluatedProperties",
        "contentEncoding",
        "readOnly",
        "uniqueItems",
        "multipleOf",
    ],
)
def test_rejected_keywords_are_dropped(keyword: str) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", keyword: {}}}, keyword: 1}
    cleaned = sanitize_schema(schema)
    assert keyword not in _keys(cleaned)
    assert cleaned["properties"] == {"a": {"type": "string"}}


def test_const_becomes_a_one_value_enum() -> None:
    assert sanitize_schema({"const": "x"}) == {"enum": ["x"], "type": "string"}


def test_one_of_becomes_any_of() -> None:
    cleaned = sanitize_schema({"oneOf": [{"type": "string"}, {"type": "integer"}]})
    assert cleaned == {"anyOf": [{"type": "string"}, {"type": "integer"}]}


def test_all_of_is_merged() -> None:
    cleaned = sanitize_schema(
        {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}}], "title": "T"}
    )
    assert cleaned == {"type": "object", "properties": {"a": {"type": "string"}}, "title": "T"}


def test_type_array_with_null_becomes_nullable() -> None:
    assert sanitize_schema({"type": ["string", "null"]}) == {"type": "string", "nullable": True}
    assert sanitize_schema({"type": ["string", "integer"]}) == {
        "anyOf": [{"type": "string"}, {"type": "integer"}]
    }


def test_any_of_with_null_branch_becomes_nullable() -> None:
    assert sanitize_schema({"anyOf": [{"type": "integer"}, {"type": "null"}]}) == {
        "type": "integer",
        "nullable": True,
    }


def test_refs_are_inlined_and_recursion_is_cut() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"$ref": "#/$defs/City", "description": "where"},
            "node": {"$ref": "#/definitions/Node"},
        },
        "$defs": {"City": {"type": "string", "minLength": 1}},
        "definitions": {
            "Node": {"type": "object", "properties": {"next": {"$ref": "#/definitions/Node"}}}
        },
    }
    cleaned = sanitize_schema(schema)
    assert cleaned["properties"] == {
        "city": {"type": "string", "minLength": 1, "description": "where"},
        "node": {"type": "object", "properties": {"next": {"type": "object"}}},
    }
    assert "$defs" not in cleaned
    assert "definitions" not in cleaned


def test_exclusive_bounds_become_inclusive() -> None:
    assert sanitize_schema({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 9}) == {
        "type": "number",
        "minimum": 0,
        "maximum": 9,
    }


def test_examples_becomes_example() -> None:
    assert sanitize_schema({"type": "string", "examples": ["a", "b"]}) == {
        "type": "string",
        "example": "a",
    }


def test_non_string_enums_become_strings() -> None:
    assert sanitize_schema({"type": "integer", "enum": [1, 2, True, None]}) == {
        "type": "string",
        "enum": ["1", "2", "true", "null"],
    }


def test_accepted_keywords_are_kept() -> None:
    schema = {
        "type": "object",
        "title": "Answer",
        "description": "d",
        "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 5, "format": "int32"},
            "s": {"type": "string", "pattern": "^a", "maxLength": 3, "nullable": True},
            "xs": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
        },
        "required": ["n"],
        "propertyOrdering": ["n", "s", "xs"],
        "minProperties": 1,
        "maxProperties": 3,
        "additionalProperties": False,
        "default": {},
        "example": {"n": 1},
    }
    assert sanitize_schema(schema) == schema
    assert _keys(sanitize_schema(schema)) <= ALLOWED_KEYWORDS
