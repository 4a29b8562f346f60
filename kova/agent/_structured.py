"""Deriving a :class:`~kova.ResponseFormat` from a pydantic model class."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._models import JSONValue, ResponseFormat

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["response_format_for"]


def _closed(schema: JSONValue) -> tuple[JSONValue, bool]:
    """The schema with ``additionalProperties: false`` on every object, and whether every
    object also lists all its properties as required (what OpenAI's strict mode demands)."""
    if isinstance(schema, Mapping):
        strict_ok = True
        result: dict[str, JSONValue] = {}
        for key, value in schema.items():
            converted, ok = _closed(value)
            result[key] = converted
            strict_ok = strict_ok and ok
        if result.get("type") == "object" or "properties" in result:
            result.setdefault("additionalProperties", False)
            properties = result.get("properties")
            required = result.get("required")
            if isinstance(properties, Mapping):
                names = set(properties)
                listed = set(required) if isinstance(required, list) else set()
                strict_ok = strict_ok and names <= listed
        return result, strict_ok
    if isinstance(schema, list):
        items = [_closed(item) for item in schema]
        return [item for item, _ in items], all(ok for _, ok in items)
    return schema, True


def response_format_for(model: type[BaseModel]) -> ResponseFormat:
    """A response format for ``model``: its JSON schema, closed to extra keys; ``strict``
    when every field is required (strict mode cannot express optional fields)."""
    raw: Any = model.model_json_schema()  # pydantic's schema: a plain JSON dict
    schema, strict_ok = _closed(raw)
    assert isinstance(schema, Mapping)
    return ResponseFormat(
        name=model.__name__,
        schema=schema,
        strict=strict_ok,
        description=(model.__doc__ or "").strip() or None,
    )
