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
    schema = {"type": "OBJECT", "properties": {"a": {"type": "STRING", keyword: {}}}, keyword: 1}
    cleaned = sanitize_schema(schema)
    assert keyword not in _keys(cleaned)
    assert cleaned["properties"] == {"a": {"type": "STRING"}}


def test_const_becomes_a_one_value_enum() -> None:
    assert sanitize_schema({"const": "x"}) == {"enum": ["x"], "type": "STRING"}


def test_one_of_becomes_any_of() -> None:
    cleaned = sanitize_schema({"oneOf": [{"type": "STRING"}, {"type": "INTEGER"}]})
    assert cleaned == {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]}


def test_all_of_is_merged() -> None:
    cleaned = sanitize_schema(
        {"allOf": [{"type": "OBJECT", "properties": {"a": {"type": "STRING"}}}], "title": "T"}
    )
    assert cleaned == {"type": "OBJECT", "properties": {"a": {"type": "STRING"}}, "title": "T"}


def test_type_array_with_null_becomes_nullable() -> None:
    assert sanitize_schema({"type": ["string", "null"]}) == {"type": "STRING", "nullable": True}
    assert sanitize_schema({"type": ["string", "integer"]}) == {
        "anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]
    }


def test_any_of_with_null_branch_becomes_nullable() -> None:
    assert sanitize_schema({"anyOf": [{"type": "INTEGER"}, {"type": "null"}]}) == {
        "type": "INTEGER",
        "nullable": True,
    }


def test_refs_are_inlined_and_recursion_is_cut() -> None:
    schema = {
        "type": "OBJECT",
        "properties": {
            "city": {"$ref": "#/$defs/City", "description": "where"},
            "node": {"$ref": "#/definitions/Node"},
        },
        "$defs": {"City": {"type": "STRING", "minLength": 1}},
        "definitions": {
            "Node": {"type": "OBJECT", "properties": {"next": {"$ref": "#/definitions/Node"}}}
        },
    }
    cleaned = sanitize_schema(schema)
    assert cleaned["properties"] == {
        "city": {"type": "STRING", "minLength": 1, "description": "where"},
        "node": {"type": "OBJECT", "properties": {"next": {"type": "OBJECT"}}},
    }
    assert "$defs" not in cleaned
    assert "definitions" not in cleaned


def test_exclusive_bounds_become_inclusive() -> None:
    assert sanitize_schema({"type": "NUMBER", "exclusiveMinimum": 0, "exclusiveMaximum": 9}) == {
        "type": "NUMBER",
        "minimum": 0,
        "maximum": 9,
    }


def test_examples_becomes_example() -> None:
    assert sanitize_schema({"type": "STRING", "examples": ["a", "b"]}) == {
        "type": "STRING",
        "example": "a",
    }


def test_non_string_enums_become_strings() -> None:
    assert sanitize_schema({"type": "INTEGER", "enum": [1, 2, True, None]}) == {
        "type": "STRING",
        "enum": ["1", "2", "true", "null"],
    }


def test_accepted_keywords_are_kept() -> None:
    schema = {
        "type": "OBJECT",
        "title": "Answer",
        "description": "d",
        "properties": {
            "n": {"type": "INTEGER", "minimum": 1, "maximum": 5, "format": "int32"},
            "s": {"type": "STRING", "pattern": "^a", "maxLength": 3, "nullable": True},
            "xs": {"type": "ARRAY", "items": {"type": "STRING"}, "minItems": 1, "maxItems": 2},
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


def test_an_object_keeps_its_declared_property_order() -> None:
    # google-genai adds propertyOrdering (the declared order) to every object with more than
    # one property; without it the model answers with the keys in alphabetical order.
    cleaned = sanitize_schema(
        {
            "type": "object",
            "properties": {
                "reasoning": {"type": "string"},
                "answer": {"type": "object", "properties": {"b": {}, "a": {}}},
                "one": {"type": "object", "properties": {"only": {"type": "string"}}},
            },
        }
    )
    assert cleaned["propertyOrdering"] == ["reasoning", "answer", "one"]
    properties = cleaned["properties"]
    assert isinstance(properties, dict)
    assert properties["answer"]["propertyOrdering"] == ["b", "a"]
    assert "propertyOrdering" not in properties["one"]


def test_a_given_property_order_is_kept() -> None:
    schema = {"type": "OBJECT", "properties": {"a": {}, "b": {}}, "propertyOrdering": ["b", "a"]}
    assert sanitize_schema(schema)["propertyOrdering"] == ["b", "a"]


@pytest.mark.parametrize("value", [True, {"type": "string"}])
def test_open_additional_properties_are_dropped(value: object) -> None:
    # The Gemini Developer API takes only additionalProperties: false (google-genai refuses
    # anything else outside Vertex AI).
    cleaned = sanitize_schema({"type": "object", "additionalProperties": value})
    assert cleaned == {"type": "OBJECT"}


@pytest.mark.parametrize("keyword", ["default", "example", "description", "format"])
def test_null_keyword_values_are_dropped(keyword: str) -> None:
    # Pydantic writes "default": null for optional fields; google-genai never sends a null.
    assert sanitize_schema({"type": "string", keyword: None}) == {"type": "STRING"}
