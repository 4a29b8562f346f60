"""Code the host gives kova (a provider, a tool, a lifecycle hook, a subscriber) raising a
``trio.Cancelled`` it kept from elsewhere (issue 43, item 7): that is its fault, not a
cancellation. Passed on, the caller saw a cancellation it never asked for, a cancelled scope
further out swallowed the turn's error, and a tool's one stopped the tool pool."""

from __future__ import annotations

import pytest
import structlog
import trio

from kova import ProviderError, ToolResult, ToolUse
from kova.agent import AgentBuilder, TurnCompleted
from kova.testing import FunctionProvider, ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import tool


async def _a_cancelled() -> trio.Cancelled:
    """A real ``trio.Cancelled``, caught and kept (trio gives them no public constructor)."""
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.sleep_forever()
        except trio.Cancelled as exc:
            kept = exc
    return kept


async def _turn(agent: object, streamed: bool) -> str:
    if streamed:
        async with agent.stream("hi") as events:  # type: ignore[attr-defined]
            last = [event async for event in events][-1]
        assert isinstance(last, TurnCompleted)
        return last.response.text
    return (await agent.run("hi")).text  # type: ignore[attr-defined]


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "stream"])
async def test_a_provider_raising_its_own_cancelled_fails_the_request(streamed: bool) -> None:
    kept = await _a_cancelled()
    calls = 0

    def model(request: object) -> object:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise kept
        return reply_text("next")

    answers: list[str] = []
    async with AgentBuilder().provider(FunctionProvider(model)).build() as agent:
        with pytest.raises(ProviderError, match=r"raised trio.Cancelled while nothing"):
            await _turn(agent, streamed)
        answers.append(await _turn(agent, streamed))
    # Checked outside the block: the old Cancelled left it through the agent's own exit,
    # whose cancelled scope swallowed it, and everything in the block after it was skipped.
    assert answers == ["next"]  # the provider still serves


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "stream"])
async def test_a_tool_raising_its_own_cancelled_is_an_in_band_error(streamed: bool) -> None:
    kept = await _a_cancelled()

    @tool
    async def broken() -> str:
        """Raises a kept Cancelled."""
        raise kept

    script = [
        reply_tool_calls(("broken", {})),
        reply_text("done"),
        reply_tool_calls(("broken", {})),
        reply_text("again"),
    ]
    answers: list[str] = []
    async with AgentBuilder().provider(ScriptedProvider(script)).tool(broken).build() as agent:
        answers.append(await _turn(agent, streamed))
        answers.append(await _turn(agent, streamed))
    assert answers == ["done", "again"]  # the tool pool still serves


class _Hook:
    def __init__(self, kept: trio.Cancelled) -> None:
        self.kept = kept

    async def on_tool_start(self, call: ToolUse) -> None:
        raise self.kept

    def on_tool_end(self, call: ToolUse, result: ToolResult, **_: object) -> None:
        raise self.kept


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "stream"])
async def test_a_hook_or_subscriber_raising_its_own_cancelled_changes_nothing(
    streamed: bool,
) -> None:
    kept = await _a_cancelled()

    @tool
    async def fine() -> str:
        """Works."""
        return "fine"

    def subscriber(event: object) -> None:
        raise kept

    script = [reply_tool_calls(("fine", {})), reply_text("done")]
    builder = (
        AgentBuilder().provider(ScriptedProvider(script)).tool(fine).lifecycle_hook(_Hook(kept))
    )
    with structlog.testing.capture_logs() as logs:
        async with builder.build() as agent:
            agent.telemetry.subscribe(subscriber)
            answer = await _turn(agent, streamed)
    assert answer == "done"
    failed = [e for e in logs if e["event"] == "telemetry.subscriber.failed"]
    assert failed  # logged, the turn went on


async def test_a_real_cancellation_still_cancels(autojump_clock: object) -> None:
    """The check does not swallow a cancellation of the caller's own scope."""

    async def model(request: object) -> object:
        await trio.sleep_forever()
        raise AssertionError("not reached")

    async with AgentBuilder().provider(FunctionProvider(model)).build() as agent:
        with trio.move_on_after(5.0) as scope:
            await agent.run("hi")
        assert trio.current_time() == 5.0
    assert scope.cancelled_caught


async def test_a_real_cancellation_while_a_subscriber_is_awaited_is_no_failure_of_it(
    autojump_clock: object,
) -> None:
    """The caller cancelling while an async subscriber is awaited cancels the turn; it is
    not logged as the subscriber's failure (only a Cancelled it raised of its own is)."""
    from kova.telemetry import ToolExecutionStarted

    @tool
    async def fine() -> str:
        """Works."""
        return "fine"

    async def subscriber(event: object) -> None:
        if isinstance(event, ToolExecutionStarted):
            await trio.sleep_forever()

    script = [reply_tool_calls(("fine", {})), reply_text("done")]
    with structlog.testing.capture_logs() as logs:
        async with AgentBuilder().provider(ScriptedProvider(script)).tool(fine).build() as agent:
            agent.telemetry.subscribe(subscriber)
            with trio.move_on_after(5.0) as scope:
                await agent.run("hi")
            assert trio.current_time() == 5.0
    assert scope.cancelled_caught
    assert [e for e in logs if e["event"] == "telemetry.subscriber.failed"] == []
