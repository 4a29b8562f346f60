"""The provider's batch pipeline (the transport's decoded reads, SSE framing and Anthropic
decoding per network read), fed arbitrary splits of a body: complete, failed by an ``error``
event, and cut short."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from test_anthropic_stream import EXPECTED, WIRE_EXAMPLE

from kova._errors import KovaError, ProviderOverloaded, StreamError
from kova.providers import EventStream, SseFramer
from kova.providers.anthropic._stream import AnthropicStreamDecoder

if TYPE_CHECKING:
    from kova import _models as m

ERROR = (
    "event: error\n"
    'data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
)
BEFORE_DELTA = WIRE_EXAMPLE.index("event: message_delta")
WITH_ERROR = WIRE_EXAMPLE[:BEFORE_DELTA] + ERROR + WIRE_EXAMPLE[BEFORE_DELTA:]
CUT = WIRE_EXAMPLE[:BEFORE_DELTA]


class Pieces(AsyncIterator[bytes]):
    """Network reads: the body's bytes in the given pieces."""

    def __init__(self, pieces: list[str]) -> None:
        self._pieces = iter(piece.encode() for piece in pieces)

    async def __anext__(self) -> bytes:
        await trio.lowlevel.checkpoint()
        try:
            return next(self._pieces)
        except StopIteration:
            raise StopAsyncIteration from None


def split(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted(min(c, len(text)) for c in cuts), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def run_batches(pieces: list[str]) -> tuple[list[list[m.StreamEvent]], BaseException | None]:
    batches: list[list[m.StreamEvent]] = []
    failure: list[BaseException] = []

    async def main() -> None:
        try:
            stream = EventStream(
                Pieces(pieces),  # type: ignore[arg-type]
                SseFramer(),
                AnthropicStreamDecoder(),
                provider="anthropic",
                idle_timeout=None,
                total_timeout=None,
            )
            async for batch in stream:
                assert batch, "batches are never empty"
                batches.append(list(batch))
        except KovaError as exc:
            failure.append(exc)

    trio.run(main)
    return batches, failure[0] if failure else None


cuts = st.lists(st.integers(min_value=0, max_value=len(WITH_ERROR)), max_size=30)


@settings(max_examples=60, deadline=None)
@given(cuts)
def test_complete_body_in_any_split(positions: list[int]) -> None:
    batches, failure = run_batches(split(WIRE_EXAMPLE, positions))
    assert failure is None
    assert [e for batch in batches for e in batch] == EXPECTED


@settings(max_examples=60, deadline=None)
@given(cuts)
def test_error_event_in_any_split(positions: list[int]) -> None:
    batches, failure = run_batches(split(WITH_ERROR, positions))
    # Classified like HTTP 529, marked mid-stream and after content (so never retried).
    assert isinstance(failure, ProviderOverloaded)
    assert failure.error_type == "overloaded_error"
    assert failure.mid_stream
    assert failure.after_content
    assert not failure.is_retryable
    assert [e for batch in batches for e in batch] == EXPECTED[:-2]  # all but stop and usage


@settings(max_examples=60, deadline=None)
@given(cuts)
def test_cut_body_in_any_split(positions: list[int]) -> None:
    batches, failure = run_batches(split(CUT, positions))
    assert isinstance(failure, StreamError)
    assert failure.error_type == "incomplete_stream"
    assert [e for batch in batches for e in batch] == EXPECTED[:-2]


def test_one_read_is_one_batch() -> None:
    batches, failure = run_batches([WIRE_EXAMPLE[:BEFORE_DELTA], WIRE_EXAMPLE[BEFORE_DELTA:]])
    assert failure is None
    assert [len(batch) for batch in batches] == [len(EXPECTED) - 2, 2]


@pytest.mark.parametrize("body", ["", "event: ping\ndata: {}\n\n"])
def test_an_empty_stream_is_an_error(body: str) -> None:
    batches, failure = run_batches([body])
    assert batches == []
    assert isinstance(failure, StreamError)
