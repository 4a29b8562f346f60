"""A value that satisfies a JSON schema, made up from the schema alone: the arguments
:class:`~kova.testing.TestProvider` calls each tool with and the structured answers it gives.

Deterministic (the same schema always gives the same value) and small: every required
property, each optional one too unless that is impossible, the fewest items an array may
have, the bounds' nearest value a number may take. What a schema cannot say in a way that
can be met without a search (``pattern``, ``not``, contradictory keywords) is met where a
simple value happens to meet it and otherwise left to the validator to report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["value_for_schema"]

_FORMATS = {
    "date-time": "2025-01-01T00:00:00Z",
    "date": "2025-01-01",
    "time": "00:00:00Z",
    "duration": "P1D",
    "email": "user@example.com",
    "idn-email": "user@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uri": "https://example.com/",
    "iri": "https://example.com/",
    "uri-reference": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
}
_MAX_DEPTH = 24


def value_for_schema(
    schema: Mapping[str, Any] | bool, *, root: Mapping[str, Any] | None = None
) -> Any:
    """A JSON value valid under ``schema`` (``root``: where ``$ref`` resolves; the schema
    itself by default).

    Raises:
        ValueError: a ``$ref`` that does not resolve in the document, or recursion with no
            way out (a required property that is always the object itself).
    """
    if isinstance(schema, bool):
        return None
    return _Maker(root if root is not None else schema).make(schema, 0)


class _Maker:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root

    def resolve(self, ref: str) -> Mapping[str, Any]:
        if not ref.startswith("#"):
            raise ValueError(f"only local $ref are followed, got {ref!r}")
        node: Any = self.root
        for part in ref.lstrip("#").strip("/").split("/") if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                raise ValueError(f"$ref {ref!r} does not resolve")
            node = node[part]
        if not isinstance(node, Mapping):
            raise ValueError(f"$ref {ref!r} is not a schema")
        return node

    def make(self, schema: Mapping[str, Any] | bool, depth: int) -> Any:
        if isinstance(schema, bool):
            return None
        if depth > _MAX_DEPTH:
            raise ValueError("the schema recurses with no way out")
        if "$ref" in schema:
            merged = {
                **self.resolve(schema["$ref"]),
                **{k: v for k, v in schema.items() if k != "$ref"},
            }
            return self.make(merged, depth + 1)
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return schema["enum"][0]
        if "default" in schema:
            return schema["default"]
        if "allOf" in schema:
            combined: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                part = self.resolve(part["$ref"]) if "$ref" in part else part
                combined = _merge(combined, part)
            return self.make(combined, depth + 1)
        for key in ("anyOf", "oneOf"):
            if schema.get(key):
                options = list(schema[key])
                # A non-null branch shows more of the schema than null does.
                options.sort(
                    key=lambda option: isinstance(option, Mapping) and option.get("type") == "null"
                )
                return self.make(options[0], depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"] or ["null"]
            kind = kinds[0]
        if kind is None:
            kind = _implied_type(schema)
        match kind:
            case "object":
                return self._object(schema, depth)
            case "array":
                return self._array(schema, depth)
            case "string":
                return _string(schema)
            case "integer":
                return int(_number(schema, integer=True))
            case "number":
                return _number(schema, integer=False)
            case "boolean":
                return False
            case "null":
                return None
        return None

    def _object(self, schema: Mapping[str, Any], depth: int) -> dict[str, Any]:
        properties: Mapping[str, Any] = schema.get("properties", {})
        required = list(schema.get("required", []))
        result: dict[str, Any] = {}
        for name in required:
            result[name] = self.make(properties.get(name, {}), depth + 1)
        for name, sub in properties.items():
            if name in result:
                continue
            try:  # an optional property is shown when it can be made
                result[name] = self.make(sub, depth + 1)
            except ValueError:
                continue
        minimum = schema.get("minProperties", 0)
        extra = schema.get("additionalProperties", True)
        number = 0
        while len(result) < minimum and extra is not False:
            number += 1
            result[f"key{number}"] = self.make(
                extra if isinstance(extra, Mapping) else {}, depth + 1
            )
        return result

    def _array(self, schema: Mapping[str, Any], depth: int) -> list[Any]:
        prefix: Sequence[Any] = schema.get("prefixItems", [])
        items = schema.get("items", {})
        count = max(int(schema.get("minItems", 0)), len(prefix) if schema.get("minItems") else 0, 1)
        maximum = schema.get("maxItems")
        if maximum is not None:
            count = min(count, int(maximum))
        values = []
        for index in range(count):
            sub = prefix[index] if index < len(prefix) else items
            if sub is False:
                break
            values.append(self.make(sub if isinstance(sub, Mapping) else {}, depth + 1))
        if schema.get("uniqueItems") and len(values) > 1:
            values = values[:1]  # identical made-up items would break uniqueness
        return values


def _implied_type(schema: Mapping[str, Any]) -> str | None:
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    if any(key in schema for key in ("minLength", "maxLength", "pattern", "format")):
        return "string"
    if any(key in schema for key in ("minimum", "maximum", "multipleOf")):
        return "number"
    return None


def _merge(into: dict[str, Any], part: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(into)
    for key, value in part.items():
        if key == "properties" and isinstance(merged.get(key), Mapping):
            merged[key] = {**merged[key], **value}
        elif key == "required" and isinstance(merged.get(key), list):
            merged[key] = [*merged[key], *[v for v in value if v not in merged[key]]]
        else:
            merged.setdefault(key, value)
    return merged


def _string(schema: Mapping[str, Any]) -> str:
    text = _FORMATS.get(str(schema.get("format")), "a")
    minimum = int(schema.get("minLength", 0))
    if len(text) < minimum:
        text = text + "a" * (minimum - len(text))
    maximum = schema.get("maxLength")
    if maximum is not None and len(text) > int(maximum):
        text = "a" * int(maximum)
    return text


def _number(schema: Mapping[str, Any], *, integer: bool) -> float:
    """1 when the bounds allow it, else the first of a few candidates near the bounds that
    meets every numeric keyword."""
    low, high = schema.get("minimum"), schema.get("maximum")
    above, below = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    step = schema.get("multipleOf")

    def fits(value: float) -> bool:
        return (
            (low is None or value >= low)
            and (high is None or value <= high)
            and (above is None or value > above)
            and (below is None or value < below)
            and (not step or math.isclose(value / step, round(value / step)))
        )

    candidates: list[float] = [1]
    if low is not None:
        candidates.append(low)
    if above is not None:
        candidates.append(math.floor(above) + 1 if integer else above + 1)
    if high is not None:
        candidates.append(high)
    if below is not None:
        candidates.append(math.ceil(below) - 1 if integer else below - 1)
    bottom = max((b for b in (low, above) if b is not None), default=None)
    top = min((b for b in (high, below) if b is not None), default=None)
    if bottom is not None and top is not None:
        middle = (bottom + top) / 2
        candidates.append(math.floor(middle) if integer else middle)
    if step:
        candidates = [math.ceil(value / step) * step for value in candidates] + [
            math.floor(value / step) * step for value in candidates
        ]
    if integer:
        candidates = [math.ceil(value) for value in candidates]
    return next((value for value in candidates if fits(value)), candidates[0])
