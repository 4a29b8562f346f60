"""The OpenTelemetry subscriber behind :mod:`kova.telemetry.otel` (see its docstring)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, assert_never

import trio

# ruff: noqa: E402 (the extra is checked before the imports that need it)
from .._extras import require_extra as _require_extra

_require_extra("otel", "kova.telemetry.otel")

from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from .._json import escape_surrogates
from .._observe import (
    ActorRestarted,
    GuardFinished,
    GuardStarted,
    McpRequestFinished,
    McpRequestStarted,
    ModelCallFallback,
    ModelCallFinished,
    ModelCallRetrying,
    ModelCallStarted,
    ModelFirstToken,
    SupervisorGaveUp,
    TelemetryEvent,
    ToolExecutionStarted,
    ToolFinished,
    ToolStarted,
    TurnFinished,
    TurnStarted,
    attach_process_subscriber,
    detach_process_subscriber,
)

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Span, TracerProvider

    from ..actors import Runtime

__all__ = ["OtelSubscriber", "PROVIDER_NAMES", "instrument", "observe_mailboxes", "uninstrument"]

PROVIDER_NAMES = {
    "anthropic": "anthropic",
    "openai": "openai",
    "gemini": "gcp.gemini",
    "bedrock": "aws.bedrock",
    "ollama": "ollama",
}
"""kova provider names -> ``gen_ai.provider.name`` values (others pass through)."""

_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48)
_TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)


class OtelSubscriber:
    """Spans and metrics from kova's event stream.

    Args:
        tracer_provider: where spans go (default: the global one).
        meter_provider: where metrics go (default: the global one).
        capture_content: also record tool arguments and results (off: they may hold
            private data).

    Metrics: ``gen_ai.client.operation.duration`` (s), ``gen_ai.client.token.usage``
    ({token}, by ``gen_ai.token.type``), ``gen_ai.client.operation.time_to_first_chunk`` (s,
    streamed calls), ``kova.client.cost`` (USD of the calls kova could price, docs/cost.md),
    ``kova.actor.restarts`` and ``kova.supervisor.intensity_trips`` (counters). Mailbox
    depth is an observable gauge registered by :func:`observe_mailboxes`.
    """

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_content: bool = False,
    ) -> None:
        from .. import __version__

        self._tracer = trace.get_tracer("kova", __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter("kova", __version__, meter_provider=meter_provider)
        self._meter = meter
        self._capture = capture_content
        self._spans: dict[int, Span] = {}
        """Open spans by event span id (a turn's by its turn id): bounded by what runs."""
        self._turns: dict[int, tuple[int, str, str | None]] = {}
        """turn id -> (clock offset in ns, provider name, model), while the turn runs."""
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self._first_chunk = meter.create_histogram(
            "gen_ai.client.operation.time_to_first_chunk",
            unit="s",
            description="Time to receive the first chunk of a streamed response.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self._restarts = meter.create_counter(
            "kova.actor.restarts", unit="{restart}", description="Actor restarts."
        )
        self._cost = meter.create_counter(
            "kova.client.cost", unit="USD", description="What priced model calls cost."
        )
        self._trips = meter.create_counter(
            "kova.supervisor.intensity_trips",
            unit="{trip}",
            description="Supervisors that exceeded their restart intensity and gave up.",
        )

    @property
    def meter(self) -> Any:
        """The meter kova's instruments belong to (``Any``: the OpenTelemetry type)."""
        return self._meter

    def on_event(self, event: TelemetryEvent) -> None:
        """Turn one event into span and metric updates."""
        match event:
            case TurnStarted():
                self._turn_started(event)
            case TurnFinished():
                self._turn_finished(event)
            case ModelCallStarted():
                self._call_started(event)
            case ModelFirstToken(span_id=span_id, latency=latency, turn_id=turn_id):
                span = self._spans.get(span_id)
                if span is not None:
                    span.add_event(
                        "gen_ai.first_chunk",
                        {"gen_ai.response.time_to_first_chunk": latency},
                        timestamp=self._ns(turn_id, event.time),
                    )
                self._first_chunk.record(latency, _clean(self._call_attributes(turn_id)))
            case ModelCallRetrying():
                span = self._spans.get(event.span_id)
                if span is not None:
                    attributes: dict[str, Any] = {
                        "error.type": event.error_type,
                        "kova.retry.attempt": event.attempt,
                        "kova.retry.wait": event.wait,
                        "kova.error_class": event.error_class,
                    }
                    span.add_event(
                        "retry", _clean(attributes), timestamp=self._ns(event.turn_id, event.time)
                    )
            case ModelCallFallback():
                span = self._spans.get(event.span_id)
                if span is not None:
                    fallback: dict[str, Any] = {
                        "kova.fallback.from": event.from_provider,
                        "kova.fallback.to": event.to_provider,
                        "error.type": event.error_type,
                        "kova.error_class": event.error_class,
                    }
                    span.add_event(
                        "fallback", _clean(fallback), timestamp=self._ns(event.turn_id, event.time)
                    )
            case ModelCallFinished():
                self._call_finished(event)
            case ToolStarted():
                self._tool_started(event)
            case ToolExecutionStarted():
                pass  # inside the tool call's span, which ToolStarted opened
            case ToolFinished():
                self._tool_finished(event)
            case GuardStarted():
                self._guard_started(event)
            case GuardFinished():
                self._guard_finished(event)
            case McpRequestStarted():
                self._mcp_started(event)
            case McpRequestFinished():
                span = self._spans.pop(event.span_id, None)
                if span is not None:
                    _end(span, event.outcome, event.error_type, self._ns(event.turn_id, event.time))
            case ActorRestarted(supervisor=supervisor, actor=actor):
                self._restarts.add(1, _clean({"kova.supervisor": supervisor, "kova.actor": actor}))
            case SupervisorGaveUp(supervisor=supervisor, actor=actor):
                self._trips.add(1, _clean({"kova.supervisor": supervisor, "kova.actor": actor}))
            case _:
                assert_never(event)

    # -- spans ----------------------------------------------------------------------------

    def _ns(self, turn_id: int, at: float) -> int:
        turn = self._turns.get(turn_id)
        offset = turn[0] if turn is not None else _offset()
        return offset + int(at * 1e9)

    def _start(
        self,
        event: TurnStarted | ModelCallStarted | ToolStarted | GuardStarted | McpRequestStarted,
        key: int,
        name: str,
        kind: SpanKind,
        attributes: dict[str, Any],
    ) -> None:
        """Start the span of ``event``, kept under ``key``: a child of the span of its
        ``parent_id`` (none for a turn without one: the caller's current span is its parent)."""
        parent = None if event.parent_id is None else self._spans.get(event.parent_id)
        self._spans[key] = self._tracer.start_span(
            _text(name),
            context=None if parent is None else trace.set_span_in_context(parent),
            kind=kind,
            attributes=_clean(attributes),
            start_time=self._ns(event.turn_id, event.time),
        )

    def _turn_started(self, event: TurnStarted) -> None:
        provider = PROVIDER_NAMES.get(event.provider, event.provider)
        self._turns[event.turn_id] = (_offset(), provider, event.model)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": event.agent,
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": event.model,
        }
        # The turn runs in the caller's task: its current span (if any) is the parent; an
        # agent run as a tool belongs to its tool call (in the tool pool's task).
        self._start(
            event, event.turn_id, f"invoke_agent {event.agent}", SpanKind.INTERNAL, attributes
        )

    def _turn_finished(self, event: TurnFinished) -> None:
        span = self._spans.pop(event.turn_id, None)
        end = self._ns(event.turn_id, event.time)
        self._turns.pop(event.turn_id, None)
        if span is None:
            return
        if event.usage is not None:
            span.set_attribute("gen_ai.usage.input_tokens", event.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", event.usage.output_tokens)
            if event.usage.cost is not None:  # the GenAI conventions have no cost attribute
                span.set_attribute("kova.cost", float(event.usage.cost))
        span.set_attribute("kova.llm_calls", event.llm_calls)
        _end(span, event.outcome, event.error_type, end)

    def _call_attributes(self, turn_id: int) -> dict[str, Any]:
        turn = self._turns.get(turn_id)
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat"}
        if turn is not None:
            attributes["gen_ai.provider.name"] = turn[1]
            attributes["gen_ai.request.model"] = turn[2]
        return attributes

    def _call_started(self, event: ModelCallStarted) -> None:
        attributes = self._call_attributes(event.turn_id)
        attributes["gen_ai.provider.name"] = PROVIDER_NAMES.get(event.provider, event.provider)
        if event.model is not None:
            attributes["gen_ai.request.model"] = event.model
        attributes["gen_ai.request.max_tokens"] = event.max_tokens
        attributes["gen_ai.request.temperature"] = event.temperature
        name = f"chat {event.model}" if event.model else "chat"
        self._start(event, event.span_id, name, SpanKind.CLIENT, attributes)

    def _call_finished(self, event: ModelCallFinished) -> None:
        span = self._spans.pop(event.span_id, None)
        attributes = self._call_attributes(event.turn_id)
        attributes["gen_ai.response.model"] = event.response_model
        if event.outcome != "ok":
            attributes["error.type"] = event.error_type or event.outcome
        self._duration.record(event.latency, _clean(attributes))
        if event.usage is not None:
            self._tokens.record(
                event.usage.input_tokens, _clean({**attributes, "gen_ai.token.type": "input"})
            )
            self._tokens.record(
                event.usage.output_tokens, _clean({**attributes, "gen_ai.token.type": "output"})
            )
            if event.usage.cost is not None:  # USD of the calls kova could price
                self._cost.add(float(event.usage.cost), _clean(attributes))
        if span is None:
            return
        if event.stop_reason is not None:
            span.set_attribute("gen_ai.response.finish_reasons", (_text(event.stop_reason),))
        if event.response_model is not None:
            span.set_attribute("gen_ai.response.model", _text(event.response_model))
        if event.response_id is not None:
            span.set_attribute("gen_ai.response.id", _text(event.response_id))
        if event.usage is not None:
            span.set_attribute("gen_ai.usage.input_tokens", event.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", event.usage.output_tokens)
            if event.usage.cost is not None:  # USD, as float: OTel has no decimal type
                span.set_attribute("kova.cost", float(event.usage.cost))
        _end(span, event.outcome, event.error_type, self._ns(event.turn_id, event.time))

    def _tool_started(self, event: ToolStarted) -> None:
        call = event.call
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        if self._capture:
            import json

            attributes["gen_ai.tool.call.arguments"] = json.dumps(call.input)
        self._start(
            event, event.span_id, f"execute_tool {call.name}", SpanKind.INTERNAL, attributes
        )

    def _tool_finished(self, event: ToolFinished) -> None:
        span = self._spans.pop(event.span_id, None)
        if span is None:
            return
        span.set_attribute("kova.tool.outcome", event.outcome)
        if event.approved is not None:
            span.set_attribute("kova.tool.approved", event.approved)
        if self._capture and event.error is not None:
            span.set_attribute("gen_ai.tool.call.result", _text(event.error))
        end = self._ns(event.turn_id, event.time)
        match event.outcome:
            case "success" | "deferred":
                _end(span, "ok", None, end)
            case "cancelled":
                _end(span, "cancelled", None, end)
            case "denied":
                _end(span, "error", "denied", end)
            case _:
                _end(span, "error", "tool_error", end)

    def _guard_started(self, event: GuardStarted) -> None:
        attributes: dict[str, Any] = {
            "kova.guard.name": event.guard,
            "kova.guard.kind": event.kind,
        }
        if event.call_id:
            attributes["gen_ai.tool.call.id"] = event.call_id
        self._start(event, event.span_id, f"guard {event.guard}", SpanKind.INTERNAL, attributes)

    def _guard_finished(self, event: GuardFinished) -> None:
        span = self._spans.pop(event.span_id, None)
        if span is None:
            return
        span.set_attribute("kova.guard.outcome", event.outcome)
        if self._capture and event.reason is not None:  # the guard's words: content
            span.set_attribute("kova.guard.reason", _text(event.reason))
        end = self._ns(event.turn_id, event.time)
        match event.outcome:
            case "pass" | "deny":  # a denial is the guard working: the turn goes on
                _end(span, "ok", None, end)
            case "trip":
                _end(span, "error", "GuardrailTripped", end)
            case "cancelled":
                _end(span, "cancelled", None, end)
            case _:
                _end(span, "error", event.error_type, end)

    def _mcp_started(self, event: McpRequestStarted) -> None:
        attributes: dict[str, Any] = {
            "mcp.method.name": event.method,
            "kova.mcp.connection": event.connection,
        }
        if event.target is not None:
            if event.method == "tools/call":
                attributes["gen_ai.tool.name"] = event.target
                attributes["gen_ai.operation.name"] = "execute_tool"
            elif event.method == "prompts/get":
                attributes["gen_ai.prompt.name"] = event.target
            elif event.method.startswith("resources/"):
                attributes["mcp.resource.uri"] = event.target
        name = event.method if event.target is None else f"{event.method} {event.target}"
        self._start(event, event.span_id, name, SpanKind.CLIENT, attributes)


def _text(value: str) -> str:
    """``value`` as text an exporter can encode: a lone surrogate (a model's tool-call id or
    tool name, a server's model name) as its ``\\uXXXX`` escape. OTLP writes strings as
    UTF-8, and one unencodable string fails the export of the whole batch of spans."""
    if value.isascii():
        return value
    try:
        value.encode()
    except UnicodeEncodeError:
        return escape_surrogates(value)
    return value


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    """``attributes`` without those the event has no value for (``None``: OpenTelemetry has
    no null attribute), every string value made encodable (see :func:`_text`)."""
    return {
        key: _text(value) if isinstance(value, str) else value
        for key, value in attributes.items()
        if value is not None
    }


def _offset() -> int:
    """Nanoseconds from trio's clock to the epoch, now."""
    return time.time_ns() - int(trio.current_time() * 1e9)


def _end(span: Span, outcome: str, error_type: str | None, end: int) -> None:
    """End ``span``: an error or a cancellation sets ``error.type`` and an error status."""
    if outcome == "cancelled":
        span.set_attribute("error.type", "cancelled")
        span.set_status(Status(StatusCode.ERROR, "cancelled"))
    elif outcome != "ok":
        shown = None if error_type is None else _text(error_type)
        span.set_attribute("error.type", shown or "error")
        span.set_status(Status(StatusCode.ERROR, shown))
    span.end(end_time=end)


_instrumented: OtelSubscriber | None = None


def instrument(
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    capture_content: bool = False,
) -> OtelSubscriber:
    """Send every agent's telemetry in this process to OpenTelemetry, from each hub's next
    turn on: one :class:`OtelSubscriber` (arguments as there) attached to all hubs.

    Call it once at startup, after installing your tracer provider (or pass one). A second
    call replaces the first subscriber. :func:`uninstrument` detaches it.
    """
    global _instrumented
    subscriber = OtelSubscriber(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_content=capture_content,
    )
    uninstrument()
    attach_process_subscriber(subscriber.on_event)
    _instrumented = subscriber
    return subscriber


def uninstrument() -> None:
    """Detach what :func:`instrument` attached (idempotent)."""
    global _instrumented
    if _instrumented is not None:
        detach_process_subscriber(_instrumented.on_event)
        _instrumented = None


def observe_mailboxes(runtime: Runtime, *, meter_provider: MeterProvider | None = None) -> None:
    """Report the depth of every mailbox of ``runtime``'s children as the observable gauge
    ``kova.actor.mailbox.depth`` (``{message}``, by ``kova.actor``), read when the meter
    provider collects.

    The reading only counts queued messages (an integer read, no await); it is taken from
    whatever thread collects, which is safe for that read and nothing else.
    """
    from opentelemetry.metrics import CallbackOptions, Observation

    from .. import __version__

    supervisor = runtime.supervisor

    def depth(_options: CallbackOptions) -> list[Observation]:
        observations = []
        for name in supervisor.children:
            try:
                used = supervisor.ref(name).queued
            except KeyError:  # stopped between the two reads
                continue
            observations.append(Observation(used, {"kova.actor": name}))
        return observations

    meter = metrics.get_meter("kova", __version__, meter_provider=meter_provider)
    meter.create_observable_gauge(
        "kova.actor.mailbox.depth",
        callbacks=[depth],
        unit="{message}",
        description="Messages waiting in an actor's mailbox.",
    )
