"""Shared helpers for the OpenAI provider tests."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import attrs

from kova import StopReason, TextDelta, ThinkingDelta, Usage
from kova.providers import (
    StopEvent,
    StreamEvent,
    ToolUseDelta,
    ToolUseEnd,
    ToolUseStart,
    UsageEvent,
)
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from kova.testing import FakeOpenAiServer


@attrs.frozen
class Folded:
    """What a stream adds up to."""

    text: str
    thinking: str
    tool_calls: tuple[tuple[str, str, object], ...]
    stop: StopReason | None
    usage: Usage | None


def fold(events: Sequence[StreamEvent]) -> Folded:
    text = thinking = ""
    calls: dict[int, list[str]] = {}
    ended: list[int] = []
    stop: StopReason | None = None
    usage: Usage | None = None
    for event in events:
        match event:
            case TextDelta(text=piece):
                text += piece
            case ThinkingDelta(text=piece):
                thinking += piece
            case ToolUseStart(index=index, id=call_id, name=name):
                assert index not in calls
                calls[index] = [call_id, name, ""]
            case ToolUseDelta(index=index, partial_json=piece):
                assert index not in ended
                calls[index][2] += piece
            case ToolUseEnd(index=index):
                ended.append(index)
            case StopEvent(stop_reason=reason):
                stop = reason
            case UsageEvent(usage=value):
                usage = value
    assert sorted(ended) == sorted(calls), "every started tool call must end"
    return Folded(
        text=text,
        thinking=thinking,
        tool_calls=tuple(
            (call_id, name, json.loads(arguments) if arguments else {})
            for call_id, name, arguments in (calls[i] for i in sorted(calls))
        ),
        stop=stop,
        usage=usage,
    )


async def collect(batches: AsyncIterator[Sequence[StreamEvent]]) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    async for batch in batches:
        assert batch, "batches are never empty"
        events.extend(batch)
    return events


def provider_for(server: FakeOpenAiServer, **config: object) -> OpenAiCompatibleProvider:
    settings: dict[str, object] = {
        "model": "gpt-fake",
        "api_key": "sk-test",
        "base_url": server.base_url,
    } | config
    return OpenAiCompatibleProvider(OpenAiConfig(**settings))  # type: ignore[arg-type]
