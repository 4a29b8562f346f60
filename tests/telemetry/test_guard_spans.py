"""Guards in telemetry (issue 50): each check is a GuardStarted / GuardFinished pair under
its turn, and an OpenTelemetry span ``guard {name}``."""

from __future__ import annotations

import pytest
import trio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from kova.agent import AgentBuilder, Deny, InputGuard, OutputGuard, ToolGuard, Trip
from kova.errors import GuardrailTripped
from kova.telemetry import GuardFinished, GuardStarted, TurnStarted
from kova.telemetry.otel import OtelSubscriber
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import tool


@tool
def remove(path: str) -> str:
    """Remove a file."""
    return "removed"


async def _slow_pass(text: str) -> None:
    await trio.sleep(0.05)


async def _slow_trip(text: str) -> Trip:
    await trio.sleep(0.05)
    return Trip("off topic")


async def _slow_pass_later(text: str) -> None:
    await trio.sleep(1)


async def test_every_check_is_a_span_of_its_turn(autojump_clock):
    provider = ScriptedProvider(
        [reply_tool_calls(("remove", {"path": "/etc"})), reply_text("no")], latency=0.2
    )
    agent = (
        AgentBuilder()
        .provider(provider)
        .tool(remove)
        .guards(
            InputGuard(_slow_pass, name="topic"),
            ToolGuard(lambda call: Deny("system path"), name="paths"),
            OutputGuard(lambda text: None, name="tone"),
        )
        .build()
    )
    events: list[object] = []
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with agent:
        agent.telemetry.subscribe(events.append)
        agent.telemetry.subscribe(OtelSubscriber(tracer_provider=tracer_provider))
        await agent.run("clean up")
    turn = next(e for e in events if isinstance(e, TurnStarted))
    started = {e.span_id: e for e in events if isinstance(e, GuardStarted)}
    finished = {e.span_id: e for e in events if isinstance(e, GuardFinished)}
    assert started.keys() == finished.keys()
    assert all(e.parent_id == turn.turn_id for e in started.values())
    seen = sorted(
        (started[span].guard, started[span].kind, finished[span].outcome) for span in started
    )
    assert seen == [
        ("paths", "tool", "deny"),
        ("tone", "output", "pass"),
        ("topic", "input", "pass"),
    ]
    topic = next(span for span in started if started[span].guard == "topic")
    assert finished[topic].time - started[topic].time == pytest.approx(0.05)  # beside the model
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert spans["guard topic"].parent is not None
    assert spans["guard topic"].parent.span_id == spans["invoke_agent kova"].context.span_id
    assert spans["guard paths"].attributes["kova.guard.outcome"] == "deny"
    assert spans["guard paths"].attributes["gen_ai.tool.call.id"]
    assert spans["guard paths"].status.status_code is not StatusCode.ERROR


async def test_a_trip_is_an_error_span_and_a_guard_cut_short_is_cancelled(autojump_clock):
    agent = (
        AgentBuilder()
        .provider(ScriptedProvider([reply_text("hi")], latency=0.2))
        .guards(
            InputGuard(_slow_trip, name="topic"),
            InputGuard(_slow_pass_later, name="slow"),
        )
        .build()
    )
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with agent:
        agent.telemetry.subscribe(OtelSubscriber(tracer_provider=tracer_provider))
        with pytest.raises(GuardrailTripped):
            await agent.run("hello")
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert spans["guard topic"].attributes["kova.guard.outcome"] == "trip"
    assert spans["guard topic"].attributes["error.type"] == "GuardrailTripped"
    assert spans["guard slow"].attributes["kova.guard.outcome"] == "cancelled"
    assert spans["guard slow"].status.status_code is StatusCode.ERROR
