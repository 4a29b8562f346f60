"""kova/_json.py: bounded nesting and UTF-8-safe JSON, and the history JSON that uses them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    compact,
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


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)
space = st.sampled_from(["", " ", "\n", "\t ", "\r\n"])
encodings = st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32-be"])


def _outcome(parse: object, data: str | bytes) -> str:
    try:
        return repr(parse(data))  # type: ignore[operator]  # NaN is unequal to itself
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        return f"{type(exc).__name__}: {exc}"


@settings(deadline=None)  # wall-clock deadlines flake on a shared 2-core box
@given(json_values, space, space, st.booleans(), encodings)
def test_loads_reads_every_json_text_as_json_loads(
    value: object, before: str, after: str, tight: bool, encoding: str
) -> None:
    text = before + json.dumps(value, separators=(",", ":") if tight else None) + after
    assert _outcome(loads, text) == _outcome(json.loads, text)
    data = text.encode(encoding, "surrogatepass")
    assert _outcome(loads, data) == _outcome(json.loads, data)


@settings(deadline=None)
@given(st.text(alphabet='{}[]":,. 0123456789abenulltrufsNIfy\\\ufeff\x00', max_size=20))
def test_loads_gives_json_loads_value_or_error_for_any_text(text: str) -> None:
    assert _outcome(loads, text) == _outcome(json.loads, text)
    data = text.encode("utf-8", "surrogatepass")
    assert _outcome(loads, data) == _outcome(json.loads, data)
    assert _outcome(loads, b"\xff" + data) == _outcome(json.loads, b"\xff" + data)


def test_texts_the_scanner_cannot_take_alone_go_to_json_loads() -> None:
    assert loads(' {"a": 1} ') == loads(b'{"a": 1}\n') == {"a": 1}
    assert loads('{"a": 1}'.encode("utf-16")) == {"a": 1}
    for data, message in [
        ("", "Expecting value"),
        ("{} x", "Extra data"),
        (b"{} x", "Extra data"),
        ("\ufeff{}", "Unexpected UTF-8 BOM"),
    ]:
        with pytest.raises(json.JSONDecodeError, match=message):
            loads(data)
    with pytest.raises(UnicodeDecodeError):
        loads(b'{"a": "\xff"}')
    assert loads(b'["\xed\xa0\xbd"]') == json.loads(b'["\xed\xa0\xbd"]') == ["\ud83d"]


@settings(deadline=None)
@given(json_values)
def test_the_writers_write_what_json_dumps_writes(value: object) -> None:
    expected = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert compact(value) == dumps(value) == expected  # (st.text() makes no lone surrogates)
    assert dumps_bytes(value) == expected.encode()


def test_the_writers_refuse_what_json_dumps_refuses() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(JsonNestingError, match="contains itself"):
        dumps_bytes(loop)
    with pytest.raises(JsonNestingError, match="contains itself"):
        dumps(loop)
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps_bytes({"a": object()})
    with pytest.raises(TypeError, match="keys must be"):
        compact({(1,): 2})


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
