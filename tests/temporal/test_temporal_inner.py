"""An agent given to the worker's agent as a tool (``agent.as_tool()``) on Temporal counts as
part of the Temporal turn, as it does in-process: its usage is in the turn's ``usage`` and
``usage_by_agent`` (under the same key), its model calls and tool calls count against the
turn's usage limits, its live events are the turn's (with their ``path``), its calls wait
for the turn's approvals. Each test runs the same turn in-process and on the dev server the
suite starts, over one scripted fake OpenAI server, and compares."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest
import trio
from temporal_helpers import builder, fake_openai, run, unique
from temporalio.client import Client

import kova
import kova.errors
import kova.temporal
from kova import Usage
from kova.testing import ScriptRequest, reply_text, reply_tool_calls
from kova.tools import tool

if TYPE_CHECKING:
    from kova.agent import Agent

WRITER = "You write short stories."
EDITOR = "You edit facts."
RESEARCHER = "You find facts."

LOOKED_UP: list[str] = []
ASKED: list[str] = []
"""The system prompt of every request the model got: whose calls were made."""


def used(input_tokens: int, output_tokens: int) -> Usage:
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens)


@tool
async def lookup(topic: str) -> str:
    """One fact about a topic."""
    LOOKED_UP.append(topic)
    return f"{topic} hunt at night"


def script(request: ScriptRequest) -> Any:
    """The writer asks its inner agent (named after the tool it offers), then writes from
    its answer; the researcher looks the topic up, then answers. Each reply's usage is its
    own, so the sums say whose calls were counted."""
    system = request.messages[0].text
    ASKED.append(system)
    last = request.messages[-1]
    answered = last.role.value == "tool"
    if system == RESEARCHER:
        if answered:
            return reply_text(f"Fact: {last.content[0].text}.", usage=used(200, 30))
        return reply_tool_calls(("lookup", {"topic": "owls"}), usage=used(100, 20))
    if system == EDITOR:  # between the writer and the researcher, in the two-level tree
        if answered:
            return reply_text(f"Edited {last.content[0].text}", usage=used(60, 6))
        return reply_tool_calls(("researcher", {"input": "owls"}), usage=used(50, 5))
    if answered:
        return reply_text(f"Story. {last.content[0].text}", usage=used(40, 9))
    inner = request.tools[0].name
    return reply_tool_calls((inner, {"input": "owls"}), usage=used(11, 3))


def agents(base_url: str, inner_name: str | None, **limits: Any) -> Agent:
    """The writer, with the researcher as its one tool (named, or left unnamed: then it
    counts as its tool's name, "agent"); with ``inner_name="editor"``, the editor, which
    has the researcher as its tool."""
    researcher = builder(base_url, lookup).system_prompt(RESEARCHER)
    if inner_name == "editor":
        researcher.name("researcher")
        inner = builder(base_url, researcher.build().as_tool()).system_prompt(EDITOR)
        inner.name("editor")
    else:
        inner = researcher
        if inner_name is not None:
            inner.name(inner_name)
    writer = builder(base_url, inner.build().as_tool()).name("writer").system_prompt(WRITER)
    if limits:
        writer.usage_limits(**limits)
    return writer.build()


def in_process(base_url: str, inner_name: str | None, **limits: Any) -> Any:
    """The turn run by ``Agent.run``: its response, or the error it raised."""

    async def main() -> Any:
        async with agents(base_url, inner_name, **limits) as writer:
            try:
                return await writer.run("Write about owls.")
            except kova.errors.KovaError as exc:
                return exc

    return trio.run(main)


def on_temporal(temporal_address: str, base_url: str, inner_name: str | None, **limits: Any) -> Any:
    """The same turn on Temporal (live events on): (response or TurnFailedError, events,
    the worker agent's and the researcher's telemetry, the replayed history's outcome)."""
    from temporalio.worker import Replayer

    writer = agents(base_url, inner_name, **limits)
    researcher = next(iter(writer.config.registry)).agent  # type: ignore[attr-defined]
    telemetry: tuple[list[Any], list[Any]] = ([], [])
    writer.telemetry.subscribe(telemetry[0].append)
    researcher.telemetry.subscribe(telemetry[1].append)

    async def main() -> Any:
        client = await Client.connect(temporal_address)
        queue = unique("inner")
        async with kova.temporal.worker(client, task_queue=queue, agents={"writer": writer}):
            handle = await kova.temporal.start_turn(
                client,
                agent="writer",
                history="Write about owls.",
                task_queue=queue,
                id=unique("turn"),
                events=True,
            )
            try:
                outcome: Any = await kova.temporal.response(handle)
            except kova.temporal.TurnFailedError as exc:
                outcome = exc
            events = [event async for event in kova.temporal.events(handle)]
        # Temporal's default Replayer (a turn failed by a kova error replays as failed).
        replayer = Replayer(workflows=[kova.temporal.AgentWorkflow])
        replayed = await replayer.replay_workflow(
            await handle.fetch_history(), raise_on_replay_failure=False
        )
        return outcome, events, telemetry, replayed.replay_failure

    return run(main)


@pytest.mark.parametrize(("inner_name", "key"), [("researcher", "researcher"), (None, "agent")])
def test_an_inner_agents_usage_counts_in_the_temporal_turn_as_in_process(
    temporal_address: str, inner_name: str | None, key: str
) -> None:
    from kova.telemetry import ModelCallFinished, ToolStarted, TurnStarted

    with fake_openai(script) as base_url:
        expected = in_process(base_url, inner_name)
        response, events, (outer_seen, inner_seen), failure = on_temporal(
            temporal_address, base_url, inner_name
        )
    writer_usage = used(11, 3) + used(40, 9)
    inner_usage = used(100, 20) + used(200, 30)
    assert expected.usage_by_agent == {"writer": writer_usage, key: inner_usage}
    assert response.text == expected.text == "Story. Fact: owls hunt at night."
    assert response.usage == expected.usage == writer_usage + inner_usage
    assert response.usage_by_agent == expected.usage_by_agent
    assert response.llm_calls == expected.llm_calls == 2  # the outer agent's own
    assert failure is None  # replaying the history gives the same turn

    # The live events: the inner turn's inside the outer call's, with its id as their path.
    tool_name = "researcher" if inner_name else "agent"
    outer_call = next(event.call for event in events if event.kind == "tool_started")
    assert outer_call.name == tool_name
    shown: list[tuple[str, tuple[str, ...]]] = []
    for event in events:
        if (event.kind != "text" or event.path) and shown[-1:] != [(event.kind, event.path)]:
            shown.append((event.kind, event.path))  # a run of text may come in two batches
    inner_path = (outer_call.id,)
    assert shown == [
        ("tool_started", ()),
        ("tool_started", inner_path),
        ("tool_finished", inner_path),
        ("text", inner_path),
        ("tool_finished", ()),
    ]
    nested = [event for event in events if event.path]
    assert [event.call.name for event in nested if event.call] == ["lookup", "lookup"]
    assert "".join(event.text for event in nested) == "Fact: owls hunt at night."
    assert len({event.activity for event in nested}) == 1  # the outer tool call's activity
    assert "".join(event.text for event in events if event.kind == "text" and not event.path) == (
        "Story. Fact: owls hunt at night."
    )

    # Telemetry: the researcher's turn reports to its own hub, as a child of the tool call.
    tool_span = next(event.span_id for event in outer_seen if isinstance(event, ToolStarted))
    started = [event for event in inner_seen if isinstance(event, TurnStarted)]
    assert [event.parent_id for event in started] == [tool_span]
    finished = [event for event in inner_seen if isinstance(event, ModelCallFinished)]
    assert [event.usage for event in finished] == [used(100, 20), used(200, 30)]


@pytest.mark.parametrize(
    ("limits", "fails"),
    [
        # writer, researcher, researcher, writer: the fourth call is one too many, and
        # only if the researcher's two count in the turn.
        ({"requests": 3}, True),
        ({"requests": 4}, False),
        # the researcher's second call is the third: not sent, an error result for the
        # writer, whose turn then fails
        ({"requests": 2}, True),
        # the researcher's second reply takes the turn to 14 + 120 + 230 tokens
        ({"total_tokens": 200}, True),
        # the writer's step and the researcher's lookup: two tool calls
        ({"tool_calls": 1}, True),
        ({"tool_calls": 2}, False),
    ],
)
def test_the_outer_usage_limits_count_the_inner_turn_as_in_process(
    temporal_address: str, limits: dict[str, int], fails: bool
) -> None:
    with fake_openai(script) as base_url:
        ASKED.clear()
        LOOKED_UP.clear()
        expected = in_process(base_url, "researcher", **limits)
        done = (list(ASKED), list(LOOKED_UP))
        ASKED.clear()
        LOOKED_UP.clear()
        outcome, _events, _telemetry, failure = on_temporal(
            temporal_address, base_url, "researcher", **limits
        )
    assert failure is None
    # The same calls were made: a call over a limit was not started, inner or outer.
    assert done == (ASKED, LOOKED_UP)
    if not fails:
        assert outcome.usage == expected.usage
        assert outcome.usage_by_agent == expected.usage_by_agent
        return
    assert isinstance(expected, kova.errors.UsageLimitExceeded)
    assert isinstance(outcome, kova.temporal.TurnFailedError)
    assert outcome.error_type == "UsageLimitExceeded"
    assert str(expected) in str(outcome)


def test_an_inner_agents_deferred_call_waits_in_the_temporal_turn(temporal_address: str) -> None:
    """An inner agent with no approval policy of its own follows the worker agent's: its
    call left to a person pauses the inner turn and the Temporal turn (the ``pending``
    query shows it with its path), and deciding it continues the inner turn where it
    paused, in the same call's next activity."""
    LOOKED_UP.clear()
    with fake_openai(script) as base_url:
        researcher = builder(base_url, lookup).system_prompt(RESEARCHER).name("researcher")
        writer = (
            builder(base_url, researcher.build().as_tool())
            .name("writer")
            .system_prompt(WRITER)
            .defer_approvals(lambda call: call.name == "lookup")
        )

        async def main() -> Any:
            client = await Client.connect(temporal_address)
            queue = unique("inner-approvals")
            async with kova.temporal.worker(client, task_queue=queue, agents={"w": writer}):
                handle = await kova.temporal.start_turn(
                    client,
                    agent="w",
                    history="Write about owls.",
                    task_queue=queue,
                    id=unique("turn"),
                    events=True,
                )
                # Polled: the pause is in the workflow, on the server (no event to wait on).
                while (pending := await kova.temporal.pending(handle)) is None:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
                looked_up = list(LOOKED_UP)
                await kova.temporal.decide(handle, pending.approve(pending.calls[0]))
                response = await kova.temporal.response(handle)
                events = [event async for event in kova.temporal.events(handle)]
            return pending, looked_up, response, events

        pending, looked_up, response, events = run(main)
    assert looked_up == []  # nothing ran before the decision
    (call,) = pending.calls
    assert call.name == "lookup"
    outer_call = next(event.call for event in events if event.kind == "tool_started")
    assert call.path == (outer_call.id,)
    assert LOOKED_UP == ["owls"]
    assert response.text == "Story. Fact: owls hunt at night."
    assert response.pending is None
    assert response.usage_by_agent == {
        "writer": used(11, 3) + used(40, 9),
        "researcher": used(100, 20) + used(200, 30),
    }
    deferred = [(event.kind, event.path) for event in events if event.kind == "tool_deferred"]
    assert deferred == [("tool_deferred", (outer_call.id,)), ("tool_deferred", ())]


@pytest.mark.parametrize(
    ("limits", "fails"),
    [
        ({}, False),
        # writer, editor, researcher, researcher: the editor's second call is the fifth
        ({"requests": 4}, True),
        # the writer's call, the editor's, the researcher's lookup: the third is refused
        ({"tool_calls": 2}, True),
    ],
)
def test_two_levels_of_inner_agents_count_in_the_temporal_turn_as_in_process(
    temporal_address: str, limits: dict[str, int], fails: bool
) -> None:
    """writer > editor > researcher: the researcher's turn counts in the editor's and in the
    Temporal turn (through the tool activity's stand-in for it), its events nest two deep."""
    with fake_openai(script) as base_url:
        ASKED.clear()
        expected = in_process(base_url, "editor", **limits)
        asked = list(ASKED)
        ASKED.clear()
        outcome, events, _telemetry, failure = on_temporal(
            temporal_address, base_url, "editor", **limits
        )
    assert failure is None
    assert asked == ASKED
    if fails:
        assert isinstance(expected, kova.errors.UsageLimitExceeded)
        assert outcome.error_type == "UsageLimitExceeded"
        assert str(expected) in str(outcome)
        return
    assert outcome.text == expected.text == "Story. Edited Fact: owls hunt at night."
    assert (
        outcome.usage_by_agent
        == expected.usage_by_agent
        == {
            "writer": used(11, 3) + used(40, 9),
            "editor": used(50, 5) + used(60, 6),
            "researcher": used(100, 20) + used(200, 30),
        }
    )
    assert outcome.usage == expected.usage
    paths = {event.path for event in events}
    editor_call = next(event.call for event in events if event.kind == "tool_started")
    deeper = {path for path in paths if len(path) == 2}
    assert len(deeper) == 1
    assert paths == {(), (editor_call.id,), *deeper}
    assert next(iter(deeper))[0] == editor_call.id
    lookups = [event.kind for event in events if event.call and event.call.name == "lookup"]
    assert lookups == ["tool_started", "tool_finished"]
    assert all(
        event.path in deeper for event in events if event.call and event.call.name == "lookup"
    )


def test_a_structured_inner_agents_re_asks_count_in_the_temporal_turn(
    temporal_address: str,
) -> None:
    """``as_tool(output=...)``: the inner answer is validated and re-asked while invalid
    inside the tool activity; every attempt's usage counts in the Temporal turn."""
    import pydantic

    class Route(pydantic.BaseModel):
        route: str

    router_prompt = "You route."

    def routed(request: ScriptRequest) -> Any:
        last = request.messages[-1]
        if request.messages[0].text == router_prompt:
            if len(request.messages) == 2:  # the first attempt: not the schema's JSON
                return reply_text("owls, I think", usage=used(7, 1))
            return reply_text('{"route": "owls"}', usage=used(9, 2))
        if last.role.value == "tool":
            return reply_text(f"Routed: {last.content[0].text}", usage=used(5, 5))
        return reply_tool_calls(("router", {"input": "owls"}), usage=used(3, 3))

    def writer(base_url: str) -> Agent:
        router = builder(base_url).name("router").system_prompt(router_prompt).build()
        return builder(base_url, router.as_tool(output=Route)).name("writer").build()

    with fake_openai(routed) as base_url:

        async def in_process() -> Any:
            async with writer(base_url) as agent:
                return await agent.run("Route this.")

        expected = trio.run(in_process)

        async def main() -> Any:
            client = await Client.connect(temporal_address)
            queue = unique("inner-structured")
            async with kova.temporal.worker(
                client, task_queue=queue, agents={"writer": writer(base_url)}
            ):
                return await kova.temporal.run_turn(
                    client, agent="writer", history="Route this.", task_queue=queue, id=unique("t")
                )

        response = run(main)
    assert response.text == expected.text == 'Routed: {"route": "owls"}'
    assert (
        response.usage_by_agent
        == expected.usage_by_agent
        == {
            "writer": used(3, 3) + used(5, 5),
            "router": used(7, 1) + used(9, 2),
        }
    )
    assert response.usage == expected.usage


def test_the_stand_in_counts_what_the_outer_turn_would_and_the_workflow_reads_it_strictly() -> None:
    """No server: an OuterCounter built from a turn's figures refuses what the turn itself
    would refuse (and stays failed), and its record, counted in the turn, fails the turn the
    same way; the workflow reads a record strictly."""
    from kova import InferenceConfig
    from kova.agent import CallModel, Finished, Turn, UsageLimits
    from kova.agent._state_json import usage_to_json
    from kova.errors import SerializationError, UsageLimitExceeded
    from kova.temporal._inner import OuterCounter, count_inner, figures_from_json, outer_figures

    limits = UsageLimits(requests=3, total_tokens=100)
    turn = Turn.start("hi", tools=(), config=InferenceConfig(), limits=limits)
    stand_in = OuterCounter(figures_from_json(outer_figures(turn)))
    stand_in.inner_request()
    stand_in.inner_replied("inner", used(4, 2))
    stand_in.inner_tools(2)
    stand_in.inner_request()
    stand_in.inner_request()
    with pytest.raises(UsageLimitExceeded):  # the fourth request
        stand_in.inner_request()
    # Written down before it was refused, as refused (not sent).
    assert stand_in.counted[-1] == ["request", "refused"]
    with pytest.raises(UsageLimitExceeded):  # it stays failed
        stand_in.inner_tools(1)
    with pytest.raises(UsageLimitExceeded):
        count_inner(turn, stand_in.counted)
    with pytest.raises(UsageLimitExceeded):  # the turn has failed
        turn.next_step()

    turn = Turn.start("hi", tools=(), config=InferenceConfig(), limits=limits)
    stand_in = OuterCounter(figures_from_json(outer_figures(turn)))
    with pytest.raises(UsageLimitExceeded):  # the tokens, as the turn counts them
        stand_in.inner_replied("inner", used(60, 60))

    turn = Turn.start("hi", tools=(), config=InferenceConfig())
    assert outer_figures(turn) is None  # no limits: nothing to check against
    count_inner(turn, [["request"], ["replied", "inner", usage_to_json(used(4, 2))]])
    step = turn.next_step()
    assert isinstance(step, CallModel)
    turn.model_replied(reply_text("done"))
    finished = turn.next_step()
    assert isinstance(finished, Finished)
    assert finished.response.usage_by_agent["inner"] == used(4, 2)
    for bad in ("x", [["request", 1]], [["tools", True]], [["replied", 3, {}]], [[]]):
        with pytest.raises(SerializationError):
            count_inner(turn, bad)
