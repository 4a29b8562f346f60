"""The telemetry event stream: order, pairing (also on cancellation), retries from the
provider actor, subscribers, supervisor events."""

from __future__ import annotations

import contextlib

import pytest
import structlog
import trio
import trio.testing

import kova
from kova import Message, Usage
from kova.actors import Actor, open_runtime
from kova.agent import AgentBuilder, CancelToken, LifecycleSubscriber, RetryConfig
from kova.telemetry import (
    ActorRestarted,
    MetricsSubscriber,
    ModelCallFinished,
    ModelCallRetrying,
    ModelCallStarted,
    ModelFirstToken,
    SupervisorGaveUp,
    TelemetryEvent,
    TelemetryHub,
    ToolExecutionStarted,
    ToolFinished,
    ToolOutcome,
    ToolStarted,
    TurnFinished,
    TurnStarted,
    open_metrics,
)
from kova.testing import ErrorReply, ScriptedProvider, StreamReply, reply_text, reply_tool_calls
from kova.tools import tool

HISTORY = (Message.user("hello"),)


@tool
async def nap(seconds: float) -> str:
    """Sleep.

    Args:
        seconds: how long.
    """
    await trio.sleep(seconds)
    return "rested"


def check_pairs(events: list[TelemetryEvent]) -> None:
    """Every started has exactly one finished, after it, with the same ids."""
    open_spans: dict[int, type] = {}
    turns: set[int] = set()
    for event in events:
        match event:
            case TurnStarted(turn_id=turn_id):
                assert turn_id not in turns
                turns.add(turn_id)
            case TurnFinished(turn_id=turn_id):
                turns.remove(turn_id)
            case (
                ModelCallStarted(span_id=span_id, parent_id=parent, turn_id=turn_id)
                | ToolStarted(span_id=span_id, parent_id=parent, turn_id=turn_id)
            ):
                assert parent == turn_id
                assert turn_id in turns
                open_spans[span_id] = type(event)
            case ModelCallFinished(span_id=span_id):
                assert open_spans.pop(span_id) is ModelCallStarted
            case ToolFinished(span_id=span_id):
                assert open_spans.pop(span_id) is ToolStarted
            case ModelFirstToken(span_id=span_id) | ModelCallRetrying(span_id=span_id):
                assert open_spans[span_id] is ModelCallStarted
    assert not open_spans
    assert not turns


async def test_a_turn_is_bracketed_and_tools_run_under_it() -> None:
    provider = ScriptedProvider(
        [
            reply_tool_calls(("nap", {"seconds": 0}), ("nap", {"seconds": 0})),
            reply_text("done", usage=Usage(input_tokens=5, output_tokens=2)),
        ]
    )
    events: list[TelemetryEvent] = []
    async with AgentBuilder().provider(provider).tool(nap).build() as agent:
        with agent.telemetry.subscribe(events.append):
            response = await agent.run(HISTORY)
    kinds = [type(event).__name__ for event in events]
    assert kinds[0] == "TurnStarted"
    assert kinds[-1] == "TurnFinished"
    assert kinds.count("ModelCallStarted") == 2
    assert kinds.count("ToolStarted") == kinds.count("ToolFinished") == 2
    check_pairs(events)
    finished = events[-1]
    assert isinstance(finished, TurnFinished)
    assert finished.outcome == "ok"
    assert finished.llm_calls == 2
    assert finished.usage == response.usage
    times = [event.time for event in events]
    assert times == sorted(times)  # one clock: trio's


async def test_streamed_turn_reports_the_first_token() -> None:
    provider = ScriptedProvider([StreamReply(response=reply_text("streamed"))])
    events: list[TelemetryEvent] = []
    async with AgentBuilder().provider(provider).build() as agent:
        agent.telemetry.subscribe(events.append)
        async with agent.stream(HISTORY) as stream:
            async for _ in stream:
                pass
    assert [type(event) for event in events] == [
        TurnStarted,
        ModelCallStarted,
        ModelFirstToken,
        ModelCallFinished,
        TurnFinished,
    ]
    assert isinstance(events[3], ModelCallFinished)
    assert events[3].stop_reason == "end_turn"


async def test_retries_come_from_the_provider_actor_with_class_and_wait(
    autojump_clock: trio.testing.MockClock,
) -> None:
    provider = ScriptedProvider(
        [
            ErrorReply(status_code=429, retry_after=7.0),
            ErrorReply(status_code=503),
            reply_text("ok"),
        ]
    )
    retry = RetryConfig(max_retries=2, initial_backoff=1.0)
    events: list[TelemetryEvent] = []
    async with AgentBuilder().provider(provider).retry_config(retry).build() as agent:
        agent.telemetry.subscribe(events.append)
        await agent.run(HISTORY)
    retries = [event for event in events if isinstance(event, ModelCallRetrying)]
    assert [(r.attempt, r.wait) for r in retries] == [(1, 7.0), (2, 2.0)]
    assert retries[0].error_type == "RateLimited"
    assert retries[0].error_class == "rate_limited"
    check_pairs(events)
    call_finished = next(event for event in events if isinstance(event, ModelCallFinished))
    assert call_finished.latency == 9.0  # retries included, on the fake clock


async def test_cancelled_turn_finishes_every_started(
    autojump_clock: trio.testing.MockClock,
) -> None:
    token = CancelToken()
    started = trio.Event()

    @tool
    async def long_job() -> str:
        """Runs for a long time."""
        started.set()
        await trio.sleep(1000)
        return "never"

    provider = ScriptedProvider(
        [reply_tool_calls(("long_job", {}), ("nap", {"seconds": 1})), reply_text("never")]
    )
    events: list[TelemetryEvent] = []
    async with AgentBuilder().provider(provider).tools(long_job, nap).build() as agent:
        agent.telemetry.subscribe(events.append)
        async with trio.open_nursery() as nursery:

            async def cancel_later() -> None:
                await started.wait()
                await trio.sleep(5)
                token.cancel()

            nursery.start_soon(cancel_later)
            with pytest.raises(kova.TurnCancelled):
                await agent.run(HISTORY, cancel=token)
    check_pairs(events)
    outcomes = {
        event.call.name: event.outcome for event in events if isinstance(event, ToolFinished)
    }
    assert outcomes == {"long_job": "cancelled", "nap": "success"}
    assert isinstance(events[-1], TurnFinished)
    assert events[-1].outcome == "cancelled"


async def test_leaving_a_stream_early_cancels_its_spans() -> None:
    provider = ScriptedProvider([StreamReply(response=reply_text("a b c d"), chunk_chars=2)])
    events: list[TelemetryEvent] = []
    async with AgentBuilder().provider(provider).build() as agent:
        agent.telemetry.subscribe(events.append)
        async with agent.stream(HISTORY) as stream:
            async for _ in stream:
                break
    check_pairs(events)
    assert [event.outcome for event in events if isinstance(event, ModelCallFinished)] == [
        "cancelled"
    ]
    assert isinstance(events[-1], TurnFinished)
    assert events[-1].outcome == "cancelled"


async def test_failed_turn_reports_the_error_type(autojump_clock: trio.testing.MockClock) -> None:
    provider = ScriptedProvider([ErrorReply(status_code=400)])
    events: list[TelemetryEvent] = []
    async with AgentBuilder().provider(provider).build() as agent:
        agent.telemetry.subscribe(events.append)
        with pytest.raises(kova.ProviderError):
            await agent.run(HISTORY)
    check_pairs(events)
    finished = events[-1]
    assert isinstance(finished, TurnFinished)
    assert finished.outcome == "error"
    assert finished.error_type == "InvalidRequest"


async def test_nobody_listening_emits_nothing_and_subscribing_later_works() -> None:
    hub = TelemetryHub()
    assert not hub.listening
    assert hub.emitter() is None
    provider = ScriptedProvider([reply_text("one"), reply_text("two"), reply_text("three")])
    events: list[TelemetryEvent] = []
    async with AgentBuilder().provider(provider).telemetry(hub).build() as agent:
        await agent.run(HISTORY)
        with hub.subscribe(events.append) as subscription:
            assert hub.listening
            await agent.run(HISTORY)
        assert not subscription.active
        await agent.run(HISTORY)
    assert len([e for e in events if isinstance(e, TurnStarted)]) == 1
    assert not hub.listening


async def test_a_failing_subscriber_changes_nothing() -> None:
    def broken(event: TelemetryEvent) -> None:
        raise RuntimeError("bad subscriber")

    events: list[TelemetryEvent] = []
    provider = ScriptedProvider([reply_text("fine")])
    async with AgentBuilder().provider(provider).build() as agent:
        agent.telemetry.subscribe(broken)
        agent.telemetry.subscribe(events.append)
        response = await agent.run(HISTORY)
    assert response.text == "fine"
    assert len(events) == 4


def test_subscribe_rejects_what_cannot_receive() -> None:
    with pytest.raises(TypeError, match="on_event"):
        TelemetryHub().subscribe(42)  # type: ignore[arg-type]


async def test_stream_hands_events_to_a_task_and_never_blocks_the_turn() -> None:
    hub = TelemetryHub()
    provider = ScriptedProvider([reply_text("x")] * 3)
    received: list[TelemetryEvent] = []
    async with AgentBuilder().provider(provider).telemetry(hub).build() as agent:
        async with hub.stream(buffer=2) as events:
            for _ in range(3):
                await agent.run(HISTORY)  # 12 events, nobody reading: 10 dropped
            async for event in events:
                received.append(event)
                if len(received) == 2:
                    break
    assert [type(event) for event in received] == [TurnStarted, ModelCallStarted]
    with pytest.raises(ValueError, match="buffer"):
        async with hub.stream(buffer=0):
            pass


async def test_metrics_collector_is_a_subscriber(autojump_clock: trio.testing.MockClock) -> None:
    provider = ScriptedProvider(
        [
            ErrorReply(status_code=503),
            reply_tool_calls(("nap", {"seconds": 2})),
            reply_text("ok", usage=Usage(input_tokens=3, output_tokens=4)),
        ]
    )
    async with open_metrics() as metrics:
        async with AgentBuilder().provider(provider).tool(nap).metrics(metrics).build() as agent:
            await agent.run(HISTORY)
        snapshot = await metrics.snapshot()
    assert snapshot.llm_request_count == 2
    assert snapshot.error_count == 1
    assert snapshot.total_tokens > 7
    assert snapshot.tool_duration_ms.max == pytest.approx(2000.0)
    assert isinstance(MetricsSubscriber(metrics), kova.telemetry.Subscriber)


async def test_supervisor_reports_restarts_and_give_ups(
    autojump_clock: trio.testing.MockClock,
) -> None:
    hub = TelemetryHub()
    events: list[TelemetryEvent] = []
    hub.subscribe(events.append)

    class Flaky(Actor):
        async def handle_cast(self, message: object) -> None:
            raise RuntimeError("flaky")

    with pytest.raises(BaseExceptionGroup):
        async with open_runtime(max_restarts=2, within=100.0, telemetry=hub) as runtime:
            ref = await runtime.spawn(Flaky, name="flaky")
            for _ in range(5):
                with contextlib.suppress(kova.MailboxClosed, trio.WouldBlock):
                    ref.cast("boom")
                await trio.sleep(10)
    restarts = [event for event in events if isinstance(event, ActorRestarted)]
    gave_up = [event for event in events if isinstance(event, SupervisorGaveUp)]
    assert [event.restarts for event in restarts] == [1, 2]
    assert len(gave_up) == 1
    assert gave_up[0].actor == "flaky"
    assert gave_up[0].error_type == "RuntimeError"


async def test_tool_finished_carries_the_approval_outcome_and_result() -> None:
    provider = ScriptedProvider(
        [
            reply_tool_calls(("nap", {"seconds": 0}), ("nap", {"seconds": 1})),
            reply_text("done"),
        ]
    )
    events: list[TelemetryEvent] = []

    def approve(call: kova.ToolUse) -> bool | str:
        return call.input["seconds"] == 0 or "too long"

    async with (
        AgentBuilder().provider(provider).tool(nap).approval_handler(approve).build() as agent
    ):
        agent.telemetry.subscribe(events.append)
        await agent.run(HISTORY)
    finished = sorted(
        (event for event in events if isinstance(event, ToolFinished)), key=lambda e: e.call.id
    )
    assert [(e.outcome, e.approved) for e in finished] == [("success", True), ("denied", False)]
    assert finished[0].result is not None
    assert finished[0].result.text == "rested"
    assert finished[0].duration is not None
    assert finished[1].duration is None
    assert finished[1].error is not None
    assert "too long" in finished[1].error
    check_pairs(events)


async def test_agents_sharing_a_hub_keep_their_own_metrics() -> None:
    hub = TelemetryHub()
    events: list[TelemetryEvent] = []
    hub.subscribe(events.append)
    async with open_metrics() as first_metrics, open_metrics() as second_metrics:
        first = AgentBuilder().provider(ScriptedProvider([reply_text("a")]))
        second = AgentBuilder().provider(ScriptedProvider([reply_text("b"), reply_text("c")]))
        async with (
            first.telemetry(hub).metrics(first_metrics).name("first").build() as one,
            second.telemetry(hub).metrics(second_metrics).name("second").build() as two,
        ):
            await one.run(HISTORY)
            await two.run(HISTORY)
            await two.run(HISTORY)
        assert (await first_metrics.snapshot()).llm_request_count == 1
        assert (await second_metrics.snapshot()).llm_request_count == 2
    agents = [event.agent for event in events if isinstance(event, TurnStarted)]
    assert agents == ["first", "second", "second"]


async def test_an_async_lifecycle_hook_is_a_subscriber_the_tool_call_waits_for(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The hook's adapter hears ToolExecutionStarted and ToolFinished; the call awaits what
    it returns, so the tool starts after on_tool_start and the turn returns after
    on_tool_end. A denied call never executes: no event, no hook."""
    seen: list[tuple[object, ...]] = []

    class SlowHook:
        async def on_tool_start(self, call: kova.ToolUse) -> None:
            await trio.sleep(1)
            seen.append(("start", call.id, trio.current_time()))

        async def on_tool_end(
            self, call: kova.ToolUse, result: kova.ToolResult, *, duration: float, outcome: object
        ) -> None:
            await trio.sleep(1)
            seen.append(("end", call.id, trio.current_time(), duration, outcome, result.text))

    provider = ScriptedProvider(
        [reply_tool_calls(("nap", {"seconds": 2}), ("nap", {"seconds": 5})), reply_text("ok")]
    )
    events: list[TelemetryEvent] = []
    async with (
        AgentBuilder()
        .provider(provider)
        .tool(nap)
        .approval_handler(lambda call: call.input["seconds"] == 2 or "no")
        .lifecycle_hook(SlowHook())
        .build() as agent
    ):
        agent.telemetry.subscribe(events.append)
        await agent.run(HISTORY)
        assert trio.current_time() == 4.0  # 1 s on_tool_start, 2 s nap, 1 s on_tool_end
    assert seen == [
        ("start", "call_1", 1.0),
        ("end", "call_1", 4.0, 2.0, ToolOutcome.SUCCESS, "rested"),
    ]
    executing = [event for event in events if isinstance(event, ToolExecutionStarted)]
    started = [event for event in events if isinstance(event, ToolStarted)]
    assert [(event.call.id, event.time) for event in executing] == [("call_1", 0.0)]
    assert executing[0].span_id == next(e.span_id for e in started if e.call.id == "call_1")
    check_pairs(events)


async def test_a_lifecycle_subscriber_serves_a_hook_from_a_shared_hub() -> None:
    seen: list[str] = []

    class Hook:
        def on_tool_start(self, call: kova.ToolUse) -> None:
            seen.append(f"start {call.name}")

        def on_tool_end(self, call: kova.ToolUse, result: kova.ToolResult, **_: object) -> None:
            seen.append(f"end {result.text}")

    hub = TelemetryHub()
    provider = ScriptedProvider([reply_tool_calls(("nap", {"seconds": 0})), reply_text("ok")])
    with hub.subscribe(LifecycleSubscriber(Hook())):
        async with AgentBuilder().provider(provider).tool(nap).telemetry(hub).build() as agent:
            await agent.run(HISTORY)
    assert seen == ["start nap", "end rested"]
    with pytest.raises(TypeError, match="needs on_tool_start and on_tool_end"):
        LifecycleSubscriber(object())  # type: ignore[arg-type]


async def test_an_async_subscriber_is_awaited_only_where_the_call_can_wait() -> None:
    ran: list[str] = []

    async def on_event(event: TelemetryEvent) -> None:
        ran.append(type(event).__name__)

    provider = ScriptedProvider([reply_tool_calls(("nap", {"seconds": 0})), reply_text("ok")])
    with structlog.testing.capture_logs() as logs:
        async with AgentBuilder().provider(provider).tool(nap).build() as agent:
            agent.telemetry.subscribe(on_event)
            response = await agent.run(HISTORY)
    assert response.text == "ok"
    assert ran == ["ToolExecutionStarted", "ToolFinished"]
    not_awaited = [
        e["event_type"] for e in logs if e["event"] == "telemetry.subscriber.not_awaited"
    ]
    assert not_awaited == [
        "TurnStarted",
        "ModelCallStarted",
        "ModelCallFinished",
        "ToolStarted",
        "ModelCallStarted",
        "ModelCallFinished",
        "TurnFinished",
    ]


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_subscriber_that_calls_sys_exit_changes_nothing(streamed: bool) -> None:
    # Before: a subscriber's SystemExit (sys.exit() in an observer) went through the turn
    # into the caller, and out of the program; Exception alone was contained.
    seen: list[str] = []

    def exits(event: object) -> None:
        seen.append(type(event).__name__)
        raise SystemExit(3)

    provider = ScriptedProvider([reply_text("one"), reply_text("two")])
    with structlog.testing.capture_logs() as logs:
        async with AgentBuilder().provider(provider).build() as agent:
            agent.telemetry.subscribe(exits)
            for expected in ("one", "two"):
                if streamed:
                    async with agent.stream("hi") as events:
                        texts = [e.text async for e in events if hasattr(e, "text")]
                    assert "".join(texts) == expected
                else:
                    assert (await agent.run("hi")).text == expected
    assert seen.count("TurnFinished") == 2
    failed = [entry for entry in logs if entry["event"] == "telemetry.subscriber.failed"]
    assert failed
    assert all(entry["error"] == "SystemExit(3)" for entry in failed)


class _Stuck:
    """A lifecycle hook whose async methods never return (one of them, or both)."""

    def __init__(self, where: str) -> None:
        self.where = where

    async def on_tool_start(self, call: kova.ToolUse) -> None:
        if self.where in ("start", "both"):
            await trio.sleep_forever()

    async def on_tool_end(self, call: kova.ToolUse, result: kova.ToolResult, **_: object) -> None:
        if self.where in ("end", "both"):
            await trio.sleep_forever()


@pytest.mark.parametrize(("where", "ends_at"), [("start", 32.0), ("end", 32.0), ("both", 62.0)])
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "stream"])
async def test_a_lifecycle_hook_that_never_returns_is_given_up_after_its_deadline(
    autojump_clock: trio.testing.MockClock, where: str, ends_at: float, streamed: bool
) -> None:
    """Issue 43 item 7: the turn hung forever. Each await of the hook is cancelled after the
    hub's await_timeout (30 s by default), logged, and the call goes on with its result."""
    provider = ScriptedProvider([reply_tool_calls(("nap", {"seconds": 2})), reply_text("ok")])
    builder = AgentBuilder().provider(provider).tool(nap).lifecycle_hook(_Stuck(where))
    with structlog.testing.capture_logs() as logs:
        async with builder.build() as agent:
            with trio.fail_after(1000):
                if streamed:
                    async with agent.stream(HISTORY) as events:
                        last = [event async for event in events][-1]
                    response = last.response  # type: ignore[attr-defined]
                else:
                    response = await agent.run(HISTORY)
            assert trio.current_time() == ends_at
    assert response.text == "ok"
    (result,) = response.new_messages[1].content
    assert result.content == "rested"
    timed_out = [e["event_type"] for e in logs if e["event"] == "telemetry.subscriber.timed_out"]
    expected = {"start": ["ToolExecutionStarted"], "end": ["ToolFinished"]}
    assert timed_out == expected.get(where, ["ToolExecutionStarted", "ToolFinished"])


async def test_an_async_subscriber_s_deadline_is_the_hub_s(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def stuck(event: TelemetryEvent) -> None:
        await trio.sleep_forever()

    hub = TelemetryHub(await_timeout=1.5)
    hub.subscribe(stuck)
    provider = ScriptedProvider([reply_tool_calls(("nap", {"seconds": 0})), reply_text("ok")])
    async with AgentBuilder().provider(provider).tool(nap).telemetry(hub).build() as agent:
        assert (await agent.run(HISTORY)).text == "ok"
        assert trio.current_time() == 3.0  # ToolExecutionStarted and ToolFinished, 1.5 s each
    with pytest.raises(kova.ConfigError, match="await_timeout"):
        TelemetryHub(await_timeout=float("nan"))
