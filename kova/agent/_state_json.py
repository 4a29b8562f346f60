"""Plain JSON for the values a saved turn holds (tool definitions, configs, usage, limits,
results), read back strictly: anything that is not what was written is a
:class:`~kova.errors.SerializationError` naming the field, never a half-read value."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._errors import SerializationError
from .._messages import Message, ToolResult, block_from_dict, block_to_dict
from .._requests import (
    InferenceConfig,
    ResponseFormat,
    annotations_from_json,
    annotations_to_json,
    field,
    optional_field,
    tool_from_json,
    tool_to_json,
)
from .._responses import StopKind, StopReason, Usage

if TYPE_CHECKING:
    from decimal import Decimal

    from .._messages import JSONValue
    from ._limits import UsageLimits

__all__ = [
    "annotations_from_json",
    "annotations_to_json",
    "config_from_json",
    "config_to_json",
    "count",
    "field",
    "limits_from_json",
    "limits_to_json",
    "load_document",
    "messages_from_json",
    "result_from_json",
    "result_to_json",
    "stop_from_json",
    "tool_from_json",
    "tool_to_json",
    "usage_from_json",
    "usage_to_json",
]


def count(data: Mapping[str, object], key: str) -> int:
    """``data[key]``, a counter: a non-negative integer (0 when absent)."""
    if key not in data:
        return 0
    value = field(data, key, int)
    if value < 0:
        raise SerializationError(f"stored field {key!r} must be 0 or more, got {value}")
    return value


def load_document(data: object, kind: str, version: int, what: str) -> Mapping[str, Any]:
    """The stored document ``data``, checked to be a ``kind`` of this ``version``.

    Raises:
        SerializationError: not such a document; a document of another version is refused
            with both versions named, never misread.
    """
    if not isinstance(data, Mapping):
        raise SerializationError(f"stored {what} must be a JSON object")
    if data.get("kova") != kind:
        raise SerializationError(
            f"this is not a stored kova {what} (its 'kova' is {data.get('kova')!r})"
        )
    found = data.get("version")
    if found != version:
        age = "an older" if isinstance(found, int) and found < version else "another"
        raise SerializationError(
            f"these {what} were saved in {age} format (version {found!r}); this kova reads "
            f"version {version} only: finish or discard them with the kova that saved them"
        )
    return data


_USAGE_COUNTS = tuple(name for name in Usage.__record_fields__ if name != "cost")
_AUDIO = ("input_audio_tokens", "output_audio_tokens")
"""Counts added with costs: a usage stored before them has none (0)."""


def usage_to_json(usage: Usage) -> dict[str, JSONValue]:
    data: dict[str, JSONValue] = {name: getattr(usage, name) for name in _USAGE_COUNTS}
    cost = usage.cost
    if cost is not None:
        data["cost"] = str(cost)  # exact: a float would round it
    return data


def usage_from_json(data: object) -> Usage:
    if not isinstance(data, Mapping):
        raise SerializationError("stored usage must be a JSON object")
    counts = {
        name: 0 if name in _AUDIO and name not in data else _count(data, name)
        for name in _USAGE_COUNTS
    }
    cost = optional_field(data, "cost", str)
    if cost is None:
        return Usage(**counts)  # type: ignore[arg-type]  # every field but cost is an int
    from decimal import Decimal, InvalidOperation

    try:
        value = Decimal(cost)
    except InvalidOperation:
        raise SerializationError(f"stored usage cost must be a decimal, got {cost!r:.60}") from None
    if not value.is_finite() or value < 0:
        raise SerializationError(f"stored usage cost must be at least 0, got {cost!r:.60}")
    return Usage(**counts, cost=value)


def _count(data: Mapping[str, object], key: str) -> int:
    value = field(data, key, int)
    if value < 0:
        raise SerializationError(f"stored field {key!r} must be 0 or more, got {value}")
    return value


def config_to_json(config: InferenceConfig) -> dict[str, JSONValue]:
    response_format = config.response_format
    return {
        "model": config.model,
        "max_tokens": config.max_tokens,
        "temperature": config.temperature,
        "top_p": config.top_p,
        "stop_sequences": None if config.stop_sequences is None else list(config.stop_sequences),
        "response_format": None
        if response_format is None
        else {
            "name": response_format.name,
            "schema": response_format.schema,
            "strict": response_format.strict,
            "description": response_format.description,
        },
    }


def _number(data: Mapping[str, object], key: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SerializationError(f"stored field {key!r} must be a number, got {value!r:.60}")
    return value


def config_from_json(data: object) -> InferenceConfig:
    if not isinstance(data, Mapping):
        raise SerializationError("a stored inference config must be a JSON object")
    stops = optional_field(data, "stop_sequences", list)
    if stops is not None and not all(isinstance(stop, str) for stop in stops):
        raise SerializationError("stored stop_sequences must be strings")
    raw_format = data.get("response_format")
    response_format = None
    if raw_format is not None:
        if not isinstance(raw_format, Mapping):
            raise SerializationError("a stored response_format must be a JSON object")
        response_format = ResponseFormat(
            name=field(raw_format, "name", str),
            schema=field(raw_format, "schema", dict),
            strict=field(raw_format, "strict", bool),
            description=optional_field(raw_format, "description", str),
        )
    try:
        return InferenceConfig(
            model=optional_field(data, "model", str),
            max_tokens=optional_field(data, "max_tokens", int),
            temperature=_number(data, "temperature"),
            top_p=_number(data, "top_p"),
            stop_sequences=stops,
            response_format=response_format,
        )
    except ValueError as exc:
        raise SerializationError(f"invalid stored inference config: {exc}") from exc


def limits_to_json(limits: UsageLimits) -> dict[str, JSONValue]:
    data: dict[str, JSONValue] = {
        name: getattr(limits, name) for name in limits.__record_fields__ if name != "cost"
    }
    if limits.cost is not None:
        data["cost"] = str(limits.cost)  # exact
    return data


def limits_from_json(data: object) -> UsageLimits:
    from ._limits import UsageLimits

    if not isinstance(data, Mapping):
        raise SerializationError("stored usage limits must be a JSON object")
    try:
        return UsageLimits(
            requests=optional_field(data, "requests", int),
            tool_calls=optional_field(data, "tool_calls", int),
            input_tokens=optional_field(data, "input_tokens", int),
            output_tokens=optional_field(data, "output_tokens", int),
            total_tokens=optional_field(data, "total_tokens", int),
            count_tokens_before_request=field(data, "count_tokens_before_request", bool),
            cost=_decimal_or_none(optional_field(data, "cost", str)),
        )
    except (TypeError, ValueError) as exc:
        raise SerializationError(f"invalid stored usage limits: {exc}") from exc


def _decimal_or_none(text: str | None) -> Decimal | None:
    from decimal import Decimal, InvalidOperation

    if text is None:
        return None
    try:
        return Decimal(text)
    except InvalidOperation:
        raise SerializationError(f"a stored cost must be a decimal, got {text!r:.60}") from None


def result_to_json(result: ToolResult) -> dict[str, JSONValue]:
    return block_to_dict(result)


def result_from_json(data: object) -> ToolResult:
    block = block_from_dict(data)
    if not isinstance(block, ToolResult):
        raise SerializationError(f"a stored tool result must be a tool_result, got {data!r:.60}")
    return block


def messages_from_json(data: object, key: str) -> list[Message]:
    if not isinstance(data, list):
        raise SerializationError(f"stored {key!r} must be a list of messages")
    messages = []
    for item in data:
        if not isinstance(item, Mapping):
            raise SerializationError(f"a stored message in {key!r} must be a JSON object")
        messages.append(Message.from_dict(item))
    return messages


def stop_from_json(data: object) -> StopReason:
    if not isinstance(data, Mapping):
        raise SerializationError("a stored stop reason must be a JSON object")
    kind = field(data, "kind", str)
    if kind not in StopKind.__members__.values():
        raise SerializationError(f"unknown stored stop reason {kind!r}")
    return StopReason(kind=StopKind(kind), raw=field(data, "raw", str))
