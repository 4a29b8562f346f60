"""kova.temporal against a real Temporal server (the dev server the suite starts): turns run
as AgentWorkflow, each model call and tool call an activity of the worker in this process,
the model kova's fake OpenAI server on loopback.

Plain functions that run their own asyncio loop: Temporal's client and worker are asyncio
code, and kova runs inside the worker through kova.asyncio."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pydantic
import pytest
import trio
from temporal_helpers import builder, fake_openai, replays, run, unique
from temporalio.client import Client

import kova
import kova.errors
import kova.temporal
from kova import Message
from kova.agent import Turn
from kova.mcp import StdioTransport
from kova.testing import ErrorReply, ScriptRequest, StreamReply, reply_text, reply_tool_calls
from kova.tools import ToolContext, tool


def test_a_turn_with_parallel_tools_completes(temporal_address: str) -> None:
    running = 0
    most = 0
    keys: list[str] = []
    all_started = trio.Event()  # the tools run in the worker's one trio run

    @tool
    async def weather(city: str, ctx: ToolContext) -> str:
        """The weather in a city."""
        nonlocal running, most
        running += 1
        most = max(most, running)
        keys.append(ctx.idempotency_key)
        # Each call waits until all three have started, however late the worker gets each
        # activity: the three can only all be running if the workflow runs them at once
        # (one after another, the first would wait here in vain and most stays 1).
        if most == 3:
            all_started.set()
        with trio.move_on_after(20):
            await all_started.wait()
        running -= 1
        return f"sunny in {city}"

    def script(request: ScriptRequest) -> Any:
        if request.messages[-1].role.value == "tool":
            results = [block.text for block in request.messages[-1].content]
            return reply_text(" / ".join(results))
        return reply_tool_calls(
            ("weather", {"city": "Oslo"}),
            ("weather", {"city": "Rome"}),
            ("weather", {"city": "Lima"}),
        )

    with fake_openai(script) as base_url:

        async def main() -> Any:
            client = await Client.connect(temporal_address)
            queue = unique("parallel")
            agents = {"forecaster": builder(base_url, weather)}
            async with kova.temporal.worker(client, task_queue=queue, agents=agents):
                handle = await kova.temporal.start_turn(
                    client,
                    agent="forecaster",
                    history=[Message.user("Weather in three cities?")],
                    task_queue=queue,
                    id=unique("turn"),
                    events=True,
                )
                response = await kova.temporal.response(handle)
                return response, [event async for event in kova.temporal.events(handle)]

        response, events = run(main)
    assert response.text == "sunny in Oslo / sunny in Rome / sunny in Lima"
    assert response.llm_calls == 2
    assert [message.role.value for message in response.new_messages] == [
        "assistant",
        "tool",
        "assistant",
    ]
    assert most == 3  # the three calls ran at once (whatever the order they started in)
    assert len(set(keys)) == 3
    tool_events = [event for event in events if event.kind.startswith("tool_")]
    assert sorted((event.kind, event.call.input["city"]) for event in tool_events) == [
        ("tool_finished", "Lima"),
        ("tool_finished", "Oslo"),
        ("tool_finished", "Rome"),
        ("tool_started", "Lima"),
        ("tool_started", "Oslo"),
        ("tool_started", "Rome"),
    ]
    finished = [event for event in tool_events if event.kind == "tool_finished"]
    assert {event.result.text for event in finished} == {
        "sunny in Oslo",
        "sunny in Rome",
        "sunny in Lima",
    }
    assert {event.attempt for event in events} == {1}
    assert len({event.activity for event in tool_events}) == 3  # an activity per call


def _serve_turn(temporal_address: str, base_url: str, agents: dict[str, Any], body: Any) -> Any:
    """Run ``body(client, queue)`` with a worker for ``agents`` on a fresh task queue."""

    async def main() -> Any:
        client = await Client.connect(temporal_address)
        queue = unique("queue")
        async with kova.temporal.worker(client, task_queue=queue, agents=agents):
            return await body(client, queue)

    return run(main)


def test_a_429_is_retried_by_temporal_after_its_retry_after(temporal_address: str) -> None:
    seen: list[float] = []

    def script(request: ScriptRequest) -> Any:
        seen.append(time.monotonic())
        if len(seen) == 1:
            return ErrorReply(status_code=429, message="slow down", retry_after=1.5)
        return reply_text("fine now")

    with fake_openai(script) as base_url:
        # The agent's own policy would retry after 0.05 s, in the provider: inside an
        # activity the provider does not retry, and Temporal waits as the server asked.
        agents = {"a": builder(base_url)}

        async def body(client: Client, queue: str) -> Any:
            handle = await kova.temporal.start_turn(
                client, agent="a", history="hi", task_queue=queue, id=unique("turn")
            )
            response = await kova.temporal.response(handle)
            history = [event async for event in handle.fetch_history_events()]
            return response, history

        response, history = _serve_turn(temporal_address, base_url, agents, body)
    assert response.text == "fine now"
    assert len(seen) == 2  # one request per attempt: no retry inside the activity
    assert seen[1] - seen[0] >= 1.5
    failures = [
        event.activity_task_failed_event_attributes.failure
        for event in history
        if event.HasField("activity_task_failed_event_attributes")
    ]
    assert failures == []  # a retried attempt is not a failed activity: it only retried
    started = [
        event.activity_task_started_event_attributes
        for event in history
        if event.HasField("activity_task_started_event_attributes")
    ]
    assert max(attributes.attempt for attributes in started) == 2
    assert started[-1].last_failure.application_failure_info.type == "RateLimited"


def test_the_workers_agent_telemetry_sees_a_temporal_turn(temporal_address: str) -> None:
    """What an in-process turn emits reaches the worker's agent's telemetry subscribers:
    each model activity's call (started, first token, finished with its usage), the 429 that
    Temporal retries (ModelCallRetrying with the Retry-After, then the failed attempt's
    ModelCallFinished), each tool call's events; OpenTelemetry on the worker gets the spans
    and the token metrics."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from kova.telemetry import (
        MetricsSubscriber,
        ModelCallFinished,
        ModelCallRetrying,
        ModelCallStarted,
        ModelFirstToken,
        ToolExecutionStarted,
        ToolFinished,
        ToolStarted,
    )
    from kova.telemetry.otel import OtelSubscriber

    requests = 0

    def script(request: ScriptRequest) -> Any:
        nonlocal requests
        requests += 1
        if requests == 1:
            return ErrorReply(status_code=429, message="slow down", retry_after=0.2)
        if request.messages[-1].role.value == "tool":
            return reply_text(request.messages[-1].content[0].text)
        return reply_tool_calls(("weather", {"city": "Oslo"}))

    @tool
    async def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    class Counts:
        """What a MetricsCollector is told (MetricsSubscriber's calls)."""

        def __init__(self) -> None:
            self.requests = self.errors = self.tools = 0

        def record_llm_request(self, latency_ms: float, usage: Any = None) -> None:
            self.requests += 1

        def record_llm_error(self) -> None:
            self.errors += 1

        def record_tool_invocation(self, duration_ms: Any, outcome: Any) -> None:
            self.tools += 1

    counts = Counts()
    events: list[Any] = []
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    otel = OtelSubscriber(
        tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader])
    )
    with fake_openai(script) as base_url:
        agent = builder(base_url, weather).build()
        agent.telemetry.subscribe(events.append)
        agent.telemetry.subscribe(otel)
        agent.telemetry.subscribe(MetricsSubscriber(counts))  # type: ignore[arg-type]

        async def body(client: Client, queue: str) -> Any:
            handle = await kova.temporal.start_turn(
                client, agent="a", history="hi", task_queue=queue, id=unique("turn"), events=True
            )
            return await kova.temporal.response(handle)

        response = _serve_turn(temporal_address, base_url, {"a": agent}, body)
    assert response.text == "sunny in Oslo"
    kinds = [type(event).__name__ for event in events]
    assert kinds == [
        "ModelCallStarted",
        "ModelCallRetrying",
        "ModelCallFinished",  # the attempt Temporal retried
        "ModelCallStarted",
        "ModelFirstToken",
        "ModelCallFinished",
        "ToolStarted",
        "ToolExecutionStarted",
        "ToolFinished",
        "ModelCallStarted",
        "ModelFirstToken",
        "ModelCallFinished",
    ], kinds
    retrying = next(event for event in events if isinstance(event, ModelCallRetrying))
    assert (retrying.attempt, retrying.wait, retrying.error_type) == (1, 0.2, "RateLimited")
    assert retrying.error_class == "rate_limited"
    finished = [event for event in events if isinstance(event, ModelCallFinished)]
    assert [event.outcome for event in finished] == ["error", "ok", "ok"]
    assert finished[0].error_type == "RateLimited"
    assert [event.retried for event in finished] == [True, False, False]
    # A MetricsCollector on the worker: the failed attempt counted once, as in-process.
    assert (counts.requests, counts.errors, counts.tools) == (2, 1, 1)
    assert all(event.usage is not None and event.usage.input_tokens for event in finished[1:])
    starts = [event for event in events if isinstance(event, ModelCallStarted)]
    assert [event.span_id for event in starts] == [event.span_id for event in finished]
    assert all(event.streamed for event in starts)
    assert len([event for event in events if isinstance(event, ModelFirstToken)]) == 2
    tool_finished = next(event for event in events if isinstance(event, ToolFinished))
    assert tool_finished.outcome == "success"
    assert tool_finished.result is not None
    assert tool_finished.result.text == "sunny in Oslo"
    tool_ids = {
        event.span_id for event in events if isinstance(event, ToolStarted | ToolExecutionStarted)
    }
    assert tool_ids == {tool_finished.span_id}
    spans = sorted(span.name for span in exporter.get_finished_spans())
    assert spans == ["chat gpt-fake"] * 3 + ["execute_tool weather"]
    data = reader.get_metrics_data()
    assert data is not None
    names = {
        metric.name
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    assert {"gen_ai.client.token.usage", "gen_ai.client.operation.duration"} <= names


class Route(pydantic.BaseModel):
    route: str
    priority: int


def test_run_structured_as_one_workflow_re_asks_while_invalid(temporal_address: str) -> None:
    """kova.temporal.run_structured: the model is asked for the type's schema, an invalid
    answer is re-asked in the workflow with the problem (as Agent.run_structured does), and
    the value comes back validated with pydantic; out of retries, StructuredOutputError
    carries every attempt, as in-process."""
    seen: list[ScriptRequest] = []

    def script(request: ScriptRequest) -> Any:
        seen.append(request)
        if request.messages[0].content[0].text.startswith("never"):
            return reply_text('{"route": "billing"}')  # priority missing, every time
        if len(seen) == 1:
            return reply_tool_calls(("lookup", {"ticket": "T-1"}))
        if len(seen) == 2:
            return reply_text('{"route": "billing", "priority": "high"}')
        return reply_text(json.dumps({"route": "billing", "priority": 2}))

    @tool
    async def lookup(ticket: str) -> str:
        """Look a ticket up."""
        return f"{ticket}: invoice wrong"

    with fake_openai(script) as base_url:

        async def body(client: Client, queue: str) -> Any:
            turns = unique("turn"), unique("turn")
            value, response = await kova.temporal.run_structured(
                client,
                agent="a",
                history="route T-1",
                output=Route,
                task_queue=queue,
                id=turns[0],
            )
            with pytest.raises(kova.errors.StructuredOutputError) as caught:
                await kova.temporal.run_structured(
                    client,
                    agent="a",
                    history="never valid",
                    output=Route,
                    output_retries=1,
                    task_queue=queue,
                    id=turns[1],
                )
            for turn in turns:  # the re-asks are in their histories
                await replays(client, turn)
            with pytest.raises(TypeError, match="output"):
                await kova.temporal.run_structured(
                    client, agent="a", history="x", output=42, task_queue=queue, id="x"
                )
            return value, response, caught.value

        agents = {"a": builder(base_url, lookup).output_retries(2)}
        value, response, error = _serve_turn(temporal_address, base_url, agents, body)
    assert value == Route(route="billing", priority=2)
    assert response.output_retries == 1
    assert response.llm_calls == 3
    roles = [message.role.value for message in response.new_messages]
    assert roles == ["assistant", "tool", "assistant", "user", "assistant"]
    feedback = response.new_messages[3].content[0].text
    assert "priority" in feedback  # the problem, told to the model
    asked = seen[0].config.response_format
    assert asked is not None
    assert all(request.config.response_format == asked for request in seen)
    assert asked.name == "Route"
    assert set(asked.schema["required"]) == {"route", "priority"}  # type: ignore[arg-type]
    # Out of retries (1): two answers, both in the error with the whole turn.
    assert error.attempts == ('{"route": "billing"}', '{"route": "billing"}')
    assert error.response.output_retries == 1
    assert len(seen) == 5


def test_a_non_retryable_error_fails_the_turn_at_once(temporal_address: str) -> None:
    seen: list[ScriptRequest] = []

    def script(request: ScriptRequest) -> Any:
        seen.append(request)
        return ErrorReply(status_code=401, message="bad key")

    with fake_openai(script) as base_url:

        async def body(client: Client, queue: str) -> Any:
            with pytest.raises(kova.temporal.TurnFailedError) as caught:
                await kova.temporal.run_turn(
                    client, agent="a", history="hi", task_queue=queue, id=unique("turn")
                )
            return caught.value

        error = _serve_turn(temporal_address, base_url, {"a": builder(base_url)}, body)
    assert error.error_type == "ProviderAuthError"
    assert "bad key" in str(error)
    assert len(seen) == 1


def test_cancelling_the_workflow_mid_stream_stops_the_activity(temporal_address: str) -> None:
    answer = "word " * 200

    def script(request: ScriptRequest) -> Any:
        return StreamReply(response=reply_text(answer), chunk_chars=5, hold_after=4)

    with fake_openai(script) as base_url:

        async def body(client: Client, queue: str) -> Any:
            handle = await kova.temporal.start_turn(
                client,
                agent="a",
                history="talk",
                task_queue=queue,
                id=unique("turn"),
                events=True,
                heartbeat_timeout=1,
            )
            seen = []
            async for event in kova.temporal.events(handle, poll=0.05):
                seen.append(event)
                if event.kind == "text":
                    break
            await handle.cancel()
            with pytest.raises(kova.TurnCancelled):
                await kova.temporal.response(handle)
            history = [event async for event in handle.fetch_history_events()]
            description = await handle.describe()
            return seen, history, description

        seen, history, description = _serve_turn(
            temporal_address, base_url, {"a": builder(base_url)}, body
        )
    assert seen[0].kind == "text"
    assert seen[0].attempt == 1
    assert answer.startswith(seen[0].text)
    assert len(seen[0].text) < len(answer)  # part of the answer: the stream stalled after it
    canceled = [e for e in history if e.HasField("activity_task_canceled_event_attributes")]
    assert len(canceled) == 1  # the activity acknowledged the cancellation, once
    assert description.status is not None
    assert description.status.name == "CANCELED"


def test_events_of_a_retried_model_call_carry_their_attempt(temporal_address: str) -> None:
    answer = "the whole answer, streamed"
    calls: list[int] = []

    def script(request: ScriptRequest) -> Any:
        calls.append(1)
        if len(calls) == 1:  # the first attempt stalls mid-stream and times out
            return StreamReply(response=reply_text(answer), chunk_chars=4, hold_after=3)
        return StreamReply(response=reply_text(answer), chunk_chars=4)

    with fake_openai(script) as base_url:

        async def body(client: Client, queue: str) -> Any:
            handle = await kova.temporal.start_turn(
                client,
                agent="a",
                history="talk",
                task_queue=queue,
                id=unique("turn"),
                events=True,
                model_timeout=1.5,
                heartbeat_timeout=1,
            )
            response = await kova.temporal.response(handle)
            return response, [event async for event in kova.temporal.events(handle)]

        response, seen = _serve_turn(temporal_address, base_url, {"a": builder(base_url)}, body)
    assert response.text == answer
    by_attempt: dict[int, str] = {}
    for event in seen:
        assert event.kind == "text"
        by_attempt[event.attempt] = by_attempt.get(event.attempt, "") + event.text
    assert by_attempt[2] == answer
    assert answer.startswith(by_attempt[1])
    assert len(by_attempt[1]) < len(answer)
    assert {event.activity for event in seen} == {seen[0].activity}  # one model call


def test_payloads_over_temporals_limit_are_refused_with_a_clear_error(
    temporal_address: str,
) -> None:
    async def main() -> Any:
        client = await Client.connect(temporal_address)
        with pytest.raises(kova.temporal.PayloadTooLargeError) as caught:
            await kova.temporal.start_turn(
                client,
                agent="a",
                history="x" * (kova.temporal.PAYLOAD_LIMIT + 1),
                task_queue="nowhere",
                id=unique("turn"),
            )
        return caught.value

    error = run(main)
    assert error.what == "the turn's history"
    assert "over Temporal's payload limit" in str(error)


MCP_SERVER = Path(__file__).parent.parent / "mcp" / "mcp_test_server.py"


def test_mcp_tools_are_called_through_the_workers_one_connection(temporal_address: str) -> None:
    def script(request: ScriptRequest) -> Any:
        last = request.messages[-1]
        if last.role.value == "tool":
            return reply_text(" | ".join(block.text for block in last.content))
        return reply_tool_calls(("srv__pid", {}), ("srv__echo", {"text": "hello"}))

    with fake_openai(script) as base_url:
        transport = StdioTransport(sys.executable, args=[str(MCP_SERVER), "stdio"])

        async def main() -> Any:
            client = await Client.connect(temporal_address)
            queue = unique("mcp")
            worker = kova.temporal.worker(
                client, task_queue=queue, agents={"a": builder(base_url)}, mcp={"srv": transport}
            )
            async with worker:
                return [
                    await kova.temporal.run_turn(
                        client, agent="a", history="pid?", task_queue=queue, id=unique("turn")
                    )
                    for _ in range(3)
                ]

        responses = run(main)
    texts = {response.text for response in responses}
    assert len(texts) == 1  # one server process answered every turn: one connection
    pid, echoed = texts.pop().split(" | ")
    assert int(pid) != os.getpid()
    assert echoed == "hello"


def test_a_changed_mcp_tool_list_reaches_the_model_on_its_next_step(
    temporal_address: str,
) -> None:
    """The tools are read for every model call, as in-process: the server's swap tool adds
    srv__fresh and removes srv__echo mid-turn (tools/list_changed), the next model call is
    offered the new list, and a call of the removed tool is answered in-band. The tools the
    workflow offered are in its history: replaying it gives the same turn."""
    from temporalio.worker import Replayer

    offered: list[set[str]] = []

    def script(request: ScriptRequest) -> Any:
        offered.append({tool.name for tool in request.tools})
        if len(offered) == 1:
            return reply_tool_calls(("srv__swap", {"add": "fresh", "remove": "echo"}))
        if len(offered) == 2:
            return reply_tool_calls(("srv__fresh", {}), ("srv__echo", {"text": "gone?"}))
        return reply_text(" | ".join(block.text for block in request.messages[-1].content))

    with fake_openai(script) as base_url:
        transport = StdioTransport(sys.executable, args=[str(MCP_SERVER), "stdio"])

        async def main() -> Any:
            client = await Client.connect(temporal_address)
            queue = unique("mcp-changed")
            worker = kova.temporal.worker(
                client, task_queue=queue, agents={"a": builder(base_url)}, mcp={"srv": transport}
            )
            async with worker:
                handle = await kova.temporal.start_turn(
                    client, agent="a", history="swap", task_queue=queue, id=unique("turn")
                )
                response = await kova.temporal.response(handle)
                finished = Turn.from_json(await handle.result())
            replayer = Replayer(workflows=[kova.temporal.AgentWorkflow])  # Temporal's defaults
            await replayer.replay_workflow(await handle.fetch_history())
            return response, finished

        response, finished = run(main)
    first, second, third = offered
    # The workflow's turn took the worker's list too (what a pause or the next call uses).
    assert {tool.name for tool in finished.tools} == third
    assert {"srv__swap", "srv__echo"} <= first
    assert "srv__fresh" not in first
    assert "srv__fresh" in second  # the very next model call, within the same turn
    assert "srv__echo" not in second
    assert third == second
    fresh, echo = response.text.split(" | ")
    assert fresh == "I am fresh"
    assert "srv__echo" in echo  # the removed tool: answered in-band, not run
    assert response.llm_calls == 3


def test_a_limit_the_turn_core_enforces_fails_the_turn(temporal_address: str) -> None:
    def script(request: ScriptRequest) -> Any:
        return reply_tool_calls(("noop", {}))

    @tool
    async def noop() -> str:
        """Nothing."""
        return "ok"

    with fake_openai(script) as base_url:

        async def body(client: Client, queue: str) -> Any:
            with pytest.raises(kova.temporal.TurnFailedError) as caught:
                await kova.temporal.run_turn(
                    client, agent="a", history="loop", task_queue=queue, id=unique("turn")
                )
            return caught.value

        agents = {"a": builder(base_url, noop).max_iterations(1)}
        error = _serve_turn(temporal_address, base_url, agents, body)
    assert error.error_type == "MaxIterationsError"


def test_a_tool_result_over_the_payload_limit_fails_the_turn_clearly(
    temporal_address: str,
) -> None:
    @tool
    async def dump() -> str:
        """A lot of text."""
        return "x" * (kova.temporal.PAYLOAD_LIMIT + 10)

    def script(request: ScriptRequest) -> Any:
        return reply_tool_calls(("dump", {}))

    with fake_openai(script) as base_url:

        async def body(client: Client, queue: str) -> Any:
            with pytest.raises(kova.temporal.TurnFailedError) as caught:
                await kova.temporal.run_turn(
                    client, agent="a", history="dump", task_queue=queue, id=unique("turn")
                )
            return caught.value

        error = _serve_turn(temporal_address, base_url, {"a": builder(base_url, dump)}, body)
    assert error.error_type == "PayloadTooLargeError"
    assert "a tool result is 2,097,2" in str(error)


@pytest.mark.parametrize(("limit", "fails"), [(10_000, False), (5, True)])
def test_tokens_counted_before_a_request_against_a_usage_limit(
    temporal_address: str, limit: int, fails: bool
) -> None:
    seen: list[ScriptRequest] = []

    def script(request: ScriptRequest) -> Any:
        seen.append(request)
        return reply_text("short")

    with fake_openai(script) as base_url:
        agent = builder(base_url).usage_limits(input_tokens=limit, count_tokens_before_request=True)

        async def body(client: Client, queue: str) -> Any:
            turn = kova.temporal.run_turn(
                client,
                agent="a",
                history="a prompt of a good many words " * 20,
                task_queue=queue,
                id=unique("turn"),
            )
            if not fails:
                return await turn
            with pytest.raises(kova.temporal.TurnFailedError) as caught:
                await turn
            return caught.value

        outcome = _serve_turn(temporal_address, base_url, {"a": agent}, body)
    if fails:
        assert outcome.error_type == "UsageLimitExceeded"
        assert seen == []  # refused before the request was sent
    else:
        assert outcome.text == "short"
        assert len(seen) == 1
