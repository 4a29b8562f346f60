"""A worker activity's live events reach the workflow in order and each once, however slow
the signal that carries a batch is: the periodic sender is stopped, never cut off mid-batch.
(Run against stand-ins for the activity context and the workflow signal, on asyncio's real
clock with short periods.)"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

import kova.temporal._worker as worker


class SlowPublisher:
    """A batch is taken at once and delivered after ``delay``, as a signal in flight is."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.items: list[str] = []
        self.delivered: list[str] = []

    def add(self, kind: str) -> None:
        self.items.append(kind)

    async def flush(self) -> None:
        items, self.items = self.items, []
        if items:
            await asyncio.sleep(self.delay)
            self.delivered.extend(items)


@pytest.fixture
def activity_context(monkeypatch: pytest.MonkeyPatch) -> None:
    info = SimpleNamespace(heartbeat_timeout=None)
    stand_in = SimpleNamespace(info=lambda: info, heartbeat=lambda *details: None)
    monkeypatch.setattr(worker, "activity", stand_in)
    monkeypatch.setattr(worker, "_FLUSH_EVERY", 0.01)


def test_events_taken_by_a_slow_flush_are_not_lost_when_the_work_ends(
    activity_context: None,
) -> None:
    publish = SlowPublisher(delay=0.05)

    async def work() -> str:
        publish.add("tool_started")
        # The sender takes tool_started at 0.01 s and is still sending it when this ends.
        await asyncio.sleep(0.03)
        publish.add("tool_finished")
        return "done"

    async def main() -> Any:
        return await worker._heartbeating(work(), publish)  # type: ignore[arg-type]

    assert asyncio.run(main()) == "done"
    assert publish.delivered == ["tool_started", "tool_finished"]


def test_a_failed_attempt_sends_its_events_and_raises_its_own_error(
    activity_context: None,
) -> None:
    publish = SlowPublisher(delay=0.05)

    async def work() -> str:
        publish.add("text")
        await asyncio.sleep(0.03)
        publish.add("tool_started")
        raise RuntimeError("the attempt failed")

    async def main() -> Any:
        return await worker._heartbeating(work(), publish)  # type: ignore[arg-type]

    with pytest.raises(RuntimeError, match="the attempt failed"):
        asyncio.run(main())
    assert publish.delivered == ["text", "tool_started"]
