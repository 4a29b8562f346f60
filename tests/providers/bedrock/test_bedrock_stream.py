"""ConverseStream decoding: the wire notes' event sequence, errors inside the stream through
the one classifier, and malformed events as InvalidResponse."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kova import (
    InvalidRequest,
    InvalidResponse,
    ProviderError,
    ProviderOverloaded,
    RateLimited,
    RedactedThinking,
    SignedThinking,
    StopReason,
    StreamError,
    TextDelta,
    Thinking,
    ThinkingDelta,
    Usage,
)
from kova.providers import StopEvent, ToolUseDelta, ToolUseEnd, ToolUseStart, UsageEvent
from kova.providers.bedrock._framing import EventFrame, EventStreamFramer
from kova.providers.bedrock._stream import BedrockStreamDecoder
from kova.testing._wire.bedrock import error_message, event_message, exception_message


def _event(event_type: str, data: dict[str, object]) -> EventFrame:
    return EventFrame(
        headers={":message-type": "event", ":event-type": event_type},
        payload=json.dumps(data).encode(),
    )


# The payloads of shared/wire/bedrock.md, "ConverseStream: events", padding included.
WIRE_EVENTS = [
    _event("messageStart", {"p": "abcdefghijklmnopq", "role": "assistant"}),
    _event(
        "contentBlockDelta",
        {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "The user"}}, "p": "abc"},
    ),
    _event(
        "contentBlockDelta",
        {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "Eu0CCkgI"}}},
    ),
    _event("contentBlockStop", {"contentBlockIndex": 0, "p": "abcdefg"}),
    _event("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "Checking."}}),
    _event("contentBlockStop", {"contentBlockIndex": 1, "p": "abc"}),
    _event(
        "contentBlockStart",
        {
            "contentBlockIndex": 2,
            "start": {"toolUse": {"toolUseId": "tooluse_lAG_zP8Q", "name": "get_weather"}},
        },
    ),
    _event(
        "contentBlockDelta",
        {"contentBlockIndex": 2, "delta": {"toolUse": {"input": '{"city":"Paris"}'}}},
    ),
    _event("contentBlockStop", {"contentBlockIndex": 2, "p": "abcdefghij"}),
    _event("messageStop", {"p": "abcdefghijklmn", "stopReason": "tool_use"}),
    _event(
        "metadata",
        {
            "metrics": {"latencyMs": 422},
            "p": "abc",
            "usage": {
                "inputTokens": 471,
                "outputTokens": 91,
                "totalTokens": 562,
                "cacheReadInputTokens": 100,
                "cacheWriteInputTokens": 20,
            },
        },
    ),
]

EXPECTED = [
    ThinkingDelta(text="The user"),
    SignedThinking(block=Thinking(text="The user", signature="Eu0CCkgI")),
    TextDelta(text="Checking."),
    ToolUseStart(index=2, id="tooluse_lAG_zP8Q", name="get_weather"),
    ToolUseDelta(index=2, partial_json='{"city":"Paris"}'),
    ToolUseEnd(index=2),
    StopEvent(stop_reason=StopReason.TOOL_USE),
    UsageEvent(
        usage=Usage(
            input_tokens=591, output_tokens=91, cache_read_tokens=100, cache_creation_tokens=20
        )
    ),
]


def test_wire_sequence_decodes() -> None:
    decoder = BedrockStreamDecoder()
    assert decoder.feed(WIRE_EVENTS) + decoder.finish() == EXPECTED
    assert decoder.error is None
    assert decoder.finished


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(min_value=0, max_value=len(WIRE_EVENTS)), max_size=6))
def test_any_batching_gives_the_same_events(cuts: list[int]) -> None:
    decoder = BedrockStreamDecoder()
    events = []
    start = 0
    for cut in [*sorted(set(cuts)), len(WIRE_EVENTS)]:
        events.extend(decoder.feed(WIRE_EVENTS[start:cut]))
        start = cut
    assert events == EXPECTED


def test_redacted_reasoning_is_signed_thinking() -> None:
    decoder = BedrockStreamDecoder()
    events = decoder.feed(
        [
            _event(
                "contentBlockDelta",
                {
                    "contentBlockIndex": 0,
                    "delta": {"reasoningContent": {"redactedContent": "AAE="}},
                },
            ),
            _event("contentBlockStop", {"contentBlockIndex": 0}),
        ]
    )
    assert events == [SignedThinking(block=RedactedThinking(data="AAE="))]


def test_unsigned_reasoning_is_display_only() -> None:
    decoder = BedrockStreamDecoder()
    events = decoder.feed(
        [
            _event(
                "contentBlockDelta",
                {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "hm"}}},
            ),
            _event("contentBlockStop", {"contentBlockIndex": 0}),
        ]
    )
    assert events == [ThinkingDelta(text="hm")]


@pytest.mark.parametrize(
    ("name", "error_class"),
    [
        ("throttlingException", RateLimited),
        ("validationException", InvalidRequest),
        ("modelStreamErrorException", ProviderOverloaded),
        ("internalServerException", ProviderOverloaded),
        ("serviceUnavailableException", ProviderOverloaded),
    ],
)
def test_exception_in_the_stream_is_classified(name: str, error_class: type[Exception]) -> None:
    framer = EventStreamFramer()
    data = event_message("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}})
    data += exception_message(name, "it broke") + event_message("messageStop", {"stopReason": "x"})
    decoder = BedrockStreamDecoder()
    events = decoder.feed(framer.feed(data))
    assert events == [TextDelta(text="Hi")]  # the events before the error still arrive
    assert isinstance(decoder.error, error_class)
    assert isinstance(decoder.error, ProviderError)
    assert decoder.error.mid_stream
    assert "it broke" in str(decoder.error)


def test_error_message_type_is_classified() -> None:
    decoder = BedrockStreamDecoder()
    decoder.feed(EventStreamFramer().feed(error_message("ThrottlingException", "slow down")))
    assert isinstance(decoder.error, RateLimited)
    assert "slow down" in str(decoder.error)


def test_stream_without_message_stop_is_a_stream_error() -> None:
    decoder = BedrockStreamDecoder()
    decoder.feed(WIRE_EVENTS[:5])
    decoder.finish()
    assert isinstance(decoder.error, StreamError)


@pytest.mark.parametrize(
    "frame",
    [
        EventFrame(headers={":message-type": "event", ":event-type": "messageStop"}, payload=b"{"),
        EventFrame(headers={":message-type": "event", ":event-type": "metadata"}, payload=b"[]"),
        EventFrame(headers={":message-type": "surprise"}, payload=b"{}"),
        _event("messageStop", {"stopReason": 3}),
        _event("contentBlockDelta", {"contentBlockIndex": "0", "delta": {"text": "a"}}),
        _event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": 5}}),
        _event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{"}}}),
        _event("contentBlockStart", {"contentBlockIndex": 0, "start": {"toolUse": {"name": "x"}}}),
        _event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": 1}}),
        _event("contentBlockStart", {"contentBlockIndex": 0, "start": {}}),
    ],
)
def test_malformed_events_are_invalid_responses(frame: EventFrame) -> None:
    decoder = BedrockStreamDecoder()
    assert decoder.feed([frame, WIRE_EVENTS[4]]) == []
    assert isinstance(decoder.error, InvalidResponse)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(
        st.sampled_from(["contentBlockIndex", "delta", "start", "stopReason", "usage"]),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=5),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(
                    st.sampled_from(["text", "toolUse", "input", "reasoningContent", "signature"]),
                    inner,
                    max_size=3,
                )
            ),
            max_leaves=8,
        ),
    ),
    st.sampled_from(
        ["contentBlockStart", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata"]
    ),
)
def test_arbitrary_payloads_never_crash(data: dict[str, object], event_type: str) -> None:
    decoder = BedrockStreamDecoder()
    decoder.feed([_event(event_type, data)])
    decoder.finish()
    assert decoder.error is None or isinstance(decoder.error, InvalidResponse | StreamError)


def _text_after_start(start: dict[str, object]) -> list[EventFrame]:
    return [
        _event("messageStart", {"role": "assistant"}),
        _event("contentBlockStart", {"contentBlockIndex": 0, "start": start}),
        _event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hello"}}),
        _event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"futureKind": {"x": 1}}}),
        _event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": " there"}}),
        _event("contentBlockStop", {"contentBlockIndex": 0}),
        _event("messageStop", {"stopReason": "end_turn"}),
    ]


@pytest.mark.parametrize(
    "start",
    [{"futureBlock": {"kind": "x"}}, {"image": {"format": "png"}}],
    ids=["newer-member", "image"],
)
def test_text_deltas_in_a_block_of_an_unknown_start_are_surfaced(start: dict[str, object]) -> None:
    decoder = BedrockStreamDecoder()
    events = decoder.feed(_text_after_start(start))
    decoder.finish()
    assert decoder.error is None
    assert events == [
        TextDelta(text="Hello"),
        TextDelta(text=" there"),
        StopEvent(stop_reason=StopReason.END_TURN),
    ]


def test_an_empty_start_is_an_invalid_response_not_a_short_answer() -> None:
    decoder = BedrockStreamDecoder()
    events = decoder.feed(_text_after_start({}))
    assert events == []
    assert isinstance(decoder.error, InvalidResponse)
    assert "empty start" in str(decoder.error)


@pytest.mark.parametrize(
    "start",
    [{"toolUse": {"toolUseId": "t1", "name": "f"}}, None],
    ids=["tool", "reasoning"],
)
def test_a_text_delta_inside_a_tool_or_reasoning_block_is_invalid(
    start: dict[str, object] | None,
) -> None:
    frames = [_event("messageStart", {"role": "assistant"})]
    if start is not None:
        frames.append(_event("contentBlockStart", {"contentBlockIndex": 0, "start": start}))
    else:
        reasoning = {"reasoningContent": {"text": "hmm"}}
        frames.append(_event("contentBlockDelta", {"contentBlockIndex": 0, "delta": reasoning}))
    frames.append(_event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x"}}))
    decoder = BedrockStreamDecoder()
    decoder.feed(frames)
    assert isinstance(decoder.error, InvalidResponse)
    assert "text delta inside" in str(decoder.error)
