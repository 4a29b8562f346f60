"""OpenTelemetry spans and metrics of a turn, checked with the SDK's in-memory exporter."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing
from mcp.server.mcpserver import MCPServer
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import kova
from kova import InferenceConfig, Message, Usage
from kova.actors import Actor, open_runtime
from kova.agent import AgentBuilder, CancelToken, RetryConfig
from kova.mcp import InProcessTransport, McpClient
from kova.telemetry import TelemetryHub
from kova.telemetry.otel import OtelSubscriber, observe_mailboxes
from kova.testing import ErrorReply, ScriptedProvider, StreamReply, reply_text, reply_tool_calls
from kova.tools import tool

if TYPE_CHECKING:
    from collections.abc import Iterator

    from opentelemetry.sdk.trace import ReadableSpan

HISTORY = (Message.user("weather and a nap?"),)
INFERENCE = InferenceConfig(model="test-model", max_tokens=256, temperature=0.5)


@tool
async def nap(seconds: float) -> str:
    """Sleep.

    Args:
        seconds: how long.
    """
    await trio.sleep(seconds)
    return "rested"


def weather_server() -> MCPServer:
    server = MCPServer("north")

    @server.tool()
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"{city}: -3°C"

    return server


class Otel:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.subscriber = OtelSubscriber(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider
        )

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def metrics(self) -> dict[str, list[object]]:
        data = self.reader.get_metrics_data()
        found: dict[str, list[object]] = {}
        assert data is not None
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found.setdefault(metric.name, []).extend(metric.data.data_points)
        return found


@pytest.fixture
def otel() -> Iterator[Otel]:
    telemetry = Otel()
    yield telemetry
    telemetry.tracer_provider.shutdown()
    telemetry.meter_provider.shutdown()


def tree(spans: list[ReadableSpan]) -> list[str]:
    """The spans as an indented outline (children sorted by name)."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {span.context.span_id for span in spans if span.context is not None}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent if parent in ids else None, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(by_parent.get(parent, []), key=lambda s: s.name):
            lines.append("  " * depth + span.name)
            assert span.context is not None
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines


def named(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    (span,) = [span for span in spans if span.name == name]
    return span


async def test_turn_with_two_parallel_tools_and_an_mcp_call(otel: Otel) -> None:
    provider = ScriptedProvider(
        [
            reply_tool_calls(
                ("nap", {"seconds": 0}),
                ("north__get_weather", {"city": "Oslo"}),
                usage=Usage(input_tokens=10, output_tokens=4),
            ),
            reply_text("Oslo is cold; I rested.", usage=Usage(input_tokens=30, output_tokens=8)),
        ]
    )
    async with McpClient.connect(InProcessTransport(weather_server())) as north:
        builder = AgentBuilder().provider(provider).tool(nap).inference_config(INFERENCE)
        await builder.mcp_client(north, "north")
        async with builder.name("weather-agent").build() as agent:
            agent.telemetry.subscribe(otel.subscriber)
            await agent.run(HISTORY)
    spans = otel.spans()
    assert tree(spans) == [
        "invoke_agent weather-agent",
        "  chat test-model",
        "  chat test-model",
        "  execute_tool nap",
        "  execute_tool north__get_weather",
        "    tools/call get_weather",
    ]
    assert len({span.context.trace_id for span in spans if span.context}) == 1
    root = named(spans, "invoke_agent weather-agent")
    assert root.attributes is not None
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "weather-agent"
    assert root.attributes["gen_ai.usage.input_tokens"] == 40
    assert root.attributes["gen_ai.usage.output_tokens"] == 12
    chats = [span for span in spans if span.name == "chat test-model"]
    first = min(chats, key=lambda span: span.start_time or 0)
    assert first.kind is SpanKind.CLIENT
    assert dict(first.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "test-model",
        "gen_ai.request.max_tokens": 256,
        "gen_ai.request.temperature": 0.5,
        "gen_ai.response.finish_reasons": ("tool_use",),
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 4,
    }
    weather = named(spans, "execute_tool north__get_weather")
    assert weather.attributes is not None
    assert weather.attributes["gen_ai.operation.name"] == "execute_tool"
    assert weather.attributes["gen_ai.tool.name"] == "north__get_weather"
    assert weather.attributes["gen_ai.tool.call.id"] == "call_2"
    assert "gen_ai.tool.call.arguments" not in weather.attributes  # no content by default
    mcp = named(spans, "tools/call get_weather")
    assert mcp.kind is SpanKind.CLIENT
    assert mcp.attributes is not None
    assert mcp.attributes["mcp.method.name"] == "tools/call"
    assert mcp.attributes["gen_ai.tool.name"] == "get_weather"
    for span in spans:
        assert span.status.status_code is StatusCode.UNSET
        assert span.end_time is not None
        assert span.start_time is not None
        assert span.start_time <= span.end_time
    metrics = otel.metrics()
    assert len(metrics["gen_ai.client.operation.duration"]) == 1  # one attribute set
    tokens = metrics["gen_ai.client.token.usage"]
    assert sorted(point.sum for point in tokens) == [12, 40]  # type: ignore[attr-defined]


async def test_retried_call_has_retry_events(
    otel: Otel, autojump_clock: trio.testing.MockClock
) -> None:
    provider = ScriptedProvider([ErrorReply(status_code=429, retry_after=3.0), reply_text("ok")])
    retry = RetryConfig(max_retries=2, initial_backoff=1.0)
    async with AgentBuilder().provider(provider).retry_config(retry).build() as agent:
        agent.telemetry.subscribe(otel.subscriber)
        await agent.run(HISTORY)
    chat = named(otel.spans(), "chat scripted")
    (retry_event,) = chat.events
    assert retry_event.name == "retry"
    assert dict(retry_event.attributes or {}) == {
        "error.type": "RateLimited",
        "kova.retry.attempt": 1,
        "kova.retry.wait": 3.0,
        "kova.error_class": "rate_limited",
    }
    assert chat.status.status_code is StatusCode.UNSET
    assert chat.end_time is not None
    assert chat.start_time is not None
    assert chat.end_time - chat.start_time == pytest.approx(3e9, rel=1e-3)


async def test_spans_start_at_their_events_time_on_trios_clock(
    otel: Otel, autojump_clock: trio.testing.MockClock
) -> None:
    provider = ScriptedProvider([reply_tool_calls(("nap", {"seconds": 5})), reply_text("rested")])
    async with AgentBuilder().provider(provider).tool(nap).build() as agent:
        agent.telemetry.subscribe(otel.subscriber)
        await agent.run(HISTORY)
    spans = otel.spans()
    tool = named(spans, "execute_tool nap")
    chats = sorted(s.start_time or 0 for s in spans if s.name == "chat scripted")
    assert tool.start_time is not None
    # The second call starts after the five virtual seconds the tool slept.
    assert chats[1] - tool.start_time == pytest.approx(5e9, abs=1e7)


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "stream"])
async def test_the_call_span_names_the_model_and_answer_that_responded(
    otel: Otel, streamed: bool
) -> None:
    """``gen_ai.response.model`` / ``gen_ai.response.id`` come from the wire (here the
    OpenAI fake's ``model`` and ``chatcmpl-...`` id), as the semantic conventions ask, and
    behind a fallback they name the provider that answered."""
    from kova.providers import FallbackProvider
    from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
    from kova.testing import open_openai_server

    async with (
        open_openai_server([ErrorReply(status_code=404)]) as first,
        open_openai_server([reply_text("hello")]) as second,
    ):
        provider = FallbackProvider(
            OpenAiCompatibleProvider(
                OpenAiConfig(model="gone-model", api_key="k", base_url=first.base_url)
            ),
            OpenAiCompatibleProvider(
                OpenAiConfig(model="gpt-answering", api_key="k", base_url=second.base_url)
            ),
        )
        async with AgentBuilder().provider(provider).build() as agent:
            agent.telemetry.subscribe(otel.subscriber)
            if streamed:
                async with agent.stream(HISTORY) as events:
                    async for _event in events:
                        pass
            else:
                await agent.run(HISTORY)
    chat = named(otel.spans(), "chat gone-model")  # the request named the primary's model
    attributes = dict(chat.attributes or {})
    assert attributes["gen_ai.response.model"] == "gpt-answering"
    assert str(attributes["gen_ai.response.id"]).startswith("chatcmpl-")
    (fallback,) = [event for event in chat.events if event.name == "fallback"]
    assert dict(fallback.attributes or {}) == {
        "kova.fallback.from": "openai",
        "kova.fallback.to": "openai",
        "error.type": "ModelNotFound",
        "kova.error_class": "not_found",
    }


async def test_failed_call_sets_error_type(
    otel: Otel, autojump_clock: trio.testing.MockClock
) -> None:
    provider = ScriptedProvider([ErrorReply(status_code=401)])
    async with AgentBuilder().provider(provider).build() as agent:
        agent.telemetry.subscribe(otel.subscriber)
        with pytest.raises(kova.ProviderError):
            await agent.run(HISTORY)
    for span in otel.spans():
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes is not None
        assert span.attributes["error.type"] == "ProviderAuthError"
    (point,) = otel.metrics()["gen_ai.client.operation.duration"]
    assert point.attributes["error.type"] == "ProviderAuthError"  # type: ignore[attr-defined]


async def test_cancelled_turn_ends_every_span_marked_cancelled(
    otel: Otel, autojump_clock: trio.testing.MockClock
) -> None:
    token = CancelToken()
    provider = ScriptedProvider([reply_tool_calls(("nap", {"seconds": 100})), reply_text("-")])
    async with AgentBuilder().provider(provider).tool(nap).build() as agent:
        agent.telemetry.subscribe(otel.subscriber)
        async with trio.open_nursery() as nursery:

            async def cancel_later() -> None:
                await trio.sleep(10)
                token.cancel()

            nursery.start_soon(cancel_later)
            with pytest.raises(kova.TurnCancelled):
                await agent.run(HISTORY, cancel=token)
    spans = otel.spans()
    assert tree(spans) == ["invoke_agent kova", "  chat scripted", "  execute_tool nap"]
    for name in ("invoke_agent kova", "execute_tool nap"):
        span = named(spans, name)
        assert span.attributes is not None
        assert span.attributes["error.type"] == "cancelled"
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "cancelled"
    assert named(spans, "chat scripted").status.status_code is StatusCode.UNSET


async def test_streamed_call_records_time_to_first_chunk(otel: Otel) -> None:
    provider = ScriptedProvider([StreamReply(response=reply_text("hello there"))])
    async with AgentBuilder().provider(provider).build() as agent:
        agent.telemetry.subscribe(otel.subscriber)
        async with agent.stream(HISTORY) as events:
            async for _ in events:
                pass
    chat = named(otel.spans(), "chat scripted")
    assert [event.name for event in chat.events] == ["gen_ai.first_chunk"]
    assert "gen_ai.client.operation.time_to_first_chunk" in otel.metrics()


async def test_the_turn_is_a_child_of_the_callers_span(otel: Otel) -> None:
    tracer = otel.tracer_provider.get_tracer("app")
    provider = ScriptedProvider([reply_text("hi")])
    async with AgentBuilder().provider(provider).build() as agent:
        agent.telemetry.subscribe(otel.subscriber)
        with tracer.start_as_current_span("request"):
            await agent.run(HISTORY)
    assert tree(otel.spans()) == ["request", "  invoke_agent kova", "    chat scripted"]


async def test_restarts_trips_and_mailbox_depth(
    otel: Otel, autojump_clock: trio.testing.MockClock
) -> None:
    hub = TelemetryHub()
    hub.subscribe(otel.subscriber)

    class Flaky(Actor):
        async def handle_cast(self, message: object) -> None:
            raise RuntimeError("flaky")

    class Idle(Actor):
        async def handle_cast(self, message: object) -> None:
            await trio.sleep_forever()

    with pytest.raises(BaseExceptionGroup):
        async with open_runtime(max_restarts=1, within=100.0, telemetry=hub) as runtime:
            observe_mailboxes(runtime, meter_provider=otel.meter_provider)
            idle = await runtime.spawn(Idle, name="idle")
            for _ in range(4):
                idle.cast("work")
            await trio.sleep(1)
            depth = {
                point.attributes["kova.actor"]: point.value  # type: ignore[attr-defined]
                for point in otel.metrics()["kova.actor.mailbox.depth"]
            }
            assert depth == {"idle": 3}  # one taken, three waiting
            flaky = await runtime.spawn(Flaky, name="flaky")
            for _ in range(3):
                flaky.cast("boom")
                await trio.sleep(10)
    metrics = otel.metrics()
    (restarts,) = metrics["kova.actor.restarts"]
    assert restarts.value == 1  # type: ignore[attr-defined]
    (trips,) = metrics["kova.supervisor.intensity_trips"]
    assert trips.value == 1  # type: ignore[attr-defined]


async def test_instrument_attaches_to_every_hub_until_uninstrumented() -> None:
    from kova.telemetry.otel import instrument, uninstrument

    otel = Otel()
    provider = ScriptedProvider([reply_text("one"), reply_text("two"), reply_text("three")])
    async with AgentBuilder().provider(provider).build() as agent:
        assert not agent.telemetry.listening
        await agent.run(HISTORY)
        assert otel.spans() == []  # nothing attached: nothing recorded

        instrument(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
        try:
            assert agent.telemetry.listening
            await agent.run(HISTORY)
            assert TelemetryHub().listening  # every hub, new ones too
        finally:
            uninstrument()
        names = sorted(span.name for span in otel.spans())
        assert names == ["chat scripted", "invoke_agent kova"]

        await agent.run(HISTORY)
        assert len(otel.spans()) == 2  # detached: the third turn recorded nothing
        assert not agent.telemetry.listening


async def test_spans_with_a_models_lone_surrogates_still_export_as_otlp(
    otel: Otel, autojump_clock: trio.testing.MockClock
) -> None:
    """A model's tool-call id or tool name may hold a lone surrogate; OTLP writes strings as
    UTF-8, and one unencodable string fails the export of the whole batch of spans."""
    from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from kova import ToolUse

    otel.subscriber = OtelSubscriber(
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        capture_content=True,
    )
    calls = (
        ToolUse(id="call_\ud800", name="nap", input={"seconds": 0}),
        ToolUse(id="\udfff", name="missing\udc80", input={}),
    )
    provider = ScriptedProvider(
        [reply_tool_calls(*calls), ErrorReply(status_code=400, error_type="bad\ud800")]
    )
    async with AgentBuilder().provider(provider).tool(nap).build() as agent:
        agent.telemetry.subscribe(otel.subscriber)
        with pytest.raises(kova.ProviderError):
            await agent.run(HISTORY)
    spans = otel.spans()
    names = sorted(span.name for span in spans)
    assert names == [
        "chat scripted",
        "chat scripted",
        "execute_tool missing\\udc80",
        "execute_tool nap",
        "invoke_agent kova",
    ]
    ids = sorted(
        str(span.attributes["gen_ai.tool.call.id"])
        for span in spans
        if span.attributes is not None and "gen_ai.tool.call.id" in span.attributes
    )
    assert ids == ["\\udfff", "call_\\ud800"]
    assert encode_spans(spans).SerializeToString()  # the whole batch exports
    data = otel.reader.get_metrics_data()
    assert data is not None
    assert encode_metrics(data).SerializeToString()


async def test_a_setting_the_call_does_not_have_is_no_attribute(
    otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    # No model, max_tokens or temperature: those attributes are left out, not given as None
    # (which OpenTelemetry refuses with a warning per attribute).
    provider = ScriptedProvider([reply_text("hi")])
    with caplog.at_level("WARNING"):
        async with AgentBuilder().provider(provider).build() as agent:
            agent.telemetry.subscribe(otel.subscriber)
            await agent.run(HISTORY)
    (chat,) = [span for span in otel.spans() if span.name.startswith("chat")]
    assert not {"gen_ai.request.max_tokens", "gen_ai.request.temperature"} & set(
        chat.attributes or {}
    )
    assert [
        record.getMessage() for record in caplog.records if "Invalid type" in record.getMessage()
    ] == []
