"""The agent loop, driven by the scripted provider on the fake clock."""

from __future__ import annotations

import json

import attrs
import pytest
import structlog
import trio
import trio.testing

import kova
import kova.providers
from kova import (
    InferenceConfig,
    Message,
    ResponseFormat,
    StopReason,
    TextDelta,
    ToolResult,
    ToolUse,
    Usage,
)
from kova.agent import (
    AgentBuilder,
    CancelToken,
    RetryConfig,
    ToolCallFinished,
    ToolCallStarted,
    TurnCompleted,
)
from kova.testing import (
    ErrorReply,
    FunctionProvider,
    ScriptedProvider,
    ScriptRequest,
    StreamReply,
    reply_text,
    reply_tool_calls,
)
from kova.tools import ToolRegistry, tool

HISTORY = (Message.user("hello"),)


@tool
async def nap(seconds: float, label: str) -> str:
    """Sleep, then answer with the label.

    Args:
        seconds: how long to sleep.
        label: what to answer.
    """
    await trio.sleep(seconds)
    return label


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def explode() -> str:
    """Always fails."""
    raise RuntimeError("kaboom")


def tool_results(message: Message) -> list[ToolResult]:
    return [block for block in message.content if isinstance(block, ToolResult)]


# --- the loop ---------------------------------------------------------------------------------


async def test_plain_answer_returns_one_assistant_message() -> None:
    provider = ScriptedProvider(
        [reply_text("hi there", usage=Usage(input_tokens=7, output_tokens=3))]
    )
    async with AgentBuilder().provider(provider).system_prompt("be nice").build() as agent:
        response = await agent.run(HISTORY)
    assert response.text == "hi there"
    assert response.new_messages == (Message.assistant("hi there"),)
    assert response.stop_reason == StopReason.END_TURN
    assert response.llm_calls == 1
    assert response.usage == Usage(input_tokens=7, output_tokens=3)
    assert agent.last_turn_input_tokens == 7
    sent = provider.requests[0]
    assert sent.messages == (Message.system("be nice"), *HISTORY)


async def test_multi_step_tool_loop_appends_in_order() -> None:
    provider = ScriptedProvider(
        [
            reply_tool_calls(("add", {"a": 1, "b": 2})),
            reply_tool_calls(("add", {"a": 3, "b": 4})),
            reply_text("7 and 3"),
        ]
    )
    async with AgentBuilder().provider(provider).tool(add).build() as agent:
        response = await agent.run(HISTORY)
    assert response.llm_calls == 3
    roles = [m.role for m in response.new_messages]
    assert roles == ["assistant", "tool", "assistant", "tool", "assistant"]
    assert tool_results(response.new_messages[1]) == [ToolResult(content="3", tool_use_id="call_1")]
    # The script numbers its calls on: the second reply's call is call_2.
    assert tool_results(response.new_messages[3]) == [ToolResult(content="7", tool_use_id="call_2")]
    # The second request saw the first tool round trip.
    assert provider.requests[1].messages[-2:] == response.new_messages[:2]
    assert response.usage.input_tokens == 30


async def test_history_is_not_modified() -> None:
    history = [Message.user("hi")]
    provider = ScriptedProvider([reply_text("yo")])
    async with AgentBuilder().provider(provider).build() as agent:
        await agent.run(history)
    assert history == [Message.user("hi")]


@pytest.mark.parametrize(("cap", "expected_end"), [(3, 10.0), (10, 10.0), (1, 30.0), (2, 20.0)])
async def test_tool_calls_overlap_under_the_cap(
    autojump_clock: trio.testing.MockClock, cap: int, expected_end: float
) -> None:
    calls = [("nap", {"seconds": 10, "label": name}) for name in ("a", "b", "c")]
    provider = ScriptedProvider([reply_tool_calls(*calls), reply_text("done")])
    agent = AgentBuilder().provider(provider).tool(nap).max_concurrent_tools(cap).build()
    async with agent:
        start = trio.current_time()
        response = await agent.run(HISTORY)
        assert trio.current_time() - start == expected_end
    results = tool_results(response.new_messages[1])
    assert [r.content for r in results] == ["a", "b", "c"]
    assert [r.tool_use_id for r in results] == ["call_1", "call_2", "call_3"]


async def test_results_keep_call_order_when_tools_finish_out_of_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls = [("nap", {"seconds": s, "label": str(s)}) for s in (3, 1, 2)]
    provider = ScriptedProvider([reply_tool_calls(*calls), reply_text("ok")])
    async with AgentBuilder().provider(provider).tool(nap).build() as agent:
        response = await agent.run(HISTORY)
    assert [r.content for r in tool_results(response.new_messages[1])] == ["3", "1", "2"]


@pytest.mark.parametrize("max_iterations", [1, 2, 5])
async def test_iteration_limit_counts_provider_calls_exactly(max_iterations: int) -> None:
    provider = FunctionProvider(lambda request: reply_tool_calls(("add", {"a": 1, "b": 1})))
    agent = AgentBuilder().provider(provider).tool(add).max_iterations(max_iterations).build()
    async with agent:
        with pytest.raises(kova.MaxIterationsError) as caught:
            await agent.run(HISTORY)
    assert len(provider.requests) == max_iterations + 1
    assert caught.value.max_iterations == max_iterations


async def test_context_budget_guard_sends_nothing() -> None:
    provider = ScriptedProvider([reply_text("never")])
    agent = AgentBuilder().provider(provider).context_budget(10).build()
    async with agent:
        with pytest.raises(kova.ContextBudgetExceededError) as caught:
            await agent.run([Message.user("x" * 400)])
    assert provider.requests == []
    assert caught.value.budget == 10
    assert caught.value.estimated_tokens > 10


async def test_context_budget_checked_before_every_call() -> None:
    big = "y" * 400
    provider = ScriptedProvider([reply_tool_calls(("echo_big", {})), reply_text("never")])

    @tool
    def echo_big() -> str:
        """Return a large text."""
        return big

    agent = AgentBuilder().provider(provider).tool(echo_big).context_budget(60).build()
    async with agent:
        with pytest.raises(kova.ContextBudgetExceededError):
            await agent.run(HISTORY)
    assert len(provider.requests) == 1


# --- in-band tool failures ----------------------------------------------------------------------


async def test_tool_failures_go_back_to_the_model_in_band() -> None:
    calls = (
        ToolUse(id="u1", name="no_such_tool", input={}),
        ToolUse(id="u2", name="add", input={}, raw_arguments="{not json"),
        ToolUse(id="u3", name="add", input={"a": "one", "b": 2}),
        ToolUse(id="u4", name="explode", input={}),
        ToolUse(id="u5", name="add", input={"a": 2, "b": 2}),
    )
    provider = ScriptedProvider([reply_tool_calls(*calls), reply_text("recovered")])
    async with AgentBuilder().provider(provider).tools(add, explode).build() as agent:
        response = await agent.run(HISTORY)
    results = tool_results(response.new_messages[1])
    assert [r.tool_use_id for r in results] == ["u1", "u2", "u3", "u4", "u5"]
    assert [r.is_error for r in results] == [True, True, True, True, False]
    assert "unknown tool 'no_such_tool'" in results[0].text
    assert "add" in results[0].text  # lists what is available
    assert "not a JSON object" in results[1].text
    assert "invalid arguments" in results[2].text
    assert "kaboom" in results[3].text
    assert results[4].content == "4"
    assert response.text == "recovered"


# --- approval and lifecycle ---------------------------------------------------------------------


@attrs.define
class RecordingHook:
    events: list[tuple[str, str]] = attrs.field(factory=list)

    async def on_tool_start(self, call: ToolUse) -> None:
        self.events.append(("start", call.name))

    async def on_tool_end(
        self, call: ToolUse, result: ToolResult, *, duration: float, outcome: str
    ) -> None:
        self.events.append(("end", f"{call.name}:{outcome}:{duration:g}"))


async def test_approval_denial_is_in_band_and_skips_the_hook(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def approve(call: ToolUse) -> bool | str:
        return "not on weekends" if call.input.get("label") == "deny" else True

    hook = RecordingHook()
    calls = [("nap", {"seconds": 2, "label": "deny"}), ("nap", {"seconds": 2, "label": "ok"})]
    provider = ScriptedProvider([reply_tool_calls(*calls), reply_text("fine")])
    agent = (
        AgentBuilder()
        .provider(provider)
        .tool(nap)
        .approval_handler(approve)
        .lifecycle_hook(hook)
        .build()
    )
    async with agent:
        response = await agent.run(HISTORY)
    denied, ran = tool_results(response.new_messages[1])
    assert denied.is_error
    assert "not on weekends" in denied.text
    assert ran == ToolResult(content="ok", tool_use_id="call_2")
    assert hook.events == [("start", "nap"), ("end", "nap:success:2")]


async def test_approval_handler_can_wait_for_a_person() -> None:
    decisions_send, decisions_receive = trio.open_memory_channel[bool](0)
    asked = trio.Event()

    async def approve(call: ToolUse) -> bool:
        asked.set()
        return await decisions_receive.receive()

    provider = ScriptedProvider([reply_tool_calls(("add", {"a": 1, "b": 1})), reply_text("ok")])
    agent = AgentBuilder().provider(provider).tool(add).approval_handler(approve).build()
    async with agent, trio.open_nursery() as nursery:
        results: list[kova.agent.AgentResponse] = []

        async def run() -> None:
            results.append(await agent.run(HISTORY))

        nursery.start_soon(run)
        await asked.wait()
        assert results == []  # the turn waits for the person
        await decisions_send.send(True)
    assert tool_results(results[0].new_messages[1])[0].content == "2"


# --- retries ------------------------------------------------------------------------------------


async def test_retryable_errors_back_off_exponentially(
    autojump_clock: trio.testing.MockClock,
) -> None:
    provider = ScriptedProvider(
        [ErrorReply(status_code=503), ErrorReply(status_code=500), reply_text("finally")]
    )
    retry = RetryConfig(max_retries=2, initial_backoff=1.0, multiplier=3.0)
    async with AgentBuilder().provider(provider).retry_config(retry).build() as agent:
        start = trio.current_time()
        response = await agent.run(HISTORY)
        assert trio.current_time() - start == 1.0 + 3.0
    assert response.text == "finally"
    assert response.llm_calls == 1


async def test_retry_after_wins_over_backoff(autojump_clock: trio.testing.MockClock) -> None:
    provider = ScriptedProvider([ErrorReply(status_code=429, retry_after=7.0), reply_text("ok")])
    retry = RetryConfig(max_retries=2, initial_backoff=1.0)
    async with AgentBuilder().provider(provider).retry_config(retry).build() as agent:
        start = trio.current_time()
        await agent.run(HISTORY)
        assert trio.current_time() - start == 7.0


async def test_retries_give_up_after_max(autojump_clock: trio.testing.MockClock) -> None:
    provider = ScriptedProvider([ErrorReply(status_code=529)] * 3)
    retry = RetryConfig(max_retries=2, initial_backoff=0.5, multiplier=2.0)
    async with AgentBuilder().provider(provider).retry_config(retry).build() as agent:
        start = trio.current_time()
        with pytest.raises(kova.ProviderOverloaded):
            await agent.run(HISTORY)
        assert trio.current_time() - start == 0.5 + 1.0
    assert len(provider.requests) == 3


async def test_non_retryable_errors_fail_at_once(autojump_clock: trio.testing.MockClock) -> None:
    provider = ScriptedProvider([ErrorReply(status_code=400, message="bad"), reply_text("no")])
    async with AgentBuilder().provider(provider).build() as agent:
        with pytest.raises(kova.InvalidRequest, match="bad"):
            await agent.run(HISTORY)
        assert trio.current_time() == 0.0
    assert len(provider.requests) == 1


async def test_disabled_retries(autojump_clock: trio.testing.MockClock) -> None:
    provider = ScriptedProvider([ErrorReply(status_code=503), reply_text("no")])
    agent = AgentBuilder().provider(provider).retry_config(RetryConfig.disabled()).build()
    async with agent:
        with pytest.raises(kova.ProviderOverloaded):
            await agent.run(HISTORY)
    assert len(provider.requests) == 1


async def test_stream_is_retried_only_before_content_reached_the_consumer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    provider = ScriptedProvider(
        [
            ErrorReply(status_code=503),
            StreamReply(response=reply_text("partial answer"), cut_after=1),
        ]
    )
    retry = RetryConfig(max_retries=5, initial_backoff=1.0)
    async with AgentBuilder().provider(provider).retry_config(retry).build() as agent:
        received: list[object] = []
        with pytest.raises(kova.StreamError):
            async with agent.stream(HISTORY) as events:
                async for event in events:
                    received.append(event)
    assert len(provider.requests) == 2  # retried the 503, never the cut stream
    assert received
    assert all(isinstance(e, TextDelta) for e in received)


# --- streaming ----------------------------------------------------------------------------------


async def test_stream_yields_deltas_tool_events_then_completion() -> None:
    provider = ScriptedProvider(
        [
            reply_tool_calls(("add", {"a": 2, "b": 3}), text="let me add"),
            reply_text("the sum is 5"),
        ]
    )
    async with AgentBuilder().provider(provider).tool(add).build() as agent:
        async with agent.stream(HISTORY) as events:
            received = [event async for event in events]
    kinds = [type(e).__name__ for e in received]
    assert kinds[-1] == "TurnCompleted"
    assert "ToolCallStarted" in kinds
    assert kinds.index("ToolCallStarted") < kinds.index("ToolCallFinished")
    text = "".join(e.text for e in received if isinstance(e, TextDelta))
    assert text == "let me addthe sum is 5"
    completed = received[-1]
    assert isinstance(completed, TurnCompleted)
    assert completed.response.text == "the sum is 5"
    assert [m.role for m in completed.response.new_messages] == ["assistant", "tool", "assistant"]
    started = next(e for e in received if isinstance(e, ToolCallStarted))
    assert started.call.input == {"a": 2, "b": 3}
    finished = next(e for e in received if isinstance(e, ToolCallFinished))
    assert finished.result.content == "5"


async def test_stream_text_arrives_before_the_turn_completes() -> None:
    release = trio.Event()
    seen_first_delta = trio.Event()

    async def slow_model(request: ScriptRequest) -> kova.providers.ModelResponse:
        return reply_text("first chunk, then more")

    # A tool that waits for the consumer proves text reached it mid-turn.
    @tool
    async def wait_for_consumer() -> str:
        """Wait until the consumer saw text."""
        await seen_first_delta.wait()
        release.set()
        return "ok"

    provider = ScriptedProvider(
        [reply_tool_calls(("wait_for_consumer", {}), text="thinking aloud"), reply_text("done")]
    )
    async with AgentBuilder().provider(provider).tool(wait_for_consumer).build() as agent:
        async with agent.stream(HISTORY) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    seen_first_delta.set()
    assert release.is_set()


# --- structured output -------------------------------------------------------------------------


ROUTE = ResponseFormat.named(
    "route",
    {
        "type": "object",
        "properties": {"route": {"type": "string"}, "confidence": {"type": "number"}},
        "required": ["route", "confidence"],
        "additionalProperties": False,
    },
)


async def test_structured_output_with_response_format() -> None:
    provider = ScriptedProvider([reply_text(json.dumps({"route": "billing", "confidence": 0.9}))])
    async with AgentBuilder().provider(provider).build() as agent:
        value, response = await agent.run_structured(HISTORY, ROUTE)
    assert value == {"route": "billing", "confidence": 0.9}
    assert provider.requests[0].config.response_format == ROUTE
    assert response.llm_calls == 1


async def test_structured_output_with_pydantic_model() -> None:
    from pydantic import BaseModel

    class Route(BaseModel):
        """Where to send the ticket."""

        route: str
        confidence: float

    provider = ScriptedProvider([reply_text('{"route": "sales", "confidence": 0.5}')])
    async with AgentBuilder().provider(provider).build() as agent:
        value, _ = await agent.run_structured(HISTORY, Route)
    assert value == Route(route="sales", confidence=0.5)
    sent = provider.requests[0].config.response_format
    assert sent is not None
    assert sent.name == "Route"
    assert sent.strict
    assert sent.schema["additionalProperties"] is False


@pytest.mark.parametrize("answer", ["not json at all", '{"route": 3}'])
async def test_structured_output_failure_carries_raw_text(answer: str) -> None:
    from pydantic import BaseModel

    class Route(BaseModel):
        route: str
        confidence: float

    provider = ScriptedProvider([reply_text(answer)])
    async with AgentBuilder().provider(provider).build() as agent:
        with pytest.raises(kova.StructuredOutputError) as caught:
            await agent.run_structured(HISTORY, Route, output_retries=0)
    assert caught.value.raw_text == answer


async def test_structured_output_invalid_json_for_response_format() -> None:
    provider = ScriptedProvider([reply_text("{oops")])
    async with AgentBuilder().provider(provider).build() as agent:
        with pytest.raises(kova.StructuredOutputError, match="not valid JSON") as caught:
            await agent.run_structured(HISTORY, ROUTE, output_retries=0)
    assert caught.value.raw_text == "{oops"


async def test_run_config_overrides_only_what_it_sets() -> None:
    provider = ScriptedProvider([reply_text("a")])
    base = InferenceConfig(model="base-model", max_tokens=100, temperature=0.1)
    async with AgentBuilder().provider(provider).inference_config(base).build() as agent:
        await agent.run(HISTORY, config=InferenceConfig(temperature=0.9))
    assert provider.requests[0].config == InferenceConfig(
        model="base-model", max_tokens=100, temperature=0.9
    )


async def test_each_turn_uses_its_own_overrides_when_they_change_from_turn_to_turn() -> None:
    provider = ScriptedProvider([reply_text(str(n)) for n in range(5)])
    base = InferenceConfig(model="base-model", max_tokens=100)
    first, second = InferenceConfig(model="first"), InferenceConfig(temperature=0.5)
    async with AgentBuilder().provider(provider).inference_config(base).build() as agent:
        for overrides in (first, first, second, None, first):
            await agent.run(HISTORY, config=overrides)
    assert [request.config for request in provider.requests] == [
        InferenceConfig(model="first", max_tokens=100),
        InferenceConfig(model="first", max_tokens=100),
        InferenceConfig(model="base-model", max_tokens=100, temperature=0.5),
        base,
        InferenceConfig(model="first", max_tokens=100),
    ]


# --- cancellation -------------------------------------------------------------------------------


@attrs.define
class Probe:
    started: trio.Event = attrs.field(factory=trio.Event)
    cleaned_up: bool = False


def hanging_provider(probe: Probe) -> FunctionProvider:
    async def model(request: ScriptRequest) -> kova.providers.ModelResponse:
        probe.started.set()
        try:
            await trio.sleep_forever()
        finally:
            probe.cleaned_up = True
        raise AssertionError("unreachable")

    return FunctionProvider(model)


async def test_cancel_scope_during_provider_call(autojump_clock: trio.testing.MockClock) -> None:
    probe = Probe()
    async with AgentBuilder().provider(hanging_provider(probe)).build() as agent:
        results: list[object] = []
        with trio.move_on_after(5) as scope:
            results.append(await agent.run(HISTORY))
        assert scope.cancelled_caught
        assert probe.cleaned_up  # the actor-side work stopped before run() returned
        assert results == []


async def test_cancel_token_during_provider_call(autojump_clock: trio.testing.MockClock) -> None:
    probe = Probe()
    token = CancelToken()
    async with AgentBuilder().provider(hanging_provider(probe)).build() as agent:
        async with trio.open_nursery() as nursery:

            async def cancel_later() -> None:
                await probe.started.wait()
                await trio.sleep(1)
                token.cancel("user pressed stop")

            nursery.start_soon(cancel_later)
            with pytest.raises(kova.TurnCancelled, match="user pressed stop"):
                await agent.run(HISTORY, cancel=token)
            assert probe.cleaned_up
            assert trio.current_time() == 1.0


async def test_cancel_token_mid_tool(autojump_clock: trio.testing.MockClock) -> None:
    probe = Probe()

    @tool
    async def long_job() -> str:
        """Runs for a long time."""
        probe.started.set()
        try:
            await trio.sleep(1000)
        finally:
            probe.cleaned_up = True
        return "never"

    token = CancelToken()
    provider = ScriptedProvider([reply_tool_calls(("long_job", {})), reply_text("never")])
    async with AgentBuilder().provider(provider).tool(long_job).build() as agent:
        async with trio.open_nursery() as nursery:

            async def cancel_later() -> None:
                await probe.started.wait()
                token.cancel()

            nursery.start_soon(cancel_later)
            with pytest.raises(kova.TurnCancelled):
                await agent.run(HISTORY, cancel=token)
        assert probe.cleaned_up
    assert len(provider.requests) == 1


async def test_cancel_mid_stream_leaves_no_messages(autojump_clock: trio.testing.MockClock) -> None:
    provider = ScriptedProvider(
        [StreamReply(response=reply_text("a long streamed answer"), chunk_chars=2)]
    )
    token = CancelToken()
    async with AgentBuilder().provider(provider).build() as agent:
        received: list[object] = []
        with pytest.raises(kova.TurnCancelled):
            async with agent.stream(HISTORY, cancel=token) as events:
                async for event in events:
                    received.append(event)
                    token.cancel()
        assert received
        assert not any(isinstance(e, TurnCompleted) for e in received)


async def test_leaving_a_stream_early_stops_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    provider = ScriptedProvider([StreamReply(response=reply_text("x" * 200), chunk_chars=1)])
    async with AgentBuilder().provider(provider).build() as agent:
        async with agent.stream(HISTORY) as events:
            async for _event in events:
                break
        # The agent still works afterwards: nothing was left half-open.
    assert len(provider.requests) == 1


async def test_precancelled_token_sends_nothing() -> None:
    token = CancelToken()
    token.cancel()
    provider = ScriptedProvider([reply_text("no")])
    async with AgentBuilder().provider(provider).build() as agent:
        with pytest.raises(kova.TurnCancelled):
            await agent.run(HISTORY, cancel=token)
    assert provider.requests == []


# --- building -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("configure", "match"),
    [
        (lambda b: b, "needs a provider"),
        (lambda b: b.provider(ScriptedProvider([])).max_iterations(0), "max_iterations"),
        (lambda b: b.provider(ScriptedProvider([])).max_concurrent_tools(0), "max_concurrent"),
        (lambda b: b.provider(ScriptedProvider([])).context_budget(0), "context_budget"),
        (lambda b: b.provider(ScriptedProvider([])).tool(add).tool(add), "two tools are named"),
        (lambda b: b.provider(object()), "Provider protocol"),
        (lambda b: b.provider(ScriptedProvider([])).tool(object()), "is not a tool"),
        # Before, these three were taken as given and failed on the first call (a TypeError
        # from iterating the registry, an AttributeError from spawning on the runtime) or
        # never (a metrics subscriber failing on every event, logged).
        (lambda b: b.provider(ScriptedProvider([])).tool_registry([add]), "ToolRegistry, got"),
        (lambda b: b.provider(ScriptedProvider([])).metrics(object()), "MetricsCollector"),
        (lambda b: b.provider(ScriptedProvider([])).runtime(5), "kova.actors.Runtime"),
    ],
)
def test_build_errors(configure: object, match: str) -> None:
    with pytest.raises(kova.BuildError, match=match):  # from the option's call or build()
        configure(AgentBuilder()).build()  # type: ignore[operator]


def test_tool_registry_composes_with_tool() -> None:
    registry = ToolRegistry()
    registry.register(add)
    with pytest.raises(kova.BuildError, match="two tools"):
        AgentBuilder().provider(ScriptedProvider([])).tool_registry(registry).tool(add).build()
    agent = AgentBuilder().provider(ScriptedProvider([])).tool_registry(registry).tool(nap).build()
    assert sorted(agent.config.registry.names()) == ["add", "nap"]


async def test_run_outside_async_with_is_a_clear_error() -> None:
    agent = AgentBuilder().provider(ScriptedProvider([reply_text("x")])).build()
    with pytest.raises(kova.BuildError, match="not open"):
        await agent.run(HISTORY)


async def test_agents_share_a_runtime_and_provider_actor() -> None:
    from kova.actors import open_runtime
    from kova.agent import spawn_provider

    provider = FunctionProvider(lambda request: reply_text(f"n={len(request.messages)}"))
    async with open_runtime() as runtime:
        shared = await spawn_provider(runtime, provider)
        first = AgentBuilder().provider(shared).runtime(runtime).build()
        second = AgentBuilder().provider(shared).runtime(runtime).system_prompt("s").build()
        async with first, second:
            a = await first.run(HISTORY)
            b = await second.run(HISTORY)
    assert (a.text, b.text) == ("n=1", "n=2")
    assert len(provider.requests) == 2


async def test_retry_is_logged_with_structlog(autojump_clock: trio.testing.MockClock) -> None:
    provider = ScriptedProvider([ErrorReply(status_code=503), reply_text("ok")])
    async with AgentBuilder().provider(provider).build() as agent:
        with structlog.testing.capture_logs() as logs:
            await agent.run(HISTORY)
    # At info: a retry is the policy working, nothing the user must act on.
    assert [entry["event"] for entry in logs if entry["log_level"] == "info"] == [
        "provider.request.retrying"
    ]
    assert [entry for entry in logs if entry["log_level"] in ("warning", "error")] == []


async def test_agent_records_metrics(autojump_clock: trio.testing.MockClock) -> None:
    from kova.telemetry import open_metrics

    async def approve(call: ToolUse) -> bool:
        return call.input.get("a") != 99

    provider = ScriptedProvider(
        [
            ErrorReply(status_code=503),
            reply_tool_calls(
                ("add", {"a": 1, "b": 2}),
                ("add", {"a": 99, "b": 1}),
                ("explode", {}),
                usage=Usage(input_tokens=100, output_tokens=10, cache_read_tokens=40),
            ),
            reply_text("done", usage=Usage(input_tokens=120, output_tokens=5)),
        ]
    )
    async with open_metrics() as metrics:
        agent = (
            AgentBuilder()
            .provider(provider)
            .tools(add, explode)
            .approval_handler(approve)
            .metrics(metrics)
            .build()
        )
        async with agent:
            await agent.run(HISTORY)
        snapshot = await metrics.snapshot()
    assert snapshot.llm_request_count == 2
    assert snapshot.error_count == 1
    assert snapshot.input_tokens == 220
    assert snapshot.output_tokens == 15
    assert snapshot.cache_read_tokens == 40
    assert snapshot.tool_success_count == 1
    assert snapshot.tool_error_count == 1
    assert snapshot.tool_denied_count == 1
    assert snapshot.llm_latency_ms.count == 2
    assert snapshot.tool_duration_ms.count == 2  # denied calls never ran


@pytest.mark.parametrize("streamed", [False, True])
async def test_agents_sharing_a_provider_wait_out_a_rate_limit_together(
    autojump_clock: trio.testing.MockClock, streamed: bool
) -> None:
    from kova.actors import open_runtime
    from kova.agent import spawn_provider

    sent: list[tuple[str, float]] = []

    def model(request: ScriptRequest) -> kova.testing.Reply:
        who = request.messages[-1].text
        sent.append((who, trio.current_time()))
        if who == "first" and sum(1 for name, _ in sent if name == "first") == 1:
            return ErrorReply(status_code=429, retry_after=5.0)
        return reply_text(f"hi {who}")

    async with open_runtime() as runtime:
        shared = await spawn_provider(runtime, FunctionProvider(model))
        first = AgentBuilder().provider(shared).runtime(runtime).build()
        second = AgentBuilder().provider(shared).runtime(runtime).build()

        async def turn(agent: kova.agent.Agent, who: str, delay: float) -> None:
            await trio.sleep(delay)
            if streamed:
                async with agent.stream([Message.user(who)]) as events:
                    async for _ in events:
                        pass
            else:
                await agent.run([Message.user(who)])

        async with first, second, trio.open_nursery() as nursery:
            nursery.start_soon(turn, first, "first", 0.0)
            nursery.start_soon(turn, second, "second", 1.0)
    # The second agent's request, due at t=1, waits for the pause the first one's 429 set.
    assert sent[0] == ("first", 0.0)
    assert sorted(sent[1:]) == [("first", 5.0), ("second", 5.0)]


@pytest.mark.parametrize(
    ("buffer", "error"), [("16", TypeError), (2.5, TypeError), (-1, ValueError)]
)
async def test_a_stream_buffer_of_the_wrong_type_names_the_argument(
    buffer: object, error: type[Exception]
) -> None:
    # Before: trio's "max_buffer_size must be an integer or math.inf", naming no argument of
    # kova's.
    provider = ScriptedProvider([reply_text("x")])
    async with AgentBuilder().provider(provider).build() as agent:
        with pytest.raises(error, match="buffer must be"):
            async with agent.stream(HISTORY, cancel=CancelToken(), buffer=buffer) as events:  # type: ignore[arg-type]
                async for _event in events:
                    pass
        assert provider.requests == []


@pytest.mark.parametrize(
    "configure",
    [
        lambda b: b.approval_handler(lambda: True),
        lambda b: b.approval_handler(lambda call, annotations, extra: True),
        lambda b: b.defer_approvals(lambda: True),
    ],
)
def test_a_handler_that_cannot_take_the_call_is_a_build_error(configure: object) -> None:
    # Before: it built, and every tool call was then denied in-band with "the approval
    # handler raised TypeError: <lambda>() takes 0 positional arguments but 1 was given".
    with pytest.raises(kova.BuildError, match=r"must take the tool call.*takes \("):
        configure(AgentBuilder().provider(ScriptedProvider([]))).build()  # type: ignore[operator]
