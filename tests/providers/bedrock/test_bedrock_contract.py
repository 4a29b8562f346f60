"""The codec contract (kova.providers._codec) for the Bedrock codec, through the HTTP
provider's EventStream over byte reads: the same events whatever the network splits, the
events before an exception message and then the classified error, malformed messages as
InvalidResponse, and a cut stream never a short answer. (The shared contract suite's cases
are text streams; the AWS event stream is binary, so its cases are here, run by the same
helpers.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kova import InvalidResponse, ProviderError, ProviderErrorClass
from kova.providers.bedrock import BedrockConfig
from kova.providers.bedrock._codec import BedrockCodec
from kova.testing._wire.bedrock import encode_message, event_message, exception_message

from .._contract import check_types, split
from .._contract import run as run_stream

if TYPE_CHECKING:
    from kova.providers import StreamEvent

CODEC = BedrockCodec(BedrockConfig(region="us-east-1", model_id="m"))

FRAMES = [
    event_message("messageStart", {"p": "abc", "role": "assistant"}),
    event_message(
        "contentBlockDelta",
        {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Hm"}}},
    ),
    event_message(
        "contentBlockDelta",
        {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "c2ln"}}},
    ),
    event_message("contentBlockStop", {"contentBlockIndex": 0}),
    event_message("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "Hel"}}),
    event_message("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "lo"}}),
    event_message("contentBlockStop", {"contentBlockIndex": 1}),
    event_message(
        "contentBlockStart",
        {"contentBlockIndex": 2, "start": {"toolUse": {"toolUseId": "t1", "name": "f"}}},
    ),
    event_message(
        "contentBlockDelta", {"contentBlockIndex": 2, "delta": {"toolUse": {"input": '{"a":'}}}
    ),
    event_message(
        "contentBlockDelta", {"contentBlockIndex": 2, "delta": {"toolUse": {"input": "1}"}}}
    ),
    event_message("contentBlockStop", {"contentBlockIndex": 2}),
    event_message("messageStop", {"stopReason": "tool_use"}),
    event_message("metadata", {"usage": {"inputTokens": 3, "outputTokens": 4}, "metrics": {}}),
]
STREAM = b"".join(FRAMES)
ERROR_FRAME = exception_message("throttlingException", "slow down")
MALFORMED = (
    encode_message({":message-type": "event", ":event-type": "contentBlockDelta"}, b"{oops"),
    event_message("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": 5}}),
    event_message("contentBlockDelta", {"contentBlockIndex": "1", "delta": {"text": "x"}}),
    event_message("contentBlockStart", {"contentBlockIndex": 3, "start": {"toolUse": 7}}),
    encode_message({":message-type": "nonsense"}, b"{}"),
    STREAM[:20] + b"\x00" + STREAM[21:30],  # a corrupted CRC
)


def run(pieces: list[bytes]) -> tuple[list[StreamEvent], BaseException | None]:
    return run_stream(CODEC, pieces)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=25))
def test_any_split_gives_the_same_events(cuts: list[int]) -> None:
    whole, failure = run([STREAM])
    assert failure is None
    split_events, split_failure = run(split(STREAM, cuts))
    assert split_failure is None
    assert split_events == whole
    check_types(whole)


def test_an_exception_frame_at_any_position_is_classified_after_the_events_before_it() -> None:
    for position in range(len(FRAMES)):
        before = b"".join(FRAMES[:position])
        expected, _ = run([before]) if before else ([], None)
        events, failure = run([before + ERROR_FRAME + b"".join(FRAMES[position:])])
        assert isinstance(failure, ProviderError), (position, failure)
        assert failure.error_class is ProviderErrorClass.RATE_LIMITED
        assert failure.mid_stream
        assert events == expected


@pytest.mark.parametrize("bad", MALFORMED)
def test_malformed_frames_are_invalid_responses(bad: bytes) -> None:
    for position in (0, len(FRAMES) // 2):
        body = b"".join(FRAMES[:position]) + bad + b"".join(FRAMES[position:])
        events, failure = run([body])
        assert isinstance(failure, InvalidResponse), (position, failure)
        check_types(events)


def test_a_stream_cut_before_its_end_is_never_a_short_answer() -> None:
    for end in (len(FRAMES) // 2, len(FRAMES) - 2):
        _events, failure = run([b"".join(FRAMES[:end])])
        assert failure is not None
    _events, failure = run([STREAM[:-5]])
    assert isinstance(failure, InvalidResponse)
