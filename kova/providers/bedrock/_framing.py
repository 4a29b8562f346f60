"""The AWS event-stream framer (``application/vnd.amazon.eventstream``), on botocore's parser.

Each ConverseStream event is one binary message (``shared/wire/bedrock.md``, "AWS event-stream
binary framing"), integers big-endian::

    [total_length u32][headers_length u32][prelude_crc u32] [headers] [payload] [message_crc u32]

The prelude CRC covers the first 8 bytes, the message CRC everything before it. This framer
finds message boundaries and checks both CRCs itself, straight on the read buffer, and hands
each message's header block to botocore's :class:`~botocore.eventstream.EventStreamHeaderParser`
(the ten typed header encodings). It does not use botocore's ``EventStreamBuffer`` whole: that
one copies the rest of its buffer after every message and has no public view of a pending
prelude, which the length checks below need.

botocore is imported when the first framer is made, never by ``import kova``.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, NamedTuple
from zlib import crc32

from ..._errors import InvalidResponse

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "MAX_HEADERS_BYTES",
    "MAX_PAYLOAD_BYTES",
    "EventFrame",
    "EventStreamFramer",
    "HeaderValue",
]

PROVIDER = "bedrock"

HeaderValue = bool | int | str | bytes
"""An event-stream header value as botocore decodes it (UUIDs are ``bytes``, timestamps
``int`` milliseconds)."""

MAX_HEADERS_BYTES = 128 * 1024
"""The largest header block accepted (botocore's limit)."""
MAX_PAYLOAD_BYTES = 24 * 1024 * 1024
"""The largest payload accepted (botocore's limit)."""

_PRELUDE = 12
_HEADER_CACHE = 32
_OVERHEAD = 16  # prelude + message CRC
_unpack_prelude = struct.Struct(">III").unpack_from
_unpack_crc = struct.Struct(">I").unpack_from


class EventFrame(NamedTuple):
    """One event-stream message: its headers (``:message-type``, ``:event-type``, ...) and
    its raw payload (JSON for Bedrock's events and exceptions)."""

    headers: Mapping[str, HeaderValue]
    payload: bytes


def _corrupted(message: str) -> InvalidResponse:
    return InvalidResponse(f"corrupted event stream: {message}", provider=PROVIDER)


class EventStreamFramer:
    """AWS event-stream bytes in, :class:`EventFrame`\\ s out (one framer per stream).

    A bad prelude or message CRC, an impossible length, a header block botocore cannot parse
    (an unknown type, a cut value, a name that is not UTF-8) or a body that ends inside a
    message raises :class:`~kova.InvalidResponse`. After an error the framer is spent.
    """

    __slots__ = ("_buffer", "_faults", "_headers_seen", "_parse_headers")

    def __init__(self) -> None:
        from botocore.eventstream import EventStreamHeaderParser, ParserError

        self._buffer = b""
        self._parse_headers = EventStreamHeaderParser().parse
        # A stream repeats a handful of header blocks (one per event type), byte for byte:
        # each is parsed once. Bounded, so a hostile stream cannot grow it.
        self._headers_seen: dict[bytes, Mapping[str, HeaderValue]] = {}
        # An unknown header type is a KeyError in botocore's parser, a cut value a
        # struct.error, a name or string that is not UTF-8 a UnicodeDecodeError.
        self._faults = (ParserError, struct.error, KeyError, IndexError, ValueError)

    def feed(self, data: bytes) -> list[EventFrame]:
        """The messages ``data`` completed, in order (often one, sometimes none or several)."""
        buffer = self._buffer + data if self._buffer else data
        size = len(buffer)
        offset = 0
        frames: list[EventFrame] = []
        while size - offset >= _PRELUDE:
            total, headers_length, prelude_crc = _unpack_prelude(buffer, offset)
            if crc32(buffer[offset : offset + 8]) != prelude_crc:
                raise _corrupted(f"prelude CRC mismatch at byte {offset}")
            if headers_length > MAX_HEADERS_BYTES:
                raise _corrupted(f"{headers_length} bytes of headers (limit {MAX_HEADERS_BYTES})")
            if total < _OVERHEAD + headers_length:
                raise _corrupted(f"a {total}-byte message cannot hold {headers_length} of headers")
            if total - _OVERHEAD - headers_length > MAX_PAYLOAD_BYTES:
                raise _corrupted(f"a payload over the {MAX_PAYLOAD_BYTES}-byte limit")
            end = offset + total
            if end > size:
                break
            (message_crc,) = _unpack_crc(buffer, end - 4)
            if crc32(buffer[offset : end - 4]) != message_crc:
                raise _corrupted(f"message CRC mismatch in the message at byte {offset}")
            headers_end = offset + _PRELUDE + headers_length
            frames.append(
                EventFrame(
                    self._headers(buffer[offset + _PRELUDE : headers_end]),
                    buffer[headers_end : end - 4],
                )
            )
            offset = end
        self._buffer = buffer[offset:] if offset < size else b""
        return frames

    def _headers(self, block: bytes) -> Mapping[str, HeaderValue]:
        headers = self._headers_seen.get(block)
        if headers is not None:
            return headers
        try:
            headers = self._parse_headers(block) if block else {}
        except self._faults as exc:
            raise _corrupted(f"unreadable headers ({type(exc).__name__}: {exc})") from exc
        if len(self._headers_seen) < _HEADER_CACHE:
            self._headers_seen[block] = headers
        return headers

    def finish(self) -> list[EventFrame]:
        """The body ended: bytes of an unfinished message are an error (a truncated stream)."""
        if self._buffer:
            left = len(self._buffer)
            self._buffer = b""
            raise _corrupted(f"the body ended inside a message ({left} bytes left over)")
        return []
