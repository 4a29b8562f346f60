"""The plumbing the five fake servers share: how a scripted reply becomes a streamed body."""

from __future__ import annotations

import attrs
import pytest

from kova import StopReason, TextDelta
from kova.providers import ErrorEvent, StopEvent, StreamEvent
from kova.testing import StreamReply, reply_text
from kova.testing._fake_server import scripted_stream

EVENTS: tuple[StreamEvent, ...] = (
    TextDelta(text="a"),
    TextDelta(text="b"),
    StopEvent(stop_reason=StopReason.END_TURN),
)
WITH_ERROR: tuple[StreamEvent, ...] = (
    TextDelta(text="a"),
    ErrorEvent(message="melted", error_type="server_error"),
    TextDelta(text="never"),
)


class Letters:
    """An encoder that writes each event's text (or its type) as one chunk."""

    def start(self) -> bytes:
        return b"<"

    def encode(self, event: StreamEvent) -> bytes:
        return getattr(event, "text", type(event).__name__).encode()

    def finish(self) -> bytes:
        return b">"


@attrs.frozen(kw_only=True)
class Case:
    events: tuple[StreamEvent, ...]
    cut_after: int | None = None
    hold_after: int | None = None
    hold: bool = False
    chunks: list[bytes]
    cut: bool = False
    held: bool = False


CASES = [
    Case(events=EVENTS, chunks=[b"<", b"a", b"b", b"StopEvent", b">"]),
    Case(events=EVENTS, cut_after=2, chunks=[b"<", b"a", b"b"], cut=True),
    Case(events=EVENTS, cut_after=3, chunks=[b"<", b"a", b"b", b"StopEvent"], cut=True),
    # An error event ends the body there, properly, whatever cut point lies beyond it.
    Case(events=WITH_ERROR, chunks=[b"<", b"a", b"ErrorEvent"]),
    Case(events=WITH_ERROR, cut_after=3, chunks=[b"<", b"a", b"ErrorEvent"]),
    # hold_after counts only for the fakes that hold (OpenAI, Anthropic, Gemini, Ollama).
    Case(events=EVENTS, hold_after=1, hold=True, chunks=[b"<", b"a"], cut=True, held=True),
    Case(events=EVENTS, hold_after=1, chunks=[b"<", b"a", b"b", b"StopEvent", b">"]),
]


@pytest.mark.parametrize("case", CASES)
def test_a_scripted_stream_is_cut_held_or_ended_as_the_reply_says(case: Case) -> None:
    reply = StreamReply(
        response=reply_text("unused"),
        events=case.events,
        cut_after=case.cut_after,
        hold_after=case.hold_after,
    )
    stream = scripted_stream(reply, Letters(), headers={}, hold=case.hold)
    assert list(stream.chunks) == case.chunks  # type: ignore[arg-type]
    assert (stream.cut, stream.hold) == (case.cut, case.held)
