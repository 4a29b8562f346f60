"""Guards inside agents used as tools, for slow consumers and on the asyncio bridge (issue
50): an inner agent's input guard runs beside its first model call; after a trip, the events
a streamed turn still held for its consumer are dropped, in trio and through kova.asyncio."""

from __future__ import annotations

import asyncio

import pytest
import trio

import kova.asyncio
from kova import TextDelta, ToolResult
from kova.agent import AgentBuilder, GuardTripped, InputGuard, OutputGuard, Trip
from kova.errors import GuardrailTripped
from kova.testing import ScriptedProvider, StreamReply, reply_text, reply_tool_calls


def _after(seconds: float, verdict: Trip | None, name: str = "screen"):
    async def check(text: str) -> Trip | None:
        await trio.sleep(seconds)
        return verdict

    check.__name__ = name
    return check


def _outer(inner_agent, *replies) -> ScriptedProvider:
    return ScriptedProvider([reply_tool_calls(("helper", {"input": "go"})), *replies])


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_inner_agents_input_guard_runs_beside_its_first_call(autojump_clock, streamed):
    inner = (
        AgentBuilder()
        .provider(ScriptedProvider([reply_text("inner answer")], latency=0.2))
        .guards(InputGuard(_after(0.05, None)))
        .name("helper")
        .build()
    )
    outer_provider = _outer(inner, reply_text("done"))
    outer = AgentBuilder().provider(outer_provider).tool(inner.as_tool()).build()
    async with outer:
        start = trio.current_time()
        if streamed:
            async with outer.stream("ask") as events:
                async for _ in events:
                    pass
        else:
            await outer.run("ask")
        # max(model, guard), not their sum (0.25 with the guard before the call)
        assert trio.current_time() - start == pytest.approx(0.2)
    result = outer_provider.requests[1].messages[-1].content[0]
    assert isinstance(result, ToolResult)
    assert result.text == "inner answer"


async def test_an_inner_trip_cancels_the_inner_call_and_is_answered_in_band(autojump_clock):
    inner_provider = ScriptedProvider([reply_text("inner answer")], latency=0.2)
    inner = (
        AgentBuilder()
        .provider(inner_provider)
        .guards(InputGuard(_after(0.05, Trip("not for me"))))
        .name("helper")
        .build()
    )
    outer_provider = _outer(inner, reply_text("done"))
    outer = AgentBuilder().provider(outer_provider).tool(inner.as_tool()).build()
    async with outer:
        start = trio.current_time()
        response = await outer.run("ask")
        assert trio.current_time() - start == pytest.approx(0.05)
    assert response.text == "done"
    result = outer_provider.requests[1].messages[-1].content[0]
    assert isinstance(result, ToolResult)
    assert result.is_error
    assert "not for me" in result.text


async def test_a_slow_consumer_gets_nothing_the_turn_held_after_a_trip(autojump_clock):
    provider = ScriptedProvider(
        [StreamReply(response=reply_text("word " * 100), chunk_chars=5)],
        batch_size=1,
        batch_delay=0.001,
    )
    received: list[str] = []
    marker: list[int] = []

    async def screen(text: str) -> Trip:
        await trio.sleep(0.05)
        marker.append(len(received))  # what the consumer had when the guard tripped
        return Trip("no")

    agent = AgentBuilder().provider(provider).guards(InputGuard(screen)).build()
    last: list[object] = []
    async with agent:
        with pytest.raises(GuardrailTripped):
            async with agent.stream("go", buffer=16) as events:
                async for event in events:
                    last.append(event)
                    if isinstance(event, TextDelta):
                        received.append(event.text)
                        await trio.sleep(0.01)  # slower than the model: events wait in the buffer
    # ~5 events taken in 0.05 s while the model sent ~50: none of those held is handed on;
    # the guard's verdict is the last event before the error.
    assert 0 < marker[0] < 10
    assert len(received) - marker[0] <= 1
    assert isinstance(last[-1], GuardTripped)
    assert (last[-1].guard, last[-1].reason, last[-1].denied) == ("screen", "no", False)


def test_on_the_asyncio_bridge_a_trip_drops_what_the_consumer_had_not_taken() -> None:
    received: list[str] = []
    last: list[object] = []
    marker: list[int] = []

    async def screen(text: str) -> Trip:
        await trio.sleep(0.05)
        marker.append(len(received))
        return Trip("stop")

    async def main() -> BaseException | None:
        provider = ScriptedProvider(
            [StreamReply(response=reply_text("word " * 400), chunk_chars=5)],
            batch_size=1,
            batch_delay=0.0005,
        )
        agent = AgentBuilder().provider(provider).build()
        error = None
        async with kova.asyncio.open_agent(agent) as bridged:
            try:
                async with bridged.stream("go", buffer=64, guards=[InputGuard(screen)]) as events:
                    async for event in events:
                        last.append(event)
                        if isinstance(event, TextDelta):
                            received.append(event.text)
                            await asyncio.sleep(0.002)  # slower than the model
            except GuardrailTripped as exc:
                error = exc
            # A bridged run takes guards too.
            with pytest.raises(GuardrailTripped):
                await bridged.run("go", guards=[InputGuard(lambda t: Trip("no"), blocking=True)])
        return error

    error = asyncio.run(main())
    assert isinstance(error, GuardrailTripped)
    # The bridge held up to 64 events for a consumer taking 2 ms each: none reaches it, the
    # guard's verdict does.
    assert 0 < marker[0] < 60
    assert len(received) - marker[0] <= 1
    assert isinstance(last[-1], GuardTripped)


def test_on_the_asyncio_bridge_an_output_trip_drops_what_the_consumer_had_not_taken() -> None:
    # A turn without tools or concurrent guards: the bridged stream pulls the agent loop's
    # own generator, which must tell the bridge of the trip too.
    received: list[str] = []
    last: list[object] = []
    marker: list[int] = []

    def screen(text: str) -> Trip | None:
        if len(text) < 600:
            return None
        marker.append(len(received))
        return Trip("stop")

    async def main() -> BaseException | None:
        provider = ScriptedProvider(
            [StreamReply(response=reply_text("word " * 400), chunk_chars=5)],
            batch_size=1,
            batch_delay=0.0005,
        )
        agent = AgentBuilder().provider(provider).build()
        guard = OutputGuard(screen, every_chars=50)
        async with kova.asyncio.open_agent(agent) as bridged:
            try:
                async with bridged.stream("go", buffer=64, guards=[guard]) as events:
                    async for event in events:
                        last.append(event)
                        if isinstance(event, TextDelta):
                            received.append(event.text)
                            await asyncio.sleep(0.002)  # slower than the model
            except GuardrailTripped as exc:
                return exc
        return None

    assert isinstance(asyncio.run(main()), GuardrailTripped)
    assert 0 < marker[0] < 120
    assert len(received) - marker[0] <= 1  # the events the bridge held were dropped
    assert isinstance(last[-1], GuardTripped)


async def test_a_trip_appends_nothing_to_the_session(tmp_path, autojump_clock):
    from kova.sessions import SqliteSessionStore

    agent = (
        AgentBuilder()
        .provider(ScriptedProvider([reply_text("hi"), reply_text("fine")], latency=0.2))
        .guards(InputGuard(_after(0.05, None)), OutputGuard(_no_secret))
        .build()
    )
    async with SqliteSessionStore(tmp_path / "s.db") as store, agent:
        session = store.session("chat")
        assert (await agent.run("hello", session=session)).text == "hi"
        seen: list[object] = []
        with pytest.raises(GuardrailTripped):
            async with agent.stream("tell the secret", session=session) as events:
                async for event in events:
                    seen.append(event)
        assert isinstance(seen[-1], GuardTripped)  # an output guard's trip, then the error
        assert [m.text for m in await session.load()] == ["hello", "hi"]


def _no_secret(text: str) -> Trip | None:
    return Trip("asked for the secret") if "fine" in text else None
