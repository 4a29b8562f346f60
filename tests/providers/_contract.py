"""What the codec-contract tests share: a codec's stream, fed read by read through the HTTP
provider's EventStream, and the checks every codec's events must pass."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import trio

from kova import KovaError, TextDelta, ThinkingDelta
from kova.providers import EventStream, StreamEvent, ToolUseDelta


class Reads(AsyncIterator[bytes]):
    """The network reads of a body: ``pieces``, one per read, each after a checkpoint."""

    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = iter(pieces)

    async def __anext__(self) -> bytes:
        await trio.lowlevel.checkpoint()
        try:
            return next(self._pieces)
        except StopIteration:
            raise StopAsyncIteration from None


def run(codec: Any, pieces: list[bytes]) -> tuple[list[StreamEvent], BaseException | None]:
    """The events ``codec`` decodes from a body read as ``pieces``, and the kova error that
    ended the stream, if any. ``codec`` is ``Any``: the codecs differ in their frame type."""
    events: list[StreamEvent] = []
    failure: list[BaseException] = []

    async def main() -> None:
        stream = EventStream(
            Reads(pieces),
            codec.framer(),
            codec.stream_decoder(),
            provider=codec.name,
            idle_timeout=None,
            total_timeout=None,
        )
        try:
            async for batch in stream:
                assert batch, "batches are never empty"
                events.extend(batch)
        except KovaError as exc:
            failure.append(exc)

    trio.run(main)
    return events, failure[0] if failure else None


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut at ``cuts`` (any order, past the end allowed)."""
    bounds = [0, *sorted(min(c, len(data)) for c in cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def check_types(events: list[StreamEvent]) -> None:
    """Every text and tool-argument fragment is a ``str``, whatever the wire said."""
    for event in events:
        if isinstance(event, TextDelta | ThinkingDelta):
            assert type(event.text) is str
        if isinstance(event, ToolUseDelta):
            assert type(event.partial_json) is str
