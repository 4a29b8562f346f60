"""JSON Schema → the schema subset Gemini's ``responseSchema`` accepts.

Gemini's ``Schema`` (an OpenAPI 3.0 subset) rejects keywords it does not know with a 400
(``Unknown name "X" at 'generation_config.response_schema'``). :func:`sanitize_schema` keeps
what it accepts and rewrites what has an equivalent:

* ``const`` → a one-value ``enum``; ``oneOf`` → ``anyOf``; ``allOf`` of one schema → that
  schema (merged);
* ``type: ["string", "null"]`` → ``type: "string", nullable: true``; a ``{"type": "null"}``
  branch of ``anyOf`` → ``nullable: true``;
* ``$ref`` into ``$defs``/``definitions`` → the definition inlined (a recursive reference
  becomes a bare ``object``, which Gemini accepts);
* ``exclusiveMinimum``/``exclusiveMaximum`` (numbers) → ``minimum``/``maximum``;
  ``examples`` → ``example`` (the first);
* non-string ``enum`` values → strings (Gemini enums are strings);
* ``type`` names upper-case (``"STRING"``, ``"OBJECT"``: the proto enum, as google-genai sends);
* an object with more than one property gets ``propertyOrdering``, its declared order (as
  google-genai adds it; otherwise the model writes the keys in alphabetical order);
* ``additionalProperties`` is kept only when ``false`` (the Developer API refuses an open
  object; google-genai raises for one), and a keyword whose value is ``null`` is dropped;
* anything else (``$schema``, ``$id``, ``not``, ``if``/``then``/``else``,
  ``patternProperties``, ``discriminator``, ``dependentRequired``, ...) is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..._models import JSONObject, JSONValue

__all__ = ["ALLOWED_KEYWORDS", "sanitize_schema"]

ALLOWED_KEYWORDS = frozenset(
    {
        "type",
        "format",
        "description",
        "nullable",
        "enum",
        "properties",
        "required",
        "items",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "minProperties",
        "maxProperties",
        "anyOf",
        "propertyOrdering",
        "title",
        "default",
        "example",
        "additionalProperties",
    }
)
"""The ``Schema`` fields of the newest google-genai (``$ref``/``$defs`` are inlined here)."""

_MAX_DEPTH = 64


def _definitions(schema: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    found: dict[str, JSONValue] = {}
    for key in ("definitions", "$defs"):
        defs = schema.get(key)
        if isinstance(defs, Mapping):
            found.update({f"#/{key}/{name}": value for name, value in defs.items()})
    return found


def sanitize_schema(schema: JSONObject) -> dict[str, JSONValue]:
    """A copy of ``schema`` that Gemini's ``responseSchema`` accepts (see the module)."""
    return _clean(schema, _definitions(schema), (), 0)


def _clean(
    schema: Mapping[str, JSONValue],
    defs: Mapping[str, JSONValue],
    seen: tuple[str, ...],
    depth: int,
) -> dict[str, JSONValue]:
    if depth > _MAX_DEPTH:
        return {"type": "OBJECT"}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = defs.get(ref)
        if ref in seen or not isinstance(target, Mapping):
            out: dict[str, JSONValue] = {"type": "OBJECT"}
        else:
            out = _clean(target, defs, (*seen, ref), depth + 1)
        # Sibling keywords of a $ref (a description, say) refine the inlined schema.
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        if siblings:
            out.update(_clean(siblings, defs, seen, depth + 1))
        return out
    out = {}
    all_of = schema.get("allOf")
    if isinstance(all_of, Sequence) and not isinstance(all_of, str):
        for part in all_of:
            if isinstance(part, Mapping):
                out.update(_clean(part, defs, seen, depth + 1))
    for key, value in schema.items():
        if key in ("anyOf", "oneOf"):
            _any_of(out, value, defs, seen, depth)
        elif key == "const":
            out["enum"] = [_enum_value(value)]
        elif key == "enum" and isinstance(value, Sequence) and not isinstance(value, str):
            out["enum"] = [_enum_value(item) for item in value]
        elif key == "type":
            _type(out, value)
        elif key == "properties" and isinstance(value, Mapping):
            out["properties"] = {
                name: _clean(sub, defs, seen, depth + 1)
                for name, sub in value.items()
                if isinstance(sub, Mapping)
            }
        elif key == "items" and isinstance(value, Mapping):
            out["items"] = _clean(value, defs, seen, depth + 1)
        elif key == "additionalProperties":
            # Only ``false`` passes the Developer API (google-genai refuses the rest outside
            # Vertex AI): an open object is sent as a plain object.
            if value is False:
                out[key] = value
        elif key == "exclusiveMinimum" and _is_number(value) and "minimum" not in schema:
            out["minimum"] = value
        elif key == "exclusiveMaximum" and _is_number(value) and "maximum" not in schema:
            out["maximum"] = value
        elif key == "examples" and isinstance(value, Sequence) and not isinstance(value, str):
            if value and "example" not in schema:
                out["example"] = value[0]
        elif key in ALLOWED_KEYWORDS and key != "enum" and value is not None:
            out[key] = value
    if "enum" in out:
        # Gemini enums are strings: a numeric enum is sent as its string forms.
        out["type"] = "STRING"
    properties = out.get("properties")
    if (
        out.get("type") == "OBJECT"
        and isinstance(properties, Mapping)
        and len(properties) > 1
        and "propertyOrdering" not in out
    ):
        # As google-genai does: without it the model writes the keys in alphabetical order.
        out["propertyOrdering"] = list(properties)
    return out


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _enum_value(value: JSONValue) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def _type(out: dict[str, JSONValue], value: JSONValue) -> None:
    if isinstance(value, str):
        if value == "null":
            out["nullable"] = True
        else:
            out["type"] = value.upper()
        return
    if isinstance(value, Sequence):
        kinds = [kind for kind in value if isinstance(kind, str)]
        if "null" in kinds:
            out["nullable"] = True
        rest = [kind for kind in kinds if kind != "null"]
        if len(rest) == 1:
            out["type"] = rest[0].upper()
        elif rest:
            out["anyOf"] = [{"type": kind.upper()} for kind in rest]


def _any_of(
    out: dict[str, JSONValue],
    value: JSONValue,
    defs: Mapping[str, JSONValue],
    seen: tuple[str, ...],
    depth: int,
) -> None:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return
    branches: list[dict[str, JSONValue]] = []
    for branch in value:
        if not isinstance(branch, Mapping):
            continue
        if branch.get("type") == "null" and len(branch) == 1:
            out["nullable"] = True
            continue
        branches.append(_clean(branch, defs, seen, depth + 1))
    if len(branches) == 1:
        # anyOf [X, null] is X, nullable: the form Gemini documents.
        for key, item in branches[0].items():
            out.setdefault(key, item)
    elif branches:
        out["anyOf"] = list(branches)
