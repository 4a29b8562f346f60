"""kova/_json.py: bounded nesting and UTF-8-safe JSON, and the history JSON that uses them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from kova import (
    Message,
    SerializationError,
    Text,
    ToolResult,
    ToolUse,
    messages_from_json,
    messages_to_json,
)
from kova._json import (
    MAX_JSON_DEPTH,
    JsonNestingError,
    depth_exceeds,
    dumps,
    dumps_bytes,
    loads,
)

if TYPE_CHECKING:
    from pathlib import Path


def _nest(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def test_depth_counts_nested_containers() -> None:
    assert not depth_exceeds(1, 0)
    assert depth_exceeds({}, 0)
    assert not depth_exceeds({"a": [1, {"b": 2}]}, 3)
    assert depth_exceeds({"a": [1, {"b": {}}]}, 3)
    assert not depth_exceeds(_nest(MAX_JSON_DEPTH))
    assert depth_exceeds(_nest(MAX_JSON_DEPTH + 1))
    assert depth_exceeds(_nest(100_000))  # iterative: no RecursionError


def test_a_value_that_contains_itself_ends() -> None:
    loop: list[object] = []
    loop.append(loop)
    assert not depth_exceeds(loop, 5)


def test_loads_reports_deep_nesting_as_a_value_error() -> None:
    with pytest.raises(JsonNestingError, match="nested too deeply"):
        loads("[" * 100_000 + "]" * 100_000)
    assert loads('{"a": [1]}') == {"a": [1]}


def test_lone_surrogates_are_written_as_escapes_and_read_back() -> None:
    value = {"half": "\ud83d", "lone": "x\udc80y", "fine": "é😀"}
    text = dumps(value)
    text.encode("utf-8")
    assert "é😀" in text  # other text stays as it is
    assert "\\ud83d" in text
    assert json.loads(text) == value
    assert json.loads(dumps_bytes(value)) == value
    assert dumps_bytes({"a": "é"}) == '{"a":"é"}'.encode()


def test_dumps_reports_deep_nesting_as_a_value_error() -> None:
    with pytest.raises(JsonNestingError):
        dumps(_nest(100_000))


def test_messages_to_json_with_lone_surrogates_can_be_written_as_utf8(tmp_path: Path) -> None:
    history = [
        Message.user("lone \udc80"),
        Message.assistant(
            [Text(text="half \ud83d"), ToolUse(id="c", name="f", input={"\udc81": 1})]
        ),
        Message.tool_results([ToolResult(tool_use_id="c", content="\ude00 result")]),
    ]
    path = tmp_path / "history.json"
    path.write_text(messages_to_json(history), encoding="utf-8")
    path.write_text(messages_to_json(history, indent=2), encoding="utf-8")
    assert messages_from_json(path.read_text(encoding="utf-8")) == history


@pytest.mark.parametrize(
    "stored",
    [
        "[" * 100_000 + "]" * 100_000,
        '[{"role":"assistant","content":[{"type":"tool_use","id":"c","name":"f","input":'
        + '{"k":' * 300
        + "1"
        + "}" * 300
        + "}]}]",
        '[{"role":"tool","content":[{"type":"tool_result","tool_use_id":"c","content":"x",'
        '"structured":' + "[" * 900 + "]" * 900 + "}]}]",
    ],
    ids=["deep-array", "deep-tool-input", "deep-structured"],
)
def test_messages_from_json_on_deep_input_is_a_serialization_error(stored: str) -> None:
    with pytest.raises(SerializationError, match="nested"):
        messages_from_json(stored)
