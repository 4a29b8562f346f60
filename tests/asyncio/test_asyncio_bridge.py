"""kova.asyncio: kova's agent from asyncio code, on the standard loop and on uvloop.

These tests are plain functions that run their own event loop (``asyncio.run`` or
``uvloop.run``): the code under test is asyncio code. Times are real but short; nothing
waits for a timeout to expire except the one test about a deadline.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import json
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
from bridge_helpers import LOOPS, fake_openai_in_thread, run_on, trio_task_count
from pydantic import BaseModel

import kova
import kova.asyncio
import kova.errors
from kova import ResponseFormat, TextDelta, ToolResult, ToolUse
from kova.agent import (
    Agent,
    AgentBuilder,
    CancelToken,
    RetryConfig,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnCompleted,
)
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import (
    ErrorReply,
    ScriptedProvider,
    ScriptLike,
    ScriptRequest,
    StreamReply,
    reply_text,
    reply_tool_calls,
)
from kova.tools import Tool, tool

if TYPE_CHECKING:
    from collections.abc import Callable


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def build(script: ScriptLike, *tools: Tool, **options: Any) -> Agent:
    builder = AgentBuilder().provider(ScriptedProvider(script))
    builder.retry_config(RetryConfig(max_retries=0))
    for item in tools:
        builder.tool(item)
    for name, value in options.items():
        getattr(builder, name)(value)
    return builder.build()


class Stall:
    """A scripted model that never answers, and says when it started and stopped."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.stopped = False

    async def __call__(self, request: ScriptRequest) -> Any:
        self.started.set()  # asyncio's Event.set is plain code: fine from the trio side
        try:
            await trio.sleep_forever()
        finally:
            self.stopped = True


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


# -- results -----------------------------------------------------------------------------


def test_run_returns_the_agents_response_with_a_tool_loop(loop: str) -> None:
    agent = build([reply_tool_calls(("add", {"a": 2, "b": 3})), reply_text("5")], add)

    async def main() -> kova.agent.AgentResponse:
        async with kova.asyncio.open_agent(agent) as bridged:
            assert bridged.agent is agent
            return await bridged.run("2 + 3?")

    response = run_on(loop, main)
    assert response.text == "5"
    assert response.llm_calls == 2
    assert response.new_messages[1].content[0] == ToolResult(content="5", tool_use_id="call_1")


class Route(BaseModel):
    route: str


def test_run_structured_returns_the_validated_value(loop: str) -> None:
    agent = build([reply_text('{"route": 1}'), reply_text(json.dumps({"route": "billing"}))])

    async def main() -> tuple[Any, kova.agent.AgentResponse]:
        async with kova.asyncio.open_agent(agent) as bridged:
            return await bridged.run_structured("route it", Route)

    value, response = run_on(loop, main)
    assert value == Route(route="billing")
    assert response.output_retries == 1


def test_stream_yields_the_same_events_as_the_trio_stream(loop: str) -> None:
    script = [
        reply_tool_calls(("add", {"a": 1, "b": 1}), text="adding"),
        reply_text("two, as computed"),
    ]

    async def on_trio() -> list[object]:
        async with build(script, add) as agent, agent.stream("1 + 1?") as events:
            return [event async for event in events]

    async def on_asyncio() -> list[object]:
        async with kova.asyncio.open_agent(build(script, add)) as bridged:
            return [event async for event in bridged.stream("1 + 1?")]

    expected = trio.run(on_trio)
    seen = run_on(loop, on_asyncio)
    assert seen == expected
    assert any(isinstance(event, ToolCallDelta) for event in seen)
    assert [type(event) for event in seen if not isinstance(event, TextDelta | ToolCallDelta)] == [
        ToolCallStarted,
        ToolCallFinished,
        TurnCompleted,
    ]


def test_stream_structured_yields_the_agents_values_then_the_outcome(loop: str) -> None:
    answer = json.dumps({"route": "billing"})
    script = [StreamReply(response=reply_text(answer), chunk_chars=3)]

    async def on_trio() -> list[object]:
        async with (
            build(script) as agent,
            agent.stream_structured("route it", Route) as values,
        ):
            return [value async for value in values]

    async def on_asyncio() -> tuple[list[object], Any, kova.agent.AgentResponse]:
        async with kova.asyncio.open_agent(build(script)) as bridged:
            values = bridged.stream_structured("route it", Route, buffer=2)
            with pytest.raises(RuntimeError, match="not finished"):
                _ = values.value
            seen = [value async for value in values]
            return seen, values.value, values.response

    seen, value, response = run_on(loop, on_asyncio)
    assert seen == trio.run(on_trio)
    assert len(seen) > 2  # partial values as the JSON arrived, then the validated one
    assert seen[-1] == value == Route(route="billing")
    assert response.text == answer


def test_stream_as_a_context_manager_and_with_a_small_buffer(loop: str) -> None:
    text = "a long answer, streamed in many small pieces"
    agent = build([StreamReply(response=reply_text(text), chunk_chars=2)])

    async def main() -> str:
        async with (
            kova.asyncio.open_agent(agent) as bridged,
            bridged.stream("talk", buffer=1) as events,
        ):
            return "".join([e.text async for e in events if isinstance(e, TextDelta)])

    assert run_on(loop, main) == text


def test_many_concurrent_turns_share_one_agent(loop: str) -> None:
    agent = build(lambda request: reply_text(request.messages[-1].text.upper()))

    async def main() -> list[str]:
        async with kova.asyncio.open_agent(agent) as bridged:

            async def one(index: int) -> str:
                if index % 2:
                    return (await bridged.run(f"turn {index}")).text
                events = [e async for e in bridged.stream(f"turn {index}")]
                assert isinstance(events[-1], TurnCompleted)
                return events[-1].response.text

            return await asyncio.gather(*(one(index) for index in range(50)))

    assert run_on(loop, main) == [f"TURN {index}" for index in range(50)]


# -- errors cross as themselves ------------------------------------------------------------


@attrs.frozen
class ErrorCase:
    name: str
    make: Callable[[], Agent]
    error: type[BaseException]
    options: dict[str, Any] = attrs.field(factory=dict)


def _looping() -> Agent:
    return build(lambda request: reply_tool_calls(("add", {"a": 1, "b": 1})), add, max_iterations=1)


def _cancelled_token() -> dict[str, Any]:
    token = CancelToken()
    token.cancel("the user left")
    return {"cancel": token}


ERRORS = [
    ErrorCase("rate limited", lambda: build([ErrorReply(status_code=429)]), kova.RateLimited),
    ErrorCase("auth", lambda: build([ErrorReply(status_code=401)]), kova.ProviderAuthError),
    ErrorCase("overloaded", lambda: build([ErrorReply(status_code=529)]), kova.ProviderOverloaded),
    ErrorCase("bad request", lambda: build([ErrorReply(status_code=400)]), kova.InvalidRequest),
    ErrorCase("no model", lambda: build([ErrorReply(status_code=404)]), kova.ModelNotFound),
    ErrorCase("iterations", _looping, kova.MaxIterationsError),
    ErrorCase(
        "budget",
        lambda: build([reply_text("never")], context_budget=1),
        kova.ContextBudgetExceededError,
    ),
    ErrorCase(
        "cut stream",
        lambda: build([StreamReply(response=reply_text("cut short, sorry"), cut_after=2)]),
        kova.KovaConnectionError,  # run() sees the drop; stream() below sees StreamError
    ),
    ErrorCase("token", lambda: build([reply_text("never")]), kova.TurnCancelled),
    ErrorCase("bad history", lambda: build([reply_text("never")]), TypeError),
]


def _options(case: ErrorCase) -> dict[str, Any]:
    if case.name == "token":
        return _cancelled_token()
    return {}


def _history(case: ErrorCase) -> Any:
    return 42 if case.name == "bad history" else "hello"


def _check_crossed(error: BaseException, expected: type[BaseException]) -> None:
    assert isinstance(error, expected), repr(error)
    assert not isinstance(error, BaseExceptionGroup)
    assert not isinstance(error, trio.Cancelled)


@pytest.mark.parametrize("case", ERRORS, ids=[case.name for case in ERRORS])
def test_run_raises_the_agents_error_as_itself(loop: str, case: ErrorCase) -> None:
    async def main() -> BaseException:
        async with kova.asyncio.open_agent(case.make()) as bridged:
            with pytest.raises(case.error) as caught:
                await bridged.run(_history(case), **_options(case))
            return caught.value

    _check_crossed(run_on(loop, main), case.error)


STREAM_ERRORS = [
    case if case.name != "cut stream" else attrs.evolve(case, error=kova.StreamError)
    for case in ERRORS
    if case.name != "bad history"  # raised by stream() itself, below
]


@pytest.mark.parametrize("case", STREAM_ERRORS, ids=[case.name for case in STREAM_ERRORS])
def test_stream_raises_the_agents_error_from_the_iteration(loop: str, case: ErrorCase) -> None:
    async def main() -> tuple[BaseException, list[object]]:
        seen: list[object] = []
        async with kova.asyncio.open_agent(case.make()) as bridged:
            stream = bridged.stream("hello", **_options(case))
            with pytest.raises(case.error) as caught:
                async for event in stream:
                    seen.append(event)
            # The stream is over once it raised.
            assert [event async for event in stream] == []
            return caught.value, seen

    error, seen = run_on(loop, main)
    _check_crossed(error, case.error)
    assert not any(isinstance(event, TurnCompleted) for event in seen)


def test_stream_checks_its_arguments_when_called(loop: str) -> None:
    async def main() -> None:
        async with kova.asyncio.open_agent(build([reply_text("x")])) as bridged:
            with pytest.raises(TypeError, match="history"):
                bridged.stream(42)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="buffer"):
                bridged.stream("x", buffer=0)

    run_on(loop, main)


@pytest.mark.parametrize(
    ("name", "returns"),
    [
        ("run", None),
        ("resume", None),
        ("run_structured", None),
        ("stream", "AgentEventStream"),
        ("stream_structured", "StructuredValueStream"),
    ],
)
def test_bridged_methods_show_the_agents_own_parameters(name: str, returns: str | None) -> None:
    """help() and IDEs show the agent method's signature (types are pinned by mypy in
    tests/typing/asyncio_door.py), with a docstring of the bridged method's own."""
    bridged = getattr(kova.asyncio.AsyncioAgent, name)
    agent = inspect.signature(getattr(Agent, name))
    shown = inspect.signature(bridged)
    assert shown.parameters == agent.parameters
    assert shown.return_annotation == (returns or agent.return_annotation)
    assert "asyncio" in bridged.__doc__
    assert bridged.__qualname__ == f"AsyncioAgent.{name}"


def test_structured_output_error_crosses(loop: str) -> None:
    agent = build([reply_text("not json")], output_retries=0)

    async def main() -> None:
        async with kova.asyncio.open_agent(agent) as bridged:
            with pytest.raises(kova.StructuredOutputError) as caught:
                output = ResponseFormat(name="r", schema={"type": "object"})
                await bridged.run_structured("x", output)
            assert caught.value.attempts == ("not json",)

    run_on(loop, main)


def test_a_provider_deadline_arrives_as_kova_timeout_error(loop: str) -> None:
    async def slow(request: ScriptRequest) -> Any:
        await trio.sleep(30)
        return reply_text("too late")

    with fake_openai_in_thread(slow) as base_url:
        config = OpenAiConfig(base_url=base_url, model="gpt-fake", api_key="k", timeout=0.2)
        agent = (
            AgentBuilder()
            .provider(OpenAiCompatibleProvider(config))
            .retry_config(RetryConfig(max_retries=0))
            .build()
        )

        async def main() -> BaseException:
            async with kova.asyncio.open_agent(agent) as bridged:
                with pytest.raises(kova.KovaTimeoutError) as caught:
                    await bridged.run("hello")
                return caught.value

        _check_crossed(run_on(loop, main), kova.KovaTimeoutError)


# -- cancellation, both ways ---------------------------------------------------------------


def test_cancelling_the_asyncio_caller_stops_the_turn_before_cancelled_error(loop: str) -> None:
    stall = Stall()
    agent = build(stall)

    async def main() -> None:
        async with kova.asyncio.open_agent(agent) as bridged:
            baseline = await bridged.runtime.run(trio_task_count)
            turn = asyncio.create_task(bridged.run("hello"))
            await stall.started.wait()
            assert not stall.stopped
            turn.cancel()
            with pytest.raises(asyncio.CancelledError):
                await turn
            # The turn stopped everything it started before the caller saw CancelledError.
            assert stall.stopped
            assert await bridged.runtime.run(trio_task_count) == baseline

    run_on(loop, main)


def test_asyncio_timeout_cancels_the_turn_and_raises_timeout_error(loop: str) -> None:
    stall = Stall()
    agent = build(stall)

    async def main() -> None:
        async with kova.asyncio.open_agent(agent) as bridged:
            deadlines: list[asyncio.Timeout] = []

            async def turn() -> None:
                async with asyncio.timeout(None) as deadline:
                    deadlines.append(deadline)
                    await bridged.run("hello")

            running = asyncio.create_task(turn())
            await stall.started.wait()
            deadlines[0].reschedule(asyncio.get_running_loop().time())  # expires now
            with pytest.raises(TimeoutError) as caught:
                await running
            assert not isinstance(caught.value, kova.KovaError)  # asyncio's own timeout
            assert stall.stopped

    run_on(loop, main)


def test_cancelling_a_stream_consumer_stops_the_turn(loop: str) -> None:
    agent = build(
        [StreamReply(response=reply_text("word " * 200), chunk_chars=5)],
    )
    stopped: list[bool] = []

    async def main() -> None:
        async with kova.asyncio.open_agent(agent) as bridged:
            baseline = await bridged.runtime.run(trio_task_count)
            first = asyncio.Event()

            async def consume() -> None:
                # With `async with`, leaving the block (here: cancelled in the body) stops
                # the turn before the cancellation goes on.
                async with bridged.stream("talk", buffer=1) as events:
                    async for _ in events:
                        first.set()
                        await asyncio.sleep(3600)

            consumer = asyncio.create_task(consume())
            await first.wait()
            assert await bridged.runtime.run(trio_task_count) > baseline
            consumer.cancel()
            with pytest.raises(asyncio.CancelledError):
                await consumer
            assert await bridged.runtime.run(trio_task_count) == baseline
            stopped.append(True)

    run_on(loop, main)
    assert stopped == [True]


def test_a_stream_dropped_mid_turn_is_stopped(loop: str) -> None:
    stall = Stall()
    agent = build(stall)

    async def main() -> None:
        async with kova.asyncio.open_agent(agent) as bridged:
            stream = bridged.stream("hello")
            reading = asyncio.ensure_future(stream.__anext__())
            await stall.started.wait()
            reading.cancel()
            with pytest.raises(asyncio.CancelledError):
                await reading
            assert stall.stopped

            # Dropped without aclose, before the first event: the finalizer stops it.
            stall.started.clear()
            stall.stopped = False
            stream = bridged.stream("hello")
            reading = asyncio.ensure_future(stream.__anext__())
            await stall.started.wait()
            del stream
            for _ in range(20):
                await asyncio.sleep(0)
            assert not reading.done()  # its own task still waits; the turn has stopped
            reading.cancel()
            with pytest.raises(asyncio.CancelledError):
                await reading
            assert stall.stopped

    run_on(loop, main)


def test_leaving_open_agent_cancels_the_turns_still_running(loop: str) -> None:
    stall = Stall()
    agent = build(stall)

    async def main() -> BaseException:
        async with kova.asyncio.open_agent(agent) as bridged:
            turn = asyncio.create_task(bridged.run("hello"))
            await stall.started.wait()
        assert stall.stopped
        assert not agent.is_open
        with pytest.raises(kova.TurnCancelled) as caught:
            await turn
        return caught.value

    _check_crossed(run_on(loop, main), kova.TurnCancelled)


def test_a_closed_bridge_says_so(loop: str) -> None:
    async def main() -> None:
        async with kova.asyncio.open_agent(build([reply_text("x")])) as bridged:
            pass
        with pytest.raises(RuntimeError, match="closed"):
            await bridged.run("hello")

    run_on(loop, main)


# -- the runtime: one guest run per loop ---------------------------------------------------


def test_every_caller_on_a_loop_shares_one_guest_run(loop: str) -> None:
    async def main() -> kova.asyncio.AsyncioRuntime:
        assert kova.asyncio.current_runtime() is None
        async with (
            kova.asyncio.open_agent(build([reply_text("a")])) as first,
            kova.asyncio.open_agent(build([reply_text("b")])) as second,
        ):
            assert first.runtime is second.runtime is kova.asyncio.current_runtime()
            async with kova.asyncio.open_runtime() as runtime:
                assert runtime is first.runtime
            assert not runtime.closed  # the block joined a running runtime: it stays up
            assert [(await first.run("x")).text, (await second.run("x")).text] == ["a", "b"]
        return runtime

    runtime = run_on(loop, main)
    # Started on first use, finished when asyncio.run ended: nothing abandoned (an
    # unfinished guest run warns when collected, and warnings are errors here).
    assert runtime.closed
    gc.collect()


def test_open_runtime_starts_and_finishes_the_guest_run(loop: str) -> None:
    async def main() -> None:
        async with kova.asyncio.open_runtime() as runtime:
            assert kova.asyncio.current_runtime() is runtime
            assert await runtime.run(trio.sleep, 0) is None
            async with kova.asyncio.open_agent(build([reply_text("hi")])) as bridged:
                assert bridged.runtime is runtime
                assert (await bridged.run("x")).text == "hi"
        assert runtime.closed
        assert kova.asyncio.current_runtime() is None
        # A later first use starts a new one.
        async with kova.asyncio.open_agent(build([reply_text("again")])) as bridged:
            assert bridged.runtime is not runtime
            assert (await bridged.run("x")).text == "again"

    run_on(loop, main)


def test_runtime_run_maps_errors_and_cancellation(loop: str) -> None:
    async def boom() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep, 0)
            raise ValueError("from trio")

    async def main() -> None:
        async with kova.asyncio.open_runtime() as runtime:
            with pytest.raises(ValueError, match="from trio"):  # the nursery's group of one
                await runtime.run(boom)
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.01):
                    await runtime.run(trio.sleep_forever)

    run_on(loop, main)


def test_open_agent_needs_an_agent_and_a_loop() -> None:
    async def main() -> None:
        with pytest.raises(TypeError, match="kova Agent"):
            async with kova.asyncio.open_agent("agent"):  # type: ignore[arg-type]
                pass

    asyncio.run(main())


def test_open_agent_reports_a_failure_to_open(loop: str) -> None:
    agent = build([reply_text("x")])

    async def main() -> None:
        async with kova.asyncio.open_agent(agent):
            with pytest.raises(kova.BuildError, match="already open"):
                async with kova.asyncio.open_agent(agent):
                    pass

    run_on(loop, main)


# -- asyncio tools -------------------------------------------------------------------------


def test_an_asyncio_tool_using_open_connection_is_called_by_the_model(loop: str) -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        writer.write(b"echo: " + line)
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    async def main() -> kova.agent.AgentResponse:
        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]

        @tool(runs_on="asyncio")
        async def shout(text: str) -> str:
            """Send text to the echo service.

            Args:
                text: what to send.
            """
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(text.encode() + b"\n")
            await writer.drain()
            answer = await reader.readline()
            writer.close()
            await writer.wait_closed()
            return answer.decode().strip()

        agent = build([reply_tool_calls(("shout", {"text": "hello"})), reply_text("done")], shout)
        async with server, kova.asyncio.open_agent(agent) as bridged:
            return await bridged.run("call the service")

    response = run_on(loop, main)
    assert response.new_messages[1].content[0].text == "echo: hello"
    assert response.text == "done"


def test_cancelling_a_turn_cancels_its_asyncio_tool_on_the_loop(loop: str) -> None:
    events: list[str] = []
    started = asyncio.Event()

    @tool(runs_on="asyncio")
    async def wait_forever() -> str:
        """Wait."""
        events.append("started")
        started.set()
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            events.append("cancelled")
            raise
        return "never"

    agent = build([reply_tool_calls(("wait_forever", {})), reply_text("never")], wait_forever)

    async def main() -> None:
        async with kova.asyncio.open_agent(agent) as bridged:
            turn = asyncio.create_task(bridged.run("go"))
            await started.wait()
            turn.cancel()
            with pytest.raises(asyncio.CancelledError):
                await turn
            assert events == ["started", "cancelled"]

    run_on(loop, main)


def test_an_asyncio_tool_error_goes_to_the_model_in_band(loop: str) -> None:
    @tool(runs_on="asyncio")
    async def broken() -> str:
        """Fail."""
        await asyncio.sleep(0)
        raise ConnectionRefusedError("the database is down")

    agent = build([reply_tool_calls(("broken", {})), reply_text("sorry")], broken)

    async def main() -> kova.agent.AgentResponse:
        async with kova.asyncio.open_agent(agent) as bridged:
            return await bridged.run("go")

    result = run_on(loop, main).new_messages[1].content[0]
    assert result.is_error
    assert "the database is down" in result.text


def test_sys_exit_in_asyncio_code_ends_that_call_only(loop: str) -> None:
    # Before: an asyncio task that raises SystemExit has asyncio re-raise it out of the event
    # loop, so sys.exit() in an on_asyncio approval handler or a runs_on="asyncio" tool ended
    # asyncio.run (and the program) instead of that one call, as it does on trio.
    @tool(runs_on="asyncio")
    async def quits() -> str:
        """Quit."""
        await asyncio.sleep(0)
        raise SystemExit(8)

    async def refuses(call: ToolUse) -> bool:
        if call.name == "add":
            raise SystemExit(7)
        return True

    agent = (
        AgentBuilder()
        .provider(
            ScriptedProvider(
                [reply_tool_calls(("add", {"a": 1, "b": 2}), ("quits", {})), reply_text("ok")]
            )
        )
        .tools(add, quits)
        .approval_handler(kova.asyncio.on_asyncio(refuses))
        .build()
    )

    async def main() -> kova.agent.AgentResponse:
        async with kova.asyncio.open_agent(agent) as bridged:
            return await bridged.run("go")

    denied, quit_ = run_on(loop, main).new_messages[1].content
    assert denied.text == "tool call denied: the approval handler raised SystemExit: 7"
    assert quit_.text == "tool 'quits' raised SystemExit: 8"


def test_an_asyncio_approval_handler_waits_for_another_task(loop: str) -> None:
    waiting: dict[str, asyncio.Future[bool]] = {}
    asked = asyncio.Event()

    async def ask(call: ToolUse) -> bool:
        decision = asyncio.get_running_loop().create_future()
        waiting[call.id] = decision
        asked.set()
        return await decision

    agent = (
        AgentBuilder()
        .provider(ScriptedProvider([reply_tool_calls(("add", {"a": 1, "b": 2})), reply_text("3")]))
        .tool(add)
        .approval_handler(kova.asyncio.on_asyncio(ask))
        .build()
    )

    async def main() -> kova.agent.AgentResponse:
        async with kova.asyncio.open_agent(agent) as bridged:
            turn = asyncio.create_task(bridged.run("1 + 2?"))
            await asked.wait()
            waiting["call_1"].set_result(True)  # another endpoint would do this
            return await turn

    response = run_on(loop, main)
    assert response.new_messages[1].content[0].text == "3"


# -- turns that pause for a person, and usage limits ---------------------------------------


@tool
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: the file.
    """
    return f"deleted {path}"


def _deferring() -> Agent:
    script = [reply_tool_calls(("delete_file", {"path": "/tmp/x"})), reply_text("gone")]
    return (
        AgentBuilder()
        .provider(ScriptedProvider(script * 2))
        .tool(delete_file)
        .defer_approvals()
        .build()
    )


def test_a_turn_paused_for_approval_is_resumed_through_the_bridge(loop: str) -> None:
    async def main() -> tuple[kova.agent.AgentResponse, kova.agent.AgentResponse, list[object]]:
        async with kova.asyncio.open_agent(_deferring()) as bridged:
            history: list[kova.Message] = [kova.Message.user("delete /tmp/x")]
            paused = await bridged.run(history)
            assert paused.pending is not None
            decided = paused.pending.approve(paused.pending.calls[0].id)
            history.extend(paused.new_messages)
            resumed = await bridged.resume(history, decided)
            # The same, streamed, on a second paused turn.
            again: list[kova.Message] = [kova.Message.user("delete /tmp/x")]
            second = await bridged.run(again)
            assert second.pending is not None
            again.extend(second.new_messages)
            decided = second.pending.approve(second.pending.calls[0].id)
            events = [event async for event in bridged.stream(again, resume=decided)]
            return paused, resumed, events

    paused, resumed, events = run_on(loop, main)
    assert paused.new_messages[-1].tool_uses[0].name == "delete_file"
    assert resumed.text == "gone"
    assert resumed.new_messages[0].content[0].text == "deleted /tmp/x"
    assert isinstance(events[-1], TurnCompleted)
    assert events[-1].response.text == "gone"


def test_a_resume_that_does_not_fit_raises_approval_mismatch_as_itself(loop: str) -> None:
    async def main() -> BaseException:
        async with kova.asyncio.open_agent(_deferring()) as bridged:
            paused = await bridged.run("delete /tmp/x")
            assert paused.pending is not None
            decided = paused.pending.approve(paused.pending.calls[0].id)
            with pytest.raises(kova.errors.ApprovalMismatchError) as caught:
                await bridged.resume("an unrelated history", decided)
            return caught.value

    _check_crossed(run_on(loop, main), kova.errors.ApprovalMismatchError)


def test_usage_limits_cross(loop: str) -> None:
    agent = build([reply_tool_calls(("add", {"a": 1, "b": 1})), reply_text("2")], add)

    async def main() -> BaseException:
        async with kova.asyncio.open_agent(agent) as bridged:
            with pytest.raises(kova.errors.UsageLimitExceeded) as caught:
                await bridged.run("1 + 1?", limits=kova.agent.UsageLimits(requests=1))
            return caught.value

    _check_crossed(run_on(loop, main), kova.errors.UsageLimitExceeded)


def test_usage_limits_cross_through_stream_structured(loop: str) -> None:
    answer = json.dumps({"route": "billing"})
    script = [reply_tool_calls(("add", {"a": 1, "b": 1})), reply_text(answer)]

    async def main() -> tuple[BaseException, object]:
        async with kova.asyncio.open_agent(build(script, add)) as bridged:
            over = bridged.stream_structured(
                "route it", Route, limits=kova.agent.UsageLimits(tool_calls=0)
            )
            with pytest.raises(kova.errors.UsageLimitExceeded) as caught:
                _ = [value async for value in over]
            with pytest.raises(TypeError, match="limits"):
                bridged.stream_structured("route it", Route, limits=1)  # type: ignore[arg-type]
        # At the edge the value arrives.
        async with kova.asyncio.open_agent(build(script, add)) as bridged:
            edge = bridged.stream_structured(
                "route it", Route, limits=kova.agent.UsageLimits(tool_calls=1)
            )
            _ = [value async for value in edge]
            return caught.value, edge.value

    error, value = run_on(loop, main)
    _check_crossed(error, kova.errors.UsageLimitExceeded)
    assert value == Route(route="billing")


def test_an_agent_used_as_a_tool_through_the_bridge(loop: str) -> None:
    """agent.as_tool() under kova.asyncio: the bridge opens the inner agent with the outer
    one, the stream carries the inner events with their path, and usage sums both."""

    def writer_script() -> list[Any]:
        return [reply_tool_calls(("researcher", {"input": "owls"})), reply_text("written")]

    async def on_asyncio() -> tuple[list[object], kova.agent.AgentResponse, bool, bool]:
        researcher = build([reply_text("owl facts")] * 2, name="researcher")
        writer = build(writer_script() * 2, researcher.as_tool(), name="writer")
        async with kova.asyncio.open_agent(writer) as bridged:
            opened = researcher.is_open
            events = [event async for event in bridged.stream("Write.")]
            response = await bridged.run("Write.")
        return events, response, opened, researcher.is_open

    events, response, opened, still_open = run_on(loop, on_asyncio)
    assert opened
    assert not still_open
    inner = [event for event in events if event.path]  # type: ignore[attr-defined]
    assert "".join(e.text for e in inner if isinstance(e, TextDelta)) == "owl facts"
    assert response.text == "written"
    assert set(response.usage_by_agent) == {"writer", "researcher"}
