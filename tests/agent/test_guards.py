"""Guards (issue 50): input guards beside the first model call (cancelling it the moment one
trips), blocking input guards, output guards on the streamed text and the answer, tool guards
that pass, deny in-band or trip, and an agent as a guard's check. Times are virtual."""

from __future__ import annotations

import pytest
import trio

from kova import Message, TextDelta, ToolResult
from kova.agent import (
    AgentBuilder,
    Deny,
    GuardPassed,
    GuardTripped,
    InputGuard,
    OutputGuard,
    ToolGuard,
    Trip,
    TurnCompleted,
)
from kova.errors import BuildError, GuardrailTripped
from kova.testing import ScriptedProvider, StreamReply, reply_text, reply_tool_calls
from kova.tools import tool

RAN: list[str] = []


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    RAN.append(path)
    return "deleted"


def _after(seconds: float, verdict: Trip | None):
    async def check(text: str) -> Trip | None:
        await trio.sleep(seconds)
        return verdict

    check.__name__ = "topic_check"
    return check


async def test_an_input_guard_that_passes_costs_no_time_beside_the_model(autojump_clock):
    provider = ScriptedProvider([reply_text("hi")], latency=0.2)
    agent = AgentBuilder().provider(provider).guards(InputGuard(_after(0.05, None))).build()
    async with agent:
        start = trio.current_time()
        response = await agent.run("hello")
        assert trio.current_time() - start == pytest.approx(0.2)
    assert response.text == "hi"


async def test_a_slow_guard_holds_the_answer_until_it_passes(autojump_clock):
    provider = ScriptedProvider([reply_text("hi")], latency=0.2)
    agent = AgentBuilder().provider(provider).guards(InputGuard(_after(0.5, None))).build()
    async with agent:
        start = trio.current_time()
        await agent.run("hello")
        assert trio.current_time() - start == pytest.approx(0.5)


async def test_a_trip_cancels_the_model_call_at_once_and_produces_nothing(autojump_clock):
    provider = ScriptedProvider([reply_text("hi")], latency=0.2)
    agent = (
        AgentBuilder()
        .provider(provider)
        .guards(InputGuard(_after(0.05, Trip("off topic"))))
        .build()
    )
    history = [Message.user("hello")]
    async with agent:
        start = trio.current_time()
        with pytest.raises(GuardrailTripped) as caught:
            await agent.run(history)
        assert trio.current_time() - start == pytest.approx(0.05)
        # The agent serves the next turn.
        agent2 = AgentBuilder().provider(ScriptedProvider([reply_text("ok")])).build()
        async with agent2:
            assert (await agent2.run("again")).text == "ok"
    assert caught.value.guard == "topic_check"
    assert caught.value.reason == "off topic"
    assert history == [Message.user("hello")]


async def test_a_blocking_guard_that_trips_spends_no_tokens(autojump_clock):
    provider = ScriptedProvider([reply_text("hi")])
    guard = InputGuard(lambda text: Trip("no") if "secret" in text else None, blocking=True)
    agent = AgentBuilder().provider(provider).guards(guard).build()
    async with agent:
        with pytest.raises(GuardrailTripped):
            await agent.run("tell me the secret")
        assert provider.requests == []
        assert (await agent.run("hello")).text == "hi"


async def test_the_model_never_runs_tools_before_the_input_guards_pass(autojump_clock):
    RAN.clear()
    provider = ScriptedProvider(
        [reply_tool_calls(("delete_file", {"path": "a.txt"})), reply_text("done")], latency=0.01
    )
    agent = (
        AgentBuilder()
        .provider(provider)
        .tool(delete_file)
        .guards(InputGuard(_after(0.5, Trip("not allowed"))))
        .build()
    )
    async with agent:
        with pytest.raises(GuardrailTripped):
            await agent.run("delete everything")
    assert RAN == []


async def test_a_streamed_trip_lets_at_most_one_more_chunk_through(autojump_clock):
    text = "word " * 60
    provider = ScriptedProvider(
        [StreamReply(response=reply_text(text), chunk_chars=5)], batch_size=1, batch_delay=0.01
    )
    agent = AgentBuilder().provider(provider).guards(InputGuard(_after(0.055, Trip("no")))).build()
    received: list[float] = []
    async with agent:
        with pytest.raises(GuardrailTripped):
            async with agent.stream("go") as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        received.append(trio.current_time())
    tripped_at = min(received) - 0.01 + 0.055  # the stream started when the first batch was due
    assert len([at for at in received if at > tripped_at]) <= 1
    assert len(received) < 60


async def test_an_output_guard_stops_a_stream_at_the_sentence_that_trips():
    provider = ScriptedProvider(
        [StreamReply(response=reply_text("All fine. This is forbidden. More text."), chunk_chars=4)]
    )
    guard = OutputGuard(lambda text: Trip("forbidden word") if "forbidden" in text else None)
    agent = AgentBuilder().provider(provider).guards(guard).build()
    seen = ""
    async with agent:
        with pytest.raises(GuardrailTripped, match="forbidden word"):
            async with agent.stream("go") as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        seen += event.text
    assert "More" not in seen


async def test_an_output_guard_checks_the_whole_answer_every_n_characters_and_at_the_end():
    seen: list[str] = []

    def record(text: str) -> None:
        seen.append(text)

    provider = ScriptedProvider([StreamReply(response=reply_text("x" * 25), chunk_chars=5)])
    agent = AgentBuilder().provider(provider).guards(OutputGuard(record, every_chars=10)).build()
    async with agent, agent.stream("go") as events:
        kinds = [type(event).__name__ async for event in events]
    assert [len(text) for text in seen] == [10, 20, 25]
    assert kinds[-2:] == ["GuardPassed", "TurnCompleted"]


async def test_a_tool_guard_denies_in_band_and_the_turn_goes_on():
    RAN.clear()
    provider = ScriptedProvider(
        [reply_tool_calls(("delete_file", {"path": "/etc/passwd"})), reply_text("could not")]
    )

    def no_system_files(call) -> Deny | None:
        return Deny("system files are off limits") if call.input["path"].startswith("/") else None

    agent = (
        AgentBuilder()
        .provider(provider)
        .tool(delete_file)
        .guards(ToolGuard(no_system_files))
        .build()
    )
    async with agent, agent.stream("delete it") as events:
        seen = [event async for event in events]
    assert RAN == []
    denied = [e for e in seen if isinstance(e, GuardTripped)]
    assert denied[0].denied
    result = provider.requests[1].messages[-1].content[0]
    assert isinstance(result, ToolResult)
    assert result.is_error
    assert "system files are off limits" in result.text
    assert isinstance(seen[-1], TurnCompleted)


async def test_a_tool_guard_that_trips_ends_the_turn_before_the_call_runs():
    RAN.clear()
    provider = ScriptedProvider([reply_tool_calls(("delete_file", {"path": "a"})), reply_text("x")])
    agent = (
        AgentBuilder()
        .provider(provider)
        .tool(delete_file)
        .guards(ToolGuard(lambda call: Trip("no deleting"), name="no_delete"))
        .build()
    )
    async with agent:
        with pytest.raises(GuardrailTripped) as caught:
            await agent.run("delete a")
    assert caught.value.guard == "no_delete"
    assert RAN == []


async def test_an_agent_can_be_the_check():
    judge = (
        AgentBuilder()
        .provider(ScriptedProvider([reply_text('{"trip": true, "reason": "asks for malware"}')]))
        .name("judge")
        .build()
    )
    provider = ScriptedProvider([reply_text("hi")])
    agent = AgentBuilder().provider(provider).guards(InputGuard(judge, blocking=True)).build()
    async with judge, agent:
        with pytest.raises(GuardrailTripped) as caught:
            await agent.run("write malware")
    assert caught.value.guard == "judge"
    assert caught.value.reason == "asks for malware"


async def test_per_call_guards_replace_the_agents_and_passes_are_events():
    provider = ScriptedProvider([reply_text("hi"), reply_text("hi")])
    agent = AgentBuilder().provider(provider).guards(InputGuard(lambda t: Trip("x"))).build()
    async with agent:
        async with agent.stream("go", guards=[InputGuard(lambda t: None, name="ok")]) as events:
            seen = [event async for event in events]
        assert any(isinstance(e, GuardPassed) and e.guard == "ok" for e in seen)
        assert (await agent.run("go", guards=[])).text == "hi"


async def test_a_check_that_raises_fails_the_turn_with_its_error():
    def broken(text: str) -> None:
        raise RuntimeError("the moderation service is down")

    agent = (
        AgentBuilder()
        .provider(ScriptedProvider([reply_text("hi")]))
        .guards(InputGuard(broken))
        .build()
    )
    async with agent:
        with pytest.raises(RuntimeError, match="moderation service"):
            await agent.run("hello")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: InputGuard("not callable"), "function"),
        (lambda: OutputGuard(print, every_chars=0), "every_chars"),
        (lambda: InputGuard(print, blocking="yes"), "blocking"),
        (lambda: AgentBuilder().guards(print), "InputGuard, OutputGuard or ToolGuard"),
    ],
)
def test_bad_guards_are_refused(make, message):
    with pytest.raises(BuildError, match=message):
        make()


async def test_a_check_returning_something_else_is_a_clear_error():
    agent = (
        AgentBuilder()
        .provider(ScriptedProvider([reply_text("hi")]))
        .guards(InputGuard(lambda text: "fine", blocking=True))
        .build()
    )
    async with agent:
        with pytest.raises(TypeError, match="returns None or Trip"):
            await agent.run("hello")
