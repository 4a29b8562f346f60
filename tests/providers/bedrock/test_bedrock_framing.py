"""The AWS event-stream framer: the wire notes' vector, any split of the bytes, and corrupted
or truncated input always a kova error (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kova import InvalidResponse
from kova.providers.bedrock._framing import EventFrame, EventStreamFramer
from kova.testing._wire.bedrock import encode_message, error_message, event_message

# shared/wire/bedrock.md: messageStop {"stopReason":"end_turn"}, CRC-verified with botocore.
VECTOR = bytes.fromhex(
    "0000007a00000051ca2c46650b3a6576656e742d7479706507000b6d65737361676553746f700d3a636f6e"
    "74656e742d747970650700106170706c69636174696f6e2f6a736f6e0d3a6d6573736167652d7479706507"
    "00056576656e747b2273746f70526561736f6e223a22656e645f7475726e227d5fbf09fc"
)
VECTOR_FRAME = EventFrame(
    headers={
        ":event-type": "messageStop",
        ":content-type": "application/json",
        ":message-type": "event",
    },
    payload=b'{"stopReason":"end_turn"}',
)

STREAM = b"".join(
    [
        event_message("messageStart", {"p": "abcdefghijklmnopq", "role": "assistant"}),
        event_message("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hé"}}),
        event_message("contentBlockStop", {"contentBlockIndex": 0}),
        VECTOR,
        error_message("ThrottlingException", "slow down"),
    ]
)


def _frame_all(data: bytes, cuts: list[int]) -> list[EventFrame]:
    framer = EventStreamFramer()
    frames: list[EventFrame] = []
    start = 0
    for cut in sorted(set(cuts)):
        frames.extend(framer.feed(data[start:cut]))
        start = cut
    frames.extend(framer.feed(data[start:]))
    frames.extend(framer.finish())
    return frames


def test_wire_vector_decodes() -> None:
    assert EventStreamFramer().feed(VECTOR) == [VECTOR_FRAME]


def test_encoder_reproduces_the_wire_vector() -> None:
    assert encode_message(dict(VECTOR_FRAME.headers), VECTOR_FRAME.payload) == VECTOR  # type: ignore[arg-type]


def test_encoder_agrees_with_botocore_parser() -> None:
    from botocore.eventstream import EventStreamBuffer

    buffer = EventStreamBuffer()
    buffer.add_data(STREAM)
    parsed = [(message.headers, message.payload) for message in buffer]
    assert parsed == [tuple(frame) for frame in _frame_all(STREAM, [])]


def test_one_read_with_several_messages_gives_them_in_order() -> None:
    frames = EventStreamFramer().feed(STREAM)
    assert [frame.headers[":message-type"] for frame in frames] == ["event"] * 4 + ["error"]
    assert frames[-1].headers[":error-code"] == "ThrottlingException"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_split_of_the_bytes_gives_the_same_frames(cuts: list[int]) -> None:
    assert _frame_all(STREAM, cuts) == _frame_all(STREAM, [])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(min_value=0, max_value=len(STREAM) - 1),
    st.integers(min_value=1, max_value=255),
    st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=4),
)
def test_a_corrupted_byte_is_an_invalid_response(position: int, flip: int, cuts: list[int]) -> None:
    data = bytearray(STREAM)
    data[position] ^= flip
    with pytest.raises(InvalidResponse):
        _frame_all(bytes(data), cuts)


def _boundaries() -> set[int]:
    ends, offset = {0}, 0
    for frame in _frame_all(STREAM, []):
        offset += len(encode_message(dict(frame.headers), frame.payload))  # type: ignore[arg-type]
        ends.add(offset)
    return ends


BOUNDARIES = _boundaries()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=1, max_value=len(STREAM) - 1))
def test_truncation_inside_a_message_is_an_invalid_response(length: int) -> None:
    framer = EventStreamFramer()
    framer.feed(STREAM[:length])
    if length in BOUNDARIES:
        assert framer.finish() == []
    else:
        with pytest.raises(InvalidResponse, match="ended inside a message"):
            framer.finish()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_random_bytes_never_crash(data: bytes) -> None:
    framer = EventStreamFramer()
    try:
        framer.feed(data)
        framer.finish()
    except InvalidResponse:
        pass


def test_impossible_lengths_with_a_valid_prelude_crc_are_refused() -> None:
    import struct
    from zlib import crc32

    prelude = struct.pack(">II", 10, 50)  # 10 bytes cannot hold 50 of headers
    data = prelude + struct.pack(">I", crc32(prelude)) + b"\0" * 60
    with pytest.raises(InvalidResponse, match="cannot hold"):
        EventStreamFramer().feed(data)


def test_unknown_header_type_is_an_invalid_response() -> None:
    import struct
    from zlib import crc32

    headers = b"\x01a\x0f"  # name "a", type 15 (there are ten types)
    total = 16 + len(headers)
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", crc32(prelude))
    message = prelude + headers
    message += struct.pack(">I", crc32(message))
    with pytest.raises(InvalidResponse, match="unreadable headers"):
        EventStreamFramer().feed(message)
