"""kova.providers._json: ``parse_json`` is ``json.loads`` for text, value for value and error
for error."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kova.providers._json import parse_json

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)
space = st.sampled_from(["", " ", "\n", "\t ", "\r\n"])


@settings(deadline=None)  # wall-clock deadlines flake on a shared 2-core box
@given(json_values, space, space, st.booleans())
def test_parses_every_json_text_as_json_loads(
    value: object, before: str, after: str, compact: bool
) -> None:
    text = before + json.dumps(value, separators=(",", ":") if compact else None) + after
    assert parse_json(text) == json.loads(text) == value


@settings(deadline=None)  # wall-clock deadlines flake on a shared 2-core box
@given(st.text(alphabet='{}[]":,. 0123456789abenulltrufsNIfy\\\ufeff', max_size=20))
def test_any_text_gives_json_loads_value_or_error(text: str) -> None:
    try:
        expected = repr(json.loads(text))  # NaN is unequal to itself; its repr is not
    except json.JSONDecodeError as exc:
        expected = f"error: {exc}"
    try:
        got = repr(parse_json(text))
    except json.JSONDecodeError as exc:
        got = f"error: {exc}"
    assert got == expected


def test_texts_the_scanner_cannot_take_alone_go_to_json_loads() -> None:
    assert parse_json(' {"a": 1} ') == {"a": 1}
    assert parse_json("NaN") != parse_json("NaN")
    for text, message in [
        ("", "Expecting value"),
        ("{} x", "Extra data"),
        ("\ufeff{}", "Unexpected UTF-8 BOM"),
    ]:
        with pytest.raises(json.JSONDecodeError, match=message):
            parse_json(text)
