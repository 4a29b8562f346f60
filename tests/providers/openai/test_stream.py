"""The streaming decoder: recorded stream, parallel calls, reasoning, errors, cuts, chunking."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kova import (
    InvalidResponse,
    ProviderOverloaded,
    RateLimited,
    StopReason,
    StreamError,
    TextDelta,
    ThinkingDelta,
    Usage,
)
from kova.providers import (
    SseFramer,
    StopEvent,
    StreamEvent,
    ToolUseDelta,
    ToolUseEnd,
    ToolUseStart,
    UsageEvent,
)
from kova.providers.openai._stream import OpenAiStreamDecoder as _Decoder

from .wire_samples import TOOL_CALL_STREAM, chunk


class OpenAiStreamDecoder:
    """The codec's decoder fed text, as the HTTP provider feeds it frames: errors the decoder
    sets (its contract) are raised here, as the provider raises them."""

    def __init__(self, *, keep_reasoning: bool = False) -> None:
        self._framer = SseFramer()
        self._decoder = _Decoder(keep_reasoning=keep_reasoning)

    def feed(self, text: str) -> list[StreamEvent]:
        events = self._decoder.feed(self._framer.feed_text(text))
        if self._decoder.error is not None:
            raise self._decoder.error
        return events

    def finish(self) -> list[StreamEvent]:
        events = self._decoder.feed(self._framer.finish())
        if self._decoder.error is None:
            events.extend(self._decoder.finish())
        if self._decoder.error is not None:
            raise self._decoder.error
        return events


DONE = "data: [DONE]\n\n"


def decode(*pieces: str) -> list[StreamEvent]:
    decoder = OpenAiStreamDecoder()
    events: list[StreamEvent] = []
    for piece in pieces:
        events.extend(decoder.feed(piece))
    events.extend(decoder.finish())
    return events


def test_recorded_tool_call_stream() -> None:
    assert decode(TOOL_CALL_STREAM) == [
        ToolUseStart(index=0, id="call_4Xz", name="get_weather"),
        ToolUseDelta(index=0, partial_json='{"city":"'),
        ToolUseDelta(index=0, partial_json='Paris"}'),
        ToolUseEnd(index=0),
        StopEvent(stop_reason=StopReason.TOOL_USE),
        UsageEvent(usage=Usage(input_tokens=44, output_tokens=16, total_tokens=60)),
    ]


def test_events_arrive_in_one_batch_per_fed_chunk() -> None:
    decoder = OpenAiStreamDecoder()
    text = chunk({"content": "a"}) + chunk({"content": "b"}) + chunk({"content": "c"})
    assert decoder.feed(text[:10]) == []
    assert decoder.feed(text[10:]) == [
        TextDelta(text="a"),
        TextDelta(text="b"),
        TextDelta(text="c"),
    ]


def test_text_stream_with_role_chunk_usage_and_cached_tokens() -> None:
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "total_tokens": 12,
        "prompt_tokens_details": {"cached_tokens": 8},
        "completion_tokens_details": {"reasoning_tokens": 1},
    }
    events = decode(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hel"}, obfuscation="xyz"),
        chunk({"content": "lo"}),
        chunk({}, "stop"),
        'data: {"id":"x","choices":[],"usage":' + json.dumps(usage) + "}\n\n",
        DONE,
    )
    assert events == [
        TextDelta(text="Hel"),
        TextDelta(text="lo"),
        StopEvent(stop_reason=StopReason.END_TURN),
        UsageEvent(
            usage=Usage(
                input_tokens=10,
                output_tokens=2,
                total_tokens=12,
                cache_read_tokens=8,
                reasoning_tokens=1,
            )
        ),
    ]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_deltas_become_thinking(field: str) -> None:
    events = decode(chunk({field: "think"}), chunk({"content": "ok"}), chunk({}, "stop"), DONE)
    assert events[:2] == [ThinkingDelta(text="think"), TextDelta(text="ok")]


def test_parallel_interleaved_tool_calls() -> None:
    def call(index: int, **fields: object) -> dict[str, object]:
        return {"tool_calls": [{"index": index, **fields}]}

    events = decode(
        chunk(call(0, id="a", type="function", function={"name": "f", "arguments": ""})),
        chunk(call(1, id="b", type="function", function={"name": "g", "arguments": "{"})),
        chunk(call(0, function={"arguments": '{"x":1}'})),
        chunk(call(1, function={"arguments": "}"})),
        chunk({}, "tool_calls"),
        DONE,
    )
    assert events == [
        ToolUseStart(index=0, id="a", name="f"),
        ToolUseStart(index=1, id="b", name="g"),
        ToolUseDelta(index=1, partial_json="{"),
        ToolUseDelta(index=0, partial_json='{"x":1}'),
        ToolUseDelta(index=1, partial_json="}"),
        ToolUseEnd(index=0),
        ToolUseEnd(index=1),
        StopEvent(stop_reason=StopReason.TOOL_USE),
    ]


def test_fragments_without_index_fall_back_to_id_then_last_call() -> None:
    events = decode(
        chunk({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{"}}]}),
        chunk({"tool_calls": [{"id": "a", "function": {"arguments": "}"}}]}),
        chunk({"tool_calls": [{"id": "b", "function": {"name": "g"}}]}),
        chunk({"tool_calls": [{"function": {"arguments": "{}"}}]}),
        chunk({}, "stop"),  # a compatible server saying "stop" after tool calls
        DONE,
    )
    assert events == [
        ToolUseStart(index=0, id="a", name="f"),
        ToolUseDelta(index=0, partial_json="{"),
        ToolUseDelta(index=0, partial_json="}"),
        ToolUseStart(index=1, id="b", name="g"),
        ToolUseDelta(index=1, partial_json="{}"),
        ToolUseEnd(index=0),
        ToolUseEnd(index=1),
        StopEvent(stop_reason=StopReason.TOOL_USE),
    ]


def test_unknown_finish_reason_keeps_its_raw_value() -> None:
    assert decode(chunk({"content": "x"}), chunk({}, "content_filter"), DONE)[-1] == StopEvent(
        stop_reason=StopReason.unknown("content_filter")
    )


def test_done_without_finish_reason_still_stops_and_ends_calls() -> None:
    events = decode(
        chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f"}}]}), DONE
    )
    assert events[-2:] == [ToolUseEnd(index=0), StopEvent(stop_reason=StopReason.TOOL_USE)]


def test_finish_without_done_is_complete() -> None:
    assert decode(chunk({"content": "x"}), chunk({}, "stop")) == [
        TextDelta(text="x"),
        StopEvent(stop_reason=StopReason.END_TURN),
    ]


def test_a_stream_cut_before_finish_raises() -> None:
    decoder = OpenAiStreamDecoder()
    assert decoder.feed(chunk({"content": "partial"})) == [TextDelta(text="partial")]
    with pytest.raises(StreamError, match="incomplete") as info:
        decoder.finish()
    assert info.value.error_type == "incomplete_stream"


def test_an_error_chunk_is_classified_like_its_status() -> None:
    decoder = OpenAiStreamDecoder()
    decoder.feed(chunk({"content": "x"}))
    with pytest.raises(ProviderOverloaded, match="The server had an error") as info:
        decoder.feed(
            'data: {"error":{"message":"The server had an error","type":"server_error"}}\n\n'
        )
    assert info.value.error_type == "server_error"
    assert info.value.mid_stream


def test_an_error_chunk_s_known_code_wins_over_its_type() -> None:
    decoder = OpenAiStreamDecoder()
    error = {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}
    with pytest.raises(RateLimited, match="slow down") as info:
        decoder.feed(f"data: {json.dumps({'error': error})}\n\n")
    assert info.value.error_type == "rate_limit_exceeded"
    assert info.value.mid_stream


def test_text_before_an_error_chunk_in_one_read_is_delivered_first() -> None:
    decoder = _Decoder()
    error = 'data: {"error":{"message":"slow down","code":"rate_limit_exceeded"}}\n\n'
    frames = SseFramer().feed_text(chunk({"content": "x"}) + error)
    assert decoder.feed(frames) == [TextDelta(text="x")]
    assert decoder.error is not None
    assert decoder.error.is_retryable  # a rate limit; the provider marks after_content


def test_a_chunk_that_is_not_json_is_an_invalid_response() -> None:
    with pytest.raises(InvalidResponse, match="not JSON"):
        OpenAiStreamDecoder().feed("data: {oops\n\n")


def test_data_after_done_is_ignored() -> None:
    assert decode(chunk({}, "stop"), DONE, chunk({"content": "late"})) == [
        StopEvent(stop_reason=StopReason.END_TURN)
    ]


TEXT_STREAM = (
    chunk({"role": "assistant", "content": ""})
    + chunk({"reasoning_content": "Hmm… ünïcode \u2028 line"})
    + chunk({"content": "Bonjour 🌍"})
    + chunk({"content": ", ça va?"})
    + chunk({}, "stop")
    + 'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}\n\n'
    + DONE
)


@settings(deadline=None)  # wall-clock deadlines flake on a shared 2-core box
@given(
    st.sampled_from([TOOL_CALL_STREAM, TEXT_STREAM, TEXT_STREAM.replace("\n", "\r\n")]),
    st.lists(st.integers(min_value=0, max_value=2000), max_size=15),
)
def test_arbitrary_chunk_boundaries_give_the_same_events(stream: str, cuts: list[int]) -> None:
    data = stream.encode()
    points = sorted({cut for cut in cuts if cut <= len(data)})
    # Split the *bytes* anywhere (even inside a UTF-8 sequence), decoding incrementally the
    # way httpx2's aiter_text does.
    import codecs

    text_decoder = codecs.getincrementaldecoder("utf-8")()
    pieces = [
        text_decoder.decode(data[a:b])
        for a, b in zip([0, *points], [*points, len(data)], strict=True)
    ]
    assert decode(*pieces) == decode(stream)
    assert len(decode(stream)) >= 5


def test_keep_reasoning_hands_reasoning_over_as_one_block_before_the_answer() -> None:
    from kova import SignedThinking, Thinking

    decoder = OpenAiStreamDecoder(keep_reasoning=True)
    events = [
        *decoder.feed(
            chunk({"reasoning_content": "Let me "}) + chunk({"reasoning_content": "see."})
        ),
        *decoder.feed(chunk({"content": "Yes."}) + chunk({}, "stop") + DONE),
        *decoder.finish(),
    ]
    assert events == [
        ThinkingDelta(text="Let me "),
        ThinkingDelta(text="see."),
        SignedThinking(block=Thinking(text="Let me see.")),
        TextDelta(text="Yes."),
        StopEvent(stop_reason=StopReason.END_TURN),
    ]


def test_keep_reasoning_before_tool_calls_and_at_the_stop() -> None:
    from kova import SignedThinking, Thinking

    calls = decode_with(
        OpenAiStreamDecoder(keep_reasoning=True),
        chunk({"reasoning": "call it"}),
        chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f"}}]}),
        chunk({}, "tool_calls"),
        DONE,
    )
    assert calls[1:3] == [
        SignedThinking(block=Thinking(text="call it")),
        ToolUseStart(index=0, id="a", name="f"),
    ]
    only = decode_with(
        OpenAiStreamDecoder(keep_reasoning=True), chunk({"reasoning": "hmm"}), chunk({}, "stop")
    )
    assert only[1:] == [
        SignedThinking(block=Thinking(text="hmm")),
        StopEvent(stop_reason=StopReason.END_TURN),
    ]
    assert not any(
        isinstance(e, SignedThinking)
        for e in decode(chunk({"reasoning": "hmm"}), chunk({}, "stop"))
    )


def decode_with(decoder: OpenAiStreamDecoder, *pieces: str) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    for piece in pieces:
        events.extend(decoder.feed(piece))
    events.extend(decoder.finish())
    return events
