# ruff: noqa: E501  (the wire reference payloads are kept verbatim, one event a line)
"""The Anthropic stream decoder against the wire reference's SSE example, fuzzed over chunk
boundaries."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kova import _models as m
from kova._errors import InvalidResponse, ProviderOverloaded, StreamError
from kova.providers._sse import SseDecoder
from kova.providers.anthropic._stream import AnthropicStreamDecoder

# The example from shared/wire/anthropic.md ("Streaming"), verbatim, plus a ping.
WIRE_EXAMPLE = """event: message_start
data: {"type":"message_start","message":{"id":"msg_01X","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":412,"cache_creation_input_tokens":0,"cache_read_input_tokens":1830,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"User wants weather."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCkgIAR…"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Checking."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01A9","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\\"city\\": \\"Par"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"is\\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":57}}

event: message_stop
data: {"type":"message_stop"}

"""

EXPECTED = [
    m.ThinkingDelta(text="User wants weather."),
    m.SignedThinking(block=m.Thinking(text="User wants weather.", signature="EqQBCkgIAR…")),
    m.TextDelta(text="Checking."),
    m.ToolUseStart(index=2, id="toolu_01A9", name="get_weather"),
    m.ToolUseDelta(index=2, partial_json='{"city": "Par'),
    m.ToolUseDelta(index=2, partial_json='is"}'),
    m.ToolUseEnd(index=2),
    m.StopEvent(stop_reason=m.StopReason.TOOL_USE),
    m.UsageEvent(
        usage=m.Usage(
            input_tokens=412 + 1830,
            output_tokens=57,
            cache_read_tokens=1830,
            cache_creation_tokens=0,
        )
    ),
]


def decode(text: str, pieces: list[str] | None = None) -> tuple[list[m.StreamEvent], int]:
    """Decode ``text`` split into ``pieces`` (one per network read); (events, batches)."""
    sse = SseDecoder()
    decoder = AnthropicStreamDecoder()
    events: list[m.StreamEvent] = []
    batches = 0
    for piece in pieces if pieces is not None else [text]:
        batch = decoder.feed(sse.feed(piece))
        if batch:
            batches += 1
        events.extend(batch)
    events.extend(decoder.feed(sse.finish()))
    decoder.check_complete()
    return events, batches


def sse(event: str, data: object) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def test_wire_example_decodes_to_kova_events() -> None:
    events, batches = decode(WIRE_EXAMPLE)
    assert events == EXPECTED
    assert batches == 1  # everything from one read arrives as one batch


def test_thinking_text_reaches_the_stream_once() -> None:
    events, _ = decode(WIRE_EXAMPLE)
    deltas = "".join(e.text for e in events if isinstance(e, m.ThinkingDelta))
    signed = [e for e in events if isinstance(e, m.SignedThinking)]
    assert deltas == "User wants weather."
    assert len(signed) == 1
    # SignedThinking is the history block, not more display text: no other event repeats it.
    assert sum(isinstance(e, m.ThinkingDelta) for e in events) == 1


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_any_chunking_decodes_the_same(data: st.DataObject) -> None:
    newline = data.draw(st.sampled_from(["\n", "\r\n", "\r"]), label="newline")
    text = WIRE_EXAMPLE.replace("\n", newline)
    cuts = data.draw(
        st.lists(st.integers(min_value=0, max_value=len(text)), max_size=40), label="cuts"
    )
    bounds = [0, *sorted(cuts), len(text)]
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    events, _ = decode("", pieces)
    assert events == EXPECTED


def test_redacted_thinking_arrives_whole_and_is_signed_at_block_stop() -> None:
    text = (
        sse("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3}}})
        + sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "redacted_thinking", "data": "EmwKAhgB"},
            },
        )
        + sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        + sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 9},
            },
        )
        + sse("message_stop", {"type": "message_stop"})
    )
    events, _ = decode(text)
    assert events == [
        m.SignedThinking(block=m.RedactedThinking(data="EmwKAhgB")),
        m.StopEvent(stop_reason=m.StopReason.END_TURN),
        m.UsageEvent(usage=m.Usage(input_tokens=3, output_tokens=9)),
    ]


def test_message_delta_usage_replaces_cumulative_counts_and_keeps_start_inputs() -> None:
    text = (
        sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "usage": {
                        "input_tokens": 20,
                        "cache_creation_input_tokens": 300,
                        "cache_read_input_tokens": 4000,
                        "output_tokens": 1,
                    }
                },
            },
        )
        + sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "max_tokens"},
                "usage": {
                    "output_tokens": 50,
                    "input_tokens": None,
                    "cache_read_input_tokens": 4000,
                    "output_tokens_details": {"thinking_tokens": 30},
                },
            },
        )
        + sse("message_stop", {"type": "message_stop"})
    )
    events, _ = decode(text)
    assert events == [
        m.StopEvent(stop_reason=m.StopReason.MAX_TOKENS),
        m.UsageEvent(
            usage=m.Usage(
                input_tokens=4320,
                output_tokens=50,
                cache_read_tokens=4000,
                cache_creation_tokens=300,
                reasoning_tokens=30,
            )
        ),
    ]


def test_error_event_mid_stream_ends_the_batch_and_fails_the_stream() -> None:
    head = WIRE_EXAMPLE.split("event: content_block_start", 2)
    text = (
        "event: content_block_start".join(head[:2])
        + 'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
        '"message": "Overloaded"}}\n\n' + "event: content_block_start" + head[2]
    )
    decoder = AnthropicStreamDecoder()
    batch = decoder.feed(SseDecoder().feed(text))
    assert batch  # the events before the error are returned
    assert m.TextDelta(text="Checking.") not in batch  # nothing after the error is decoded
    assert decoder.feed_event("message_stop", '{"type":"message_stop"}') == []
    # Classified exactly as HTTP 529 overloaded_error is.
    with pytest.raises(ProviderOverloaded) as caught:
        decoder.check_complete()
    assert caught.value.error_type == "overloaded_error"
    assert caught.value.message == "Overloaded"
    assert caught.value.mid_stream


def test_cut_stream_is_an_error_not_a_short_answer() -> None:
    decoder = AnthropicStreamDecoder()
    cut = WIRE_EXAMPLE.split("event: message_delta")[0]
    events = decoder.feed(SseDecoder().feed(cut))
    assert m.ToolUseEnd(index=2) in events
    assert not decoder.finished
    with pytest.raises(StreamError, match="message_stop"):
        decoder.check_complete()


def test_server_tool_blocks_and_citations_are_skipped() -> None:
    text = (
        sse("message_start", {"type": "message_start", "message": {"usage": {}}})
        + sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "web_search",
                    "input": {},
                },
            },
        )
        + sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": '{"q": 1}'},
            },
        )
        + sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        + sse(
            "content_block_start",
            {"type": "content_block_start", "index": 1, "content_block": {"type": "text"}},
        )
        + sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "citations_delta", "citation": {"type": "char_location"}},
            },
        )
        + sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "text_delta", "text": "A"},
            },
        )
        + sse("content_block_stop", {"type": "content_block_stop", "index": 1})
        + sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "pause_turn"}})
        + sse("message_stop", {"type": "message_stop"})
    )
    events, _ = decode(text)
    assert events == [
        m.TextDelta(text="A"),
        m.StopEvent(stop_reason=m.StopReason.unknown("pause_turn")),
        m.UsageEvent(usage=m.Usage()),
    ]


def test_invalid_json_is_an_invalid_response() -> None:
    decoder = AnthropicStreamDecoder()
    assert decoder.feed_event("content_block_delta", "{not json") == []
    assert isinstance(decoder.error, InvalidResponse)


def test_delta_for_unknown_block_is_an_invalid_response() -> None:
    decoder = AnthropicStreamDecoder()
    decoder.feed_event(
        "content_block_delta",
        '{"type":"content_block_delta","index":5,"delta":{"type":"text_delta","text":"x"}}',
    )
    assert isinstance(decoder.error, InvalidResponse)


# -- the text-delta fast path: it must decode exactly what the general path would -------------

_START = {
    "text": '{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}',
    "thinking": '{"type":"content_block_start","index":%d,"content_block":'
    '{"type":"thinking","thinking":"","signature":""}}',
}
_SIGN = (
    '{"type":"content_block_delta","index":%d,"delta":{"type":"signature_delta","signature":"s"}}'
)


def _decode_one(
    data: str, *, index: int = 0, event: str = "content_block_delta", block: str = "text"
) -> tuple[list[m.StreamEvent], object]:
    """Start a block, feed ``data``, and (for thinking) sign and stop the block."""
    decoder = AnthropicStreamDecoder()
    decoder.feed_event("content_block_start", _START[block] % index)
    events = decoder.feed_event(event, data)
    if block == "thinking" and decoder.error is None:
        decoder.feed_event("content_block_delta", _SIGN % index)
        stop = f'{{"type":"content_block_stop","index":{index}}}'
        events += decoder.feed_event("content_block_stop", stop)
    return events, decoder.error


def _general(data: str) -> str:
    """The same delta with a space after the first colon: never the fast form."""
    return data.replace('"type":', '"type": ', 1)


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(),
    ascii_only=st.booleans(),
    index=st.integers(0, 12),
    block=st.sampled_from(["text", "thinking"]),
)
def test_a_delta_in_the_api_form_decodes_like_the_general_path(
    text: str, ascii_only: bool, index: int, block: str
) -> None:
    delta: dict[str, object] = {"type": "content_block_delta", "index": index}
    delta["delta"] = {"type": f"{block}_delta", block: text}
    data = json.dumps(delta, separators=(",", ":"), ensure_ascii=ascii_only)
    fast, fast_error = _decode_one(data, index=index, block=block)
    slow, slow_error = _decode_one(_general(data), index=index, block=block)
    assert fast == slow
    assert fast_error is slow_error is None
    if block == "text":
        assert fast == ([m.TextDelta(text=text)] if text else [])
    else:
        signed = m.SignedThinking(block=m.Thinking(text=text, signature="s"))
        assert fast == ([m.ThinkingDelta(text=text)] if text else []) + [signed]


def test_a_delta_of_another_kind_than_its_block_is_skipped_as_before() -> None:
    thinking = (
        '{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"t"}}'
    )
    text = '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"t"}}'
    assert _decode_one(thinking, block="text") == ([], None)
    signed = m.SignedThinking(block=m.Thinking(text="", signature="s"))
    assert _decode_one(text, block="thinking") == ([signed], None)


@pytest.mark.parametrize(
    "data",
    [
        # not one JSON string followed by "}}": the general path judges (all invalid JSON)
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}}',
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\\"}}',
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\\q"}}',
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\x01"}}',
        # a JSON integer has no leading zero
        '{"type":"content_block_delta","index":00,"delta":{"type":"text_delta","text":"a"}}',
    ],
)
def test_malformed_text_deltas_in_the_api_form_are_invalid_responses(data: str) -> None:
    events, error = _decode_one(data)
    assert events == []
    assert isinstance(error, InvalidResponse)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # more keys after the text: a valid object, decoded by the general path
        (
            '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","x":"}}"}}',
            [m.TextDelta(text="a")],
        ),
        # a string that ends in "}}" inside the text
        (
            '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\\"}}"}}',
            [m.TextDelta(text='a"}}')],
        ),
        ('{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}', []),
    ],
)
def test_text_deltas_close_to_the_api_form_decode_by_their_json(
    data: str, expected: list[m.StreamEvent]
) -> None:
    events, error = _decode_one(data)
    assert events == expected
    assert error is None


def test_a_fast_form_delta_for_an_unknown_block_takes_the_general_path() -> None:
    data = '{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"a"}}'
    events, error = _decode_one(data, index=0)
    assert events == []
    assert isinstance(error, InvalidResponse)  # a delta for a block that never started
    # a "ping" event is skipped whatever its data says, as the general path does
    assert _decode_one(data.replace("3", "0"), event="ping") == ([], None)
