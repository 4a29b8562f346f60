"""The metrics actor and its handle (``kova/telemetry/_collector.py``)."""

import math

import pytest
import trio
import trio.testing

from kova import MailboxClosed, Usage
from kova.actors import open_runtime
from kova.telemetry import (
    Metrics,
    MetricsCollector,
    MetricsSnapshot,
    ToolOutcome,
    open_metrics,
)


async def test_records_reach_the_snapshot() -> None:
    async with open_metrics() as collector:
        collector.record_llm_request(120.0, Usage(input_tokens=100, output_tokens=50))
        collector.record_llm_request(80.0, Usage(input_tokens=10, output_tokens=5))
        collector.record_llm_error()
        collector.record_tool_invocation(25.0, ToolOutcome.SUCCESS)
        collector.record_tool_invocation(40.0, False)
        collector.record_tool_invocation(None, ToolOutcome.DENIED)
        snapshot = await collector.snapshot()

    expected = Metrics()
    expected.record_llm_request(120.0, Usage(input_tokens=100, output_tokens=50))
    expected.record_llm_request(80.0, Usage(input_tokens=10, output_tokens=5))
    expected.record_llm_error()
    expected.record_tool_invocation(25.0, ToolOutcome.SUCCESS)
    expected.record_tool_invocation(40.0, ToolOutcome.ERROR)
    expected.record_tool_invocation(None, ToolOutcome.DENIED)
    assert snapshot == expected.snapshot()
    assert snapshot.llm_request_count == 2
    assert snapshot.total_tokens == 165
    assert snapshot.error_count == 1
    assert snapshot.tool_invocation_count == 3
    assert snapshot.dropped_records == 0


async def test_fresh_collector_is_empty() -> None:
    async with open_metrics() as collector:
        assert await collector.snapshot() == MetricsSnapshot()


async def test_full_mailbox_drops_and_counts_without_waiting() -> None:
    async with open_metrics(mailbox_size=2) as collector:
        await trio.testing.wait_all_tasks_blocked()  # the actor waits in receive()
        # No checkpoint in between, so the actor cannot drain: one record goes straight to
        # the waiting actor, two fill the mailbox, the other three are dropped.
        for latency in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0):
            collector.record_llm_request(latency)
        assert collector.dropped_records == 3
        snapshot = await collector.snapshot()
    assert snapshot.llm_request_count == 3
    assert snapshot.llm_latency_ms.max == 3.0
    assert snapshot.dropped_records == 3


async def test_records_after_the_actor_stopped_are_dropped() -> None:
    async with open_metrics() as collector:
        pass
    collector.record_llm_error()
    assert collector.dropped_records == 1
    with pytest.raises(MailboxClosed):
        await collector.snapshot()


async def test_collector_on_a_shared_runtime_stops_with_its_block() -> None:
    async with open_runtime() as runtime:
        async with open_metrics(runtime=runtime) as collector:
            assert collector.ref.name == "metrics"
            collector.record_llm_error()
            assert (await collector.snapshot()).error_count == 1
        with pytest.raises(MailboxClosed):
            await collector.snapshot()
        # The runtime itself carries on.
        other = await MetricsCollector.spawn(runtime)
        other.record_tool_invocation(1.0, True)
        assert (await other.snapshot()).tool_success_count == 1


async def test_spawned_collectors_get_distinct_names() -> None:
    async with open_runtime() as runtime:
        first = await MetricsCollector.spawn(runtime)
        second = await MetricsCollector.spawn(runtime)
        assert first.ref.name == "metrics"
        assert second.ref.name == "metrics-2"
        first.record_llm_error()
        assert (await second.snapshot()).error_count == 0


async def test_many_tasks_record_concurrently(autojump_clock: trio.testing.MockClock) -> None:
    async with open_metrics() as collector:

        async def agent(index: int) -> None:
            for step in range(10):
                await trio.sleep(1)
                collector.record_tool_invocation(float(index + step), ToolOutcome.SUCCESS)

        async with trio.open_nursery() as nursery:
            for index in range(20):
                nursery.start_soon(agent, index)
        snapshot = await collector.snapshot()
    assert trio.current_time() == 10
    assert snapshot.tool_success_count == 200
    assert snapshot.tool_duration_ms.count == 200
    assert snapshot.dropped_records == 0


async def test_nan_is_rejected_at_the_call_site() -> None:
    async with open_metrics() as collector:
        with pytest.raises(ValueError, match="latency_ms must not be NaN"):
            collector.record_llm_request(math.nan)
        with pytest.raises(ValueError, match="duration_ms must not be NaN"):
            collector.record_tool_invocation(math.nan, ToolOutcome.SUCCESS)
        assert await collector.snapshot() == MetricsSnapshot()


async def test_actor_answers_raw_messages_through_its_ref() -> None:
    # The actor's messages are private (the collector's methods are the API), but its ref
    # is public, so what it answers is tested too.
    from kova.telemetry._collector import GetSnapshot, LlmRequestRecorded

    async with open_metrics() as collector:
        collector.ref.cast(LlmRequestRecorded(latency_ms=3.0))
        snapshot = await collector.ref.call(GetSnapshot())
    assert snapshot.llm_request_count == 1


async def test_outcome_may_be_given_by_value() -> None:
    async with open_metrics() as collector:
        collector.record_tool_invocation(None, "denied")
        with pytest.raises(ValueError, match="'maybe' is not a valid ToolOutcome"):
            collector.record_tool_invocation(1.0, "maybe")
        assert (await collector.snapshot()).tool_denied_count == 1


async def test_a_record_the_actor_cannot_add_up_is_refused_at_the_call_site() -> None:
    # Before: record_llm_request(150.0, 5) (the seed's token count where kova takes a Usage)
    # was cast as given, crashed the metrics actor when it added it up, and the restart lost
    # every count recorded so far.
    async with open_metrics() as metrics:
        metrics.record_llm_request(10.0, Usage(input_tokens=3, output_tokens=4))
        with pytest.raises(TypeError, match=r"usage must be a kova\.Usage"):
            metrics.record_llm_request(150.0, 5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="latency_ms must be a number"):
            metrics.record_llm_request("fast")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="latency_ms must not be negative"):
            metrics.record_llm_request(-1.0)
        with pytest.raises(TypeError, match="duration_ms must be a number"):
            metrics.record_tool_invocation("slow", "success")  # type: ignore[arg-type]
        snapshot = await metrics.snapshot()
    assert snapshot.llm_request_count == 1
    assert snapshot.total_tokens == 7
