"""JSON for the stream decoders' per-event path.

:func:`parse_json` is ``json.loads`` for text, without its three Python-level calls
(``loads`` -> ``JSONDecoder.decode`` -> ``raw_decode``) in front of the C scanner: a stream
decoder parses one small JSON object per event, and those calls were a quarter of the parse
(a Gemini chunk measured 5.0 us against 7.2 us with ``timeit``; the floor's own ``json.loads``
of the bytes costs 9.5 us).

It is exactly ``json.loads``: the scanner is asked for one value starting at the first
character; anything it cannot take alone (leading or trailing white space, a byte-order
mark, a text that is not JSON) goes to ``json.loads``, which returns the same value or raises
its own :class:`json.JSONDecodeError`. Nesting too deep for the stack, which ``json.loads``
reports as a ``RecursionError``, is a :class:`~kova._json.JsonNestingError` (a ``ValueError``)
here, so a decoder's ``except ValueError`` reports it as an invalid response.
"""

from __future__ import annotations

import json
import json.scanner
from typing import Any, cast

from .._json import JsonNestingError
from .._json import loads as _loads

__all__ = ["parse_json"]

# The C scanner ``json.loads`` itself uses, with the default decoder's settings (the stub types
# its context as a scanner; a JSONDecoder is what the json module passes).
_scan_once = json.scanner.make_scanner(cast("Any", json.JSONDecoder()))


def parse_json(text: str) -> Any:  # Any: the JSON module's own return type
    """``json.loads(text)`` for ``str`` input, faster when ``text`` is exactly one value.

    Raises:
        json.JSONDecodeError: ``text`` is not JSON (raised by ``json.loads`` itself).
        JsonNestingError: ``text`` nests too deeply to parse.
    """
    try:
        value, end = _scan_once(text, 0)
    except StopIteration:
        return _loads(text)
    except RecursionError:
        raise JsonNestingError("the JSON is nested too deeply to read") from None
    if end != len(text):
        return _loads(text)
    return value
