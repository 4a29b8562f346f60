"""Reading a JSON text cut anywhere (a streamed answer, a tool call's arguments as they
arrive): :func:`parse_partial_json`. Pure; kova's structured output and the agent's events
both use it."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._models import JSONValue

__all__ = ["parse_partial_json"]

_MISSING: Any = object()
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMBER_PREFIX = re.compile(r"-?[0-9]*\.?[0-9]*(?:[eE][+-]?[0-9]*)?")


def parse_partial_json(text: str) -> JSONValue | None:
    """The best-effort value of a JSON text cut anywhere: open strings, arrays and objects
    are closed where the text ends; a key without its value, a cut literal (``tru``) or a
    lone ``-`` is left out. ``None`` when nothing usable has arrived (or the text is not
    JSON at all). A leading markdown fence (```` ```json ````) is skipped."""
    stripped = text.lstrip()
    if stripped.startswith("```"):
        stripped = stripped.partition("\n")[2]
    parser = _Prefix(stripped)
    try:
        value = parser.value()
    except (ValueError, IndexError, RecursionError):  # not JSON, or absurdly deep
        return None
    return None if value is _MISSING else value


class _Prefix:
    """A recursive-descent JSON reader that stops quietly where its text ends."""

    __slots__ = ("i", "n", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.i = 0

    def _space(self) -> bool:
        """Skip whitespace; whether text remains."""
        text, n = self.text, self.n
        while self.i < n and text[self.i] in " \t\r\n":
            self.i += 1
        return self.i < n

    def value(self) -> Any:
        if not self._space():
            return _MISSING
        char = self.text[self.i]
        if char == "{":
            return self._object()
        if char == "[":
            return self._array()
        if char == '"':
            return self._string()[0]
        if char == "-" or char.isdigit():
            return self._number()
        rest = self.text[self.i : self.i + 5]
        for word, literal in (("true", True), ("false", False), ("null", None)):
            if rest.startswith(word):
                self.i += len(word)
                return literal
            if word.startswith(rest) and self.i + len(rest) == self.n:
                self.i = self.n  # a literal cut by the end of the text
                return _MISSING
        raise ValueError(f"unexpected {char!r} at {self.i}")

    def _string(self) -> tuple[str, bool]:
        """The string at ``i`` and whether it was closed."""
        text, start = self.text, self.i
        index = start + 1
        while index < self.n:
            char = text[index]
            if char == "\\":
                index += 2
                continue
            if char == '"':
                self.i = index + 1
                return json.loads(text[start : index + 1]), True
            index += 1
        self.i = self.n
        return json.loads(f'"{_without_open_escape(text[start + 1 :])}"'), False

    def _number(self) -> Any:
        cut = _NUMBER_PREFIX.match(self.text, self.i)
        assert cut is not None
        self.i = cut.end()
        token = cut.group()
        if self.i < self.n:  # the number ended before the text did
            return json.loads(token)
        # Cut by the end of the text (it may go on): the part that is a number.
        token = token.rstrip("eE+-.")
        return json.loads(token) if _NUMBER.fullmatch(token) else _MISSING

    def _array(self) -> list[Any]:
        self.i += 1
        items: list[Any] = []
        while self._space():
            char = self.text[self.i]
            if char == "]":
                self.i += 1
                return items
            if char == ",":
                self.i += 1
                continue
            item = self.value()
            if item is _MISSING:
                break
            items.append(item)
        return items

    def _object(self) -> dict[str, Any]:
        self.i += 1
        result: dict[str, Any] = {}
        while self._space():
            char = self.text[self.i]
            if char == "}":
                self.i += 1
                return result
            if char == ",":
                self.i += 1
                continue
            if char != '"':
                raise ValueError(f"expected a key at {self.i}")
            key, closed = self._string()
            if not closed or not self._space():
                break
            if self.text[self.i] != ":":
                raise ValueError(f"expected ':' at {self.i}")
            self.i += 1
            item = self.value()
            if item is _MISSING:
                break
            result[key] = item
        return result


def _without_open_escape(body: str) -> str:
    """``body`` (a string's text so far) without an escape the cut left unfinished."""
    index = 0
    while True:
        index = body.find("\\", index)
        if index < 0:
            return body
        step = 6 if body[index + 1 : index + 2] == "u" else 2
        if index + step > len(body):
            return body[:index]
        index += step
