"""The Gemini SSE stream decoder, fed frames as the shared framer cuts them."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kova import (
    InvalidResponse,
    RateLimited,
    SignedThinking,
    StopReason,
    StreamError,
    TextDelta,
    Thinking,
    ThinkingDelta,
    Usage,
)
from kova.providers import SseFramer, StopEvent, ToolUseDelta, ToolUseEnd, ToolUseStart, UsageEvent
from kova.providers.gemini._convert import THOUGHT_SIGNATURE_KEY
from kova.providers.gemini._stream import GeminiStreamDecoder

USAGE_1 = {"promptTokenCount": 57, "totalTokenCount": 57}
USAGE_2 = {
    "promptTokenCount": 57,
    "candidatesTokenCount": 15,
    "thoughtsTokenCount": 120,
    "totalTokenCount": 192,
}
CHUNK_1 = {
    "candidates": [
        {
            "content": {
                "parts": [{"text": "**Planning** the lookup", "thought": True}],
                "role": "model",
            },
            "index": 0,
        }
    ],
    "usageMetadata": USAGE_1,
    "modelVersion": "gemini-2.5-flash",
    "responseId": "mT1k",
}
CHUNK_TEXT = {"candidates": [{"content": {"parts": [{"text": "Sure, "}], "role": "model"}}]}
CHUNK_2 = {
    "candidates": [
        {
            "content": {
                "parts": [
                    {
                        "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                        "thoughtSignature": "CiIBVKhc7s",
                    }
                ],
                "role": "model",
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": USAGE_2,
    "modelVersion": "gemini-2.5-flash",
    "responseId": "mT1k",
}


def _sse(*chunks: object) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


def _decode(data: bytes, cuts: list[int] | None = None) -> tuple[list[object], object]:
    framer = SseFramer()
    decoder = GeminiStreamDecoder()
    events: list[object] = []
    points = sorted({0, *(cuts or []), len(data)})
    for start, end in itertools.pairwise(points):
        frames = framer.feed(data[start:end])
        if frames:
            events.extend(decoder.feed(frames))
        if decoder.error is not None:
            return events, decoder.error
    tail = framer.finish()
    if tail:
        events.extend(decoder.feed(tail))
    if decoder.error is None:
        events.extend(decoder.finish())
    return events, decoder.error


def test_the_wire_note_stream() -> None:
    events, error = _decode(_sse(CHUNK_1, CHUNK_TEXT, CHUNK_2))
    assert error is None
    start = events[2]
    assert isinstance(start, ToolUseStart)
    assert start.name == "get_weather"
    assert start.provider_metadata is not None
    assert start.provider_metadata[THOUGHT_SIGNATURE_KEY] == "CiIBVKhc7s"
    assert events == [
        ThinkingDelta(text="**Planning** the lookup"),
        TextDelta(text="Sure, "),
        start,
        ToolUseDelta(index=0, partial_json='{"city":"Paris"}'),
        ToolUseEnd(index=0),
        StopEvent(stop_reason=StopReason.TOOL_USE),
        UsageEvent(
            usage=Usage(input_tokens=57, output_tokens=135, total_tokens=192, reasoning_tokens=120)
        ),
    ]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=2000), max_size=12))
def test_chunk_boundaries_do_not_change_the_events(cuts: list[int]) -> None:
    data = _sse(
        CHUNK_1, CHUNK_TEXT, {"candidates": [{"content": {"parts": [{"text": "é€😀"}]}}]}, CHUNK_2
    )
    whole, _ = _decode(data)
    split, error = _decode(data, [c % (len(data) + 1) for c in cuts])
    assert error is None
    assert split == whole


def _text_chunk(text: str, **extra: object) -> dict[str, object]:
    return {"candidates": [{"content": {"parts": [{"text": text, **extra}], "role": "model"}}]}


SIGNED = {THOUGHT_SIGNATURE_KEY: "c2lnLXRleHQ="}


@pytest.mark.parametrize("cut", [False, True])
def test_a_signed_text_part_puts_its_signature_on_its_delta(cut: bool) -> None:
    # Gemini signs the last text part; while streaming, the signature often comes alone in a
    # last chunk with an empty text part.
    finish = {"candidates": [{"content": {"parts": []}, "finishReason": "STOP"}]}
    data = _sse(
        _text_chunk("It is "),
        _text_chunk("sunny.", thoughtSignature="c2lnLXRleHQ="),
        _text_chunk("", thoughtSignature="c2lnLWVtcHR5"),
        _text_chunk("x", thought=True, thoughtSignature="bm90LXRleHQ="),
        finish,
    )
    events, error = _decode(data, list(range(0, len(data), 7)) if cut else None)
    assert error is None
    assert events == [
        TextDelta(text="It is "),
        TextDelta(text="sunny.", provider_metadata=SIGNED),
        TextDelta(text="", provider_metadata={THOUGHT_SIGNATURE_KEY: "c2lnLWVtcHR5"}),
        ThinkingDelta(text="x"),
        # A signed thought is kept for history, with its signature (item 2 of issue 28).
        SignedThinking(
            block=Thinking(text="x", provider_metadata={THOUGHT_SIGNATURE_KEY: "bm90LXRleHQ="})
        ),
        StopEvent(stop_reason=StopReason.END_TURN),
    ]


def test_a_signed_thought_part_ends_its_thought_as_signed_thinking() -> None:
    # The thought streams in pieces; the signature comes on its last (here empty) piece. A
    # thought interrupted by text starts afresh: its pieces are not the signed thought's.
    finish = {"candidates": [{"content": {"parts": []}, "finishReason": "STOP"}]}
    data = _sse(
        _text_chunk("early", thought=True),
        _text_chunk("Text between."),
        _text_chunk("Weigh ", thought=True),
        _text_chunk("options.", thought=True),
        _text_chunk("", thought=True, thoughtSignature="c2lnLXRob3VnaHQ="),
        _text_chunk("Answer."),
        finish,
    )
    events, error = _decode(data)
    assert error is None
    signed = [event for event in events if isinstance(event, SignedThinking)]
    assert signed == [
        SignedThinking(
            block=Thinking(
                text="Weigh options.",
                provider_metadata={THOUGHT_SIGNATURE_KEY: "c2lnLXRob3VnaHQ="},
            )
        )
    ]
    thinking = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
    assert thinking == "earlyWeigh options."
    assert events.index(signed[0]) < events.index(TextDelta(text="Answer."))


def test_a_stream_cut_before_finish_reason_is_an_error() -> None:
    events, error = _decode(_sse(CHUNK_1, CHUNK_TEXT))
    assert isinstance(error, StreamError)
    assert events == [ThinkingDelta(text="**Planning** the lookup"), TextDelta(text="Sure, ")]


def test_an_error_object_in_the_stream_is_classified() -> None:
    error_chunk = {
        "error": {
            "code": 429,
            "message": "Resource exhausted",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"}],
        }
    }
    events, error = _decode(_sse(CHUNK_TEXT, error_chunk, CHUNK_2))
    assert events == [TextDelta(text="Sure, ")]
    assert isinstance(error, RateLimited)
    assert error.retry_after == 3.0
    assert error.mid_stream


def test_usage_after_the_stop_is_delivered_at_the_end() -> None:
    stop = {"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": "STOP"}]}
    events, error = _decode(_sse(stop, {"usageMetadata": USAGE_2}))
    assert error is None
    assert events[-2:] == [
        StopEvent(stop_reason=StopReason.END_TURN),
        UsageEvent(
            usage=Usage(input_tokens=57, output_tokens=135, total_tokens=192, reasoning_tokens=120)
        ),
    ]


def test_blocked_prompt_stops() -> None:
    events, error = _decode(_sse({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}))
    assert error is None
    assert events == [StopEvent(stop_reason=StopReason.unknown("blocked:PROHIBITED_CONTENT"))]


def test_max_tokens_and_safety() -> None:
    events, _ = _decode(_sse({"candidates": [{"finishReason": "MAX_TOKENS"}]}))
    assert events == [StopEvent(stop_reason=StopReason.MAX_TOKENS)]
    events, _ = _decode(_sse({"candidates": [{"finishReason": "SAFETY"}]}))
    assert events == [StopEvent(stop_reason=StopReason.unknown("SAFETY"))]


@pytest.mark.parametrize(
    "data",
    [
        "not json",
        "[1, 2]",
        '{"candidates": 3}',
        '{"candidates": [[]]}',
        '{"candidates": [{"content": [1]}]}',
        '{"candidates": [{"content": {"parts": {"a": 1}}}]}',
        '{"candidates": [{"content": {"parts": [7]}}]}',
        '{"candidates": [{"content": {"parts": [{"text": 7}]}}]}',
        '{"candidates": [{"content": {"parts": [{"text": ["a"]}]}}]}',
        '{"candidates": "ab"}',
        '{"candidates": [{"content": "ab"}]}',
        '{"candidates": [{"content": {"parts": "ab"}}]}',
        '{"candidates": [{"content": {"parts": ["ab"]}}]}',
        '{"candidates": {"0": {"content": {"parts": [{"text": "a"}]}}}}',
        '{"candidates": [{"content": {"parts": [{"functionCall": "f"}]}}]}',
        '{"candidates": [{"content": {"parts": [{"functionCall": {"name": 1}}]}}]}',
        '{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": 1}}]}}]}',
    ],
)
def test_malformed_frames_are_invalid_response(data: str) -> None:
    events, error = _decode(b"data: " + data.encode() + b"\n\n" + _sse(CHUNK_2))
    assert isinstance(error, InvalidResponse)
    assert events == []


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "candidates",
                        "content",
                        "parts",
                        "text",
                        "thought",
                        "functionCall",
                        "name",
                        "args",
                        "finishReason",
                        "usageMetadata",
                        "error",
                        "promptFeedback",
                        "id",
                        "thoughtSignature",
                    ]
                ),
                inner,
                max_size=4,
            )
        ),
        max_leaves=20,
    )
)
def test_any_json_is_events_of_the_right_types_or_invalid_response(value: object) -> None:
    """The codec contract: never a TypeError, never a TextDelta whose text is not a str."""
    decoder = GeminiStreamDecoder()
    from kova.providers import SseEvent

    events = decoder.feed([SseEvent(data=json.dumps(value))])
    events += decoder.finish() if decoder.error is None else []
    for event in events:
        if isinstance(event, TextDelta | ThinkingDelta):
            assert isinstance(event.text, str)
        if isinstance(event, TextDelta) and event.provider_metadata is not None:
            assert isinstance(event.provider_metadata[THOUGHT_SIGNATURE_KEY], str)
        if isinstance(event, ToolUseDelta):
            assert isinstance(json.loads(event.partial_json), dict)
    if decoder.error is not None:
        assert isinstance(decoder.error, InvalidResponse | StreamError) or hasattr(
            decoder.error, "error_class"
        )
