"""Folding a stream back into a response."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kova
import kova.providers
from kova import (
    SignedThinking,
    StopReason,
    Text,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolUse,
    Usage,
)
from kova.agent._accumulate import (
    _JOIN_EVERY,
    ResponseAccumulator,
    merge_usage,
    parse_tool_arguments,
)
from kova.providers import (
    ModelResponse,
    StopEvent,
    ToolUseDelta,
    ToolUseEnd,
    ToolUseStart,
    UsageEvent,
)
from kova.testing import response_to_events


def test_interleaved_blocks_keep_their_order() -> None:
    thinking = Thinking(text="hmm", signature="sig")
    acc = ResponseAccumulator()
    acc.feed(
        [
            ThinkingDelta(text="hm"),
            ThinkingDelta(text="m"),
            SignedThinking(block=thinking),
            TextDelta(text="Let me "),
            TextDelta(text="check."),
            ToolUseStart(index=2, id="t1", name="f"),
            ToolUseDelta(index=2, partial_json='{"a"'),
            ToolUseDelta(index=2, partial_json=": 1}"),
            ToolUseEnd(index=2),
            StopEvent(stop_reason=StopReason.TOOL_USE),
            UsageEvent(usage=Usage(input_tokens=5)),
            UsageEvent(usage=Usage(input_tokens=5, output_tokens=9)),
        ]
    )
    response = acc.finish()
    assert response == ModelResponse(
        content=(thinking, Text(text="Let me check."), ToolUse(id="t1", name="f", input={"a": 1})),
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=5, output_tokens=9),
        thinking="hmm",
    )


def test_first_is_called_once_before_the_first_non_empty_batch() -> None:
    # The streamed model step's first-token bookkeeping (Agent.stream and the Temporal
    # worker both hand each batch to feed): an empty first batch (a lease whose head carried
    # no event) is no first token; the first that holds one is, before it is folded in.
    seen: list[int] = []
    acc = ResponseAccumulator(lambda: seen.append(len(acc._items)))
    acc.feed([])
    assert seen == []
    acc.feed([TextDelta(text="a")])
    assert seen == [0]
    acc.feed([TextDelta(text="b"), StopEvent(stop_reason=StopReason.END_TURN)])
    assert seen == [0]
    assert acc.finish().content == (Text(text="ab"),)


def test_stream_without_stop_is_an_error() -> None:
    acc = ResponseAccumulator()
    acc.feed([TextDelta(text="partial")])
    with pytest.raises(kova.StreamError, match="no stop reason"):
        acc.finish()


def test_error_event_raises_stream_error() -> None:
    acc = ResponseAccumulator()
    with pytest.raises(kova.StreamError, match="overloaded_error: busy"):
        acc.feed([kova.providers.ErrorEvent(message="busy", error_type="overloaded_error")])


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", ({}, None)),
        ('{"x": [1, 2]}', ({"x": [1, 2]}, None)),
        ("{broken", ({}, "{broken")),
        ("[1, 2]", ({}, "[1, 2]")),
    ],
)
def test_parse_tool_arguments(raw: str, expected: object) -> None:
    assert parse_tool_arguments(raw) == expected


def test_merge_usage_keeps_largest_per_field() -> None:
    merged = merge_usage(Usage(input_tokens=10, cache_read_tokens=4), Usage(output_tokens=3))
    assert merged == Usage(input_tokens=10, output_tokens=3, cache_read_tokens=4)


texts = st.text(max_size=30)


@given(
    texts,
    st.integers(min_value=1, max_value=10),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
def test_response_survives_a_stream_round_trip(
    text: str, chunk: int, arguments: dict[str, int]
) -> None:
    original = ModelResponse(
        content=((Text(text=text),) if text else ())
        + (ToolUse(id="c", name="f", input=arguments),),
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=1, output_tokens=2),
    )
    acc = ResponseAccumulator()
    acc.feed(response_to_events(original, chunk_chars=chunk))
    assert acc.finish() == original


def test_a_delta_with_provider_metadata_ends_its_text_block_which_keeps_it() -> None:
    signed = {"gemini_thought_signature": "c2ln"}
    acc = ResponseAccumulator()
    acc.feed(
        [
            TextDelta(text="It is "),
            TextDelta(text="sunny.", provider_metadata=signed),
            TextDelta(text=" Bye."),
            ToolUseStart(index=0, id="t1", name="f"),
            ToolUseEnd(index=0),
            TextDelta(text="", provider_metadata={"gemini_thought_signature": "ZW1wdHk="}),
            StopEvent(stop_reason=StopReason.TOOL_USE),
        ]
    )
    assert acc.finish().content == (
        Text(text="It is sunny.", provider_metadata=signed),
        Text(text=" Bye."),
        ToolUse(id="t1", name="f"),
        # An empty text part that only carries a signature is kept (its signature goes back).
        Text(text="", provider_metadata={"gemini_thought_signature": "ZW1wdHk="}),
    )


@given(
    st.lists(st.tuples(texts, st.booleans()), min_size=1, max_size=4),
    st.integers(min_value=1, max_value=10),
)
def test_signed_text_blocks_survive_a_stream_round_trip(
    blocks: list[tuple[str, bool]], chunk: int
) -> None:
    content = tuple(
        Text(text=text, provider_metadata={"sig": f"s{i}"} if signed else None)
        for i, (text, signed) in enumerate(blocks)
    )
    # What a stream can carry: adjacent unsigned text merges into the next block.
    expected: list[Text] = []
    pending = ""
    for block in content:
        if block.provider_metadata is None:
            pending += block.text
        else:
            expected.append(
                Text(text=pending + block.text, provider_metadata=block.provider_metadata)
            )
            pending = ""
    if pending:
        expected.append(Text(text=pending))
    original = ModelResponse(content=content, stop_reason=StopReason.END_TURN)
    acc = ResponseAccumulator()
    acc.feed(response_to_events(original, chunk_chars=chunk))
    assert acc.finish().content == tuple(expected)


@given(
    st.lists(
        st.one_of(
            st.text(max_size=3).map(lambda t: TextDelta(text=t)),
            st.text(max_size=3).map(lambda t: ThinkingDelta(text=t)),
            st.just(None),  # a tool call between two text runs
        ),
        max_size=400,
    ),
    st.integers(min_value=1, max_value=7),
)
def test_long_runs_of_deltas_fold_into_the_same_text_in_bounded_pieces(
    deltas: list[TextDelta | ThinkingDelta | None], batch: int
) -> None:
    events: list[kova.providers.StreamEvent] = []
    expected: list[str] = [""]
    thought = ""
    for i, delta in enumerate(deltas):
        if delta is None:
            events += [ToolUseStart(index=i, id=f"t{i}", name="f"), ToolUseEnd(index=i)]
            expected.append("")
        else:
            events.append(delta)
            if type(delta) is TextDelta:
                expected[-1] += delta.text
            else:
                thought += delta.text
    events.append(StopEvent(stop_reason=StopReason.END_TURN))
    acc = ResponseAccumulator()
    for start in range(0, len(events), batch):
        acc.feed(events[start : start + batch])
        # No run of text keeps more than _JOIN_EVERY deltas apart, plus one str per
        # _JOIN_EVERY joined.
        for item in acc._items:
            if isinstance(item, list):
                assert len(item) < _JOIN_EVERY + len(deltas) // _JOIN_EVERY + 1
    response = acc.finish()
    texts = [block.text for block in response.content if isinstance(block, Text)]
    assert texts == [text for text in expected if text]
    assert response.thinking == (thought or None)


def test_a_long_answer_is_held_in_a_few_strings() -> None:
    acc = ResponseAccumulator()
    for i in range(10_000):
        acc.feed([TextDelta(text=f"t{i} ")])
    (run,) = acc._items
    assert isinstance(run, list)
    assert len(run) <= 10_000 // _JOIN_EVERY + _JOIN_EVERY
    acc.feed([StopEvent(stop_reason=StopReason.END_TURN)])
    assert acc.finish().text == "".join(f"t{i} " for i in range(10_000))


def test_a_long_thought_is_held_in_a_few_strings() -> None:
    acc = ResponseAccumulator()
    for i in range(10_000):
        acc.feed([ThinkingDelta(text=f"h{i} ")])
    assert len(acc._thinking) <= 10_000 // _JOIN_EVERY + _JOIN_EVERY
    acc.feed([TextDelta(text="ok"), StopEvent(stop_reason=StopReason.END_TURN)])
    assert acc.finish().thinking == "".join(f"h{i} " for i in range(10_000))
