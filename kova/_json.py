"""JSON at kova's boundaries: nesting is bounded, and what kova writes is always UTF-8.

Two things a server, a model or a caller can send break plain ``json`` calls:

* **Deep nesting.** ``json.loads`` of a 100,000-deep array raises ``RecursionError`` (not a
  ``ValueError``), and a value that parsed can still overflow the stack later, in
  ``json.dumps`` or a recursive walk. kova reads JSON through :func:`loads`, which reports
  that as :class:`JsonNestingError` (a ``ValueError``, so every ``except ValueError`` that
  handles bad JSON handles it too), and refuses values nested deeper than
  :data:`MAX_JSON_DEPTH` where they enter a long-lived value (tool arguments, schemas)
  with :func:`check_depth`. serde_json's default recursion limit is the same 128.
* **Lone surrogates.** JSON's ``\\ud83d`` escape decodes to a Python string holding half a
  surrogate pair (a model that streams an emoji split over two chunks sends exactly that),
  and such a string cannot be encoded as UTF-8. :func:`dumps` writes those code points as
  JSON escapes again, so the text goes back to the provider exactly as it came, and
  anything kova writes can be encoded as UTF-8. The common case (no surrogate) costs one
  ``str.encode`` attempt, no scan.

Both directions skip the ``json`` module's Python layers: :func:`loads` hands the text to the
C scanner ``json.loads`` ends in (anything the scanner cannot take alone -- white space
around the value, a byte-order mark, an encoding other than UTF-8, text that is not JSON --
goes to ``json.loads`` itself, which returns the same value or raises its own error), and
the writers call the C encoder ``JSONEncoder.encode`` builds on every call, made once,
without its table of the containers being written: a value that contains itself is then
refused as too deeply nested (``json`` says "circular reference"; both are ``ValueError``).
A short request body or a tool call's arguments cost about a quarter less either way.
"""

from __future__ import annotations

import json
import json.encoder
import json.scanner
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = [
    "MAX_JSON_DEPTH",
    "JsonNestingError",
    "check_depth",
    "compact",
    "depth_exceeds",
    "dumps",
    "dumps_bytes",
    "escape_surrogates",
    "loads",
    "utf8_safe",
]

MAX_JSON_DEPTH = 128
"""The deepest nesting (objects and arrays inside each other) kova accepts in tool
arguments, tool parameter schemas and response schemas."""

_SURROGATE = re.compile("[\ud800-\udfff]")

_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""The compact encoder, made once: ``json.dumps`` with arguments makes a new one every call."""

_c_encoder: Any = getattr(json.encoder, "c_make_encoder", None)  # untyped: the C speedup
_encode: Callable[[object, int], Sequence[str]] = (
    (lambda value, _level: (_COMPACT.encode(value),))  # no C speedups: another interpreter
    if _c_encoder is None
    else _c_encoder(
        None, _COMPACT.default, json.encoder.encode_basestring, None, ":", ",", False, False, True
    )
)
"""What ``_COMPACT.encode`` runs, made once: the C encoder with ``JSONEncoder``'s defaults
and no table of the containers being written (see the module docstring); its text comes in
pieces. Holds no state between calls, so shared by every thread."""

# The C scanner json.loads ends in, with the default decoder's settings (the stub types its
# context as a scanner; a JSONDecoder is what the json module passes).
_scan_once = json.scanner.make_scanner(cast("Any", json.JSONDecoder()))


class JsonNestingError(ValueError):
    """JSON nested too deeply to read (a ``ValueError``, as ``json.JSONDecodeError`` is)."""


def loads(data: str | bytes | bytearray) -> Any:  # Any: the json module's own return type
    """``json.loads(data)``, with nesting too deep for the stack as :class:`JsonNestingError`.

    Raises:
        ValueError: ``data`` is not JSON (``json.JSONDecodeError``), not UTF-8
            (``UnicodeDecodeError``), or nested too deeply (:class:`JsonNestingError`).
    """
    try:
        try:
            # Bytes are UTF-8 to json.loads unless a byte-order mark or a zero byte in the
            # first two says otherwise: then they are not UTF-8 or not one JSON value in it.
            text = data if isinstance(data, str) else data.decode("utf-8", "surrogatepass")
            value, end = _scan_once(text, 0)
            if end == len(text):
                return value
        except (StopIteration, ValueError):  # not one value alone, or not UTF-8
            pass
        return json.loads(data)
    except RecursionError:
        raise JsonNestingError("the JSON is nested too deeply to read") from None


def depth_exceeds(value: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``value`` nests objects and arrays more than ``limit`` deep.

    Iterative (a breadth-first walk by levels), so it never overflows the stack itself, and
    it expands each container once, so a value that contains itself ends too (``json.dumps``
    refuses that one).
    """
    if limit > 0 and type(value) is dict:
        for item in value.values():
            if type(item) not in _PLAIN:
                break
        else:
            return False  # an object of plain values (most tool arguments): one level
    level = [value]
    seen: set[int] = set()
    depth = 0
    while True:
        children: list[object] = []
        containers = 0
        for item in level:
            if isinstance(item, Mapping):
                values: Iterable[object] = item.values()
            elif isinstance(item, list | tuple):
                values = item
            else:
                continue
            containers += 1
            if id(item) not in seen:  # a value that contains itself is walked once
                seen.add(id(item))
                children.extend(values)
        if not containers:
            return False
        depth += 1
        if depth > limit:
            return True
        level = children


_PLAIN = frozenset({str, int, float, bool, type(None)})


def check_depth(value: object, what: str, *, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise ``ValueError`` naming ``what`` if ``value`` nests deeper than ``limit``."""
    if depth_exceeds(value, limit):
        raise JsonNestingError(f"{what} is nested more than {limit} levels deep")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escape_surrogates(text: str) -> str:
    """``text`` (JSON text) with every lone surrogate written as a JSON ``\\uXXXX`` escape.

    Only valid on JSON text: a surrogate can only stand inside a string literal there, where
    the escape reads back as the same code point.
    """
    return _SURROGATE.sub(_escape, text)


def dumps(value: object, *, indent: int | None = None) -> str:
    """``value`` as JSON text that can always be encoded as UTF-8 (non-ASCII text as is,
    lone surrogates as escapes); compact unless ``indent`` is given.

    Raises:
        TypeError: a value JSON cannot carry.
        ValueError: nesting too deep for the stack, or a value that contains itself
            (:class:`JsonNestingError`).
    """
    try:
        if indent is None:
            text = "".join(_encode(value, 0))
        else:
            text = json.dumps(value, ensure_ascii=False, indent=indent)
    except RecursionError:
        raise JsonNestingError(_TOO_DEEP) from None
    return utf8_safe(text)


def compact(value: object) -> str:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` (lone surrogates
    stay as they are: see :func:`dumps` for text to send).

    Raises:
        TypeError: a value JSON cannot carry.
        RecursionError: a value nested too deeply for the stack, or that contains itself.
    """
    return "".join(_encode(value, 0))


_TOO_DEEP = "the value is nested too deeply to write as JSON (or contains itself)"


def utf8_safe(text: str) -> str:
    """JSON ``text`` as is, or with its lone surrogates escaped when it cannot be encoded as
    UTF-8 (see :func:`escape_surrogates`); costs one ``str.encode`` when not ASCII."""
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            return escape_surrogates(text)
    return text


def dumps_bytes(value: object) -> bytes:
    """Compact UTF-8 JSON of ``value``, lone surrogates as escapes (see :func:`dumps`)."""
    try:
        text = "".join(_encode(value, 0))
    except RecursionError:
        raise JsonNestingError(_TOO_DEEP) from None
    try:
        return text.encode()
    except UnicodeEncodeError:
        return escape_surrogates(text).encode()
