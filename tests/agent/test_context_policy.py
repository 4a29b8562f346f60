"""Context compaction on the turn core: the strategies, the core's decision, and whole agent
runs that would overflow the window without them."""

from __future__ import annotations

import random

import pytest

from kova import InferenceConfig, Message, ToolResult, ToolUse, Usage
from kova.agent import (
    AgentBuilder,
    ClearToolResults,
    Compact,
    ContextCompacted,
    ContextPolicy,
    SlidingWindow,
    Summarize,
    Turn,
)
from kova.agent._context import (
    clear_tool_results,
    cut_oversized,
    known_window,
    slide,
    summary_cut,
)
from kova.agent._turn import CallModel, RunTools
from kova.errors import BuildError, ContextBudgetExceededError
from kova.providers import heuristic_count_tokens
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import tool


def assert_pairs_intact(messages: tuple[Message, ...] | list[Message]) -> None:
    """Every tool call has its result right after it, and every result its call."""
    for index, message in enumerate(messages):
        calls = [block.id for block in message.content if isinstance(block, ToolUse)]
        results = [block.tool_use_id for block in message.content if isinstance(block, ToolResult)]
        if calls:
            assert index + 1 < len(messages), "a call without its result"
            answered = [
                block.tool_use_id
                for block in messages[index + 1].content
                if isinstance(block, ToolResult)
            ]
            assert answered == calls, "a call separated from its result"
        if results:
            previous = messages[index - 1] if index else None
            assert previous is not None
            made = [block.id for block in previous.content if isinstance(block, ToolUse)]
            assert results == made, "a result without its call"


def _loop(steps: int, size: int) -> list[Message]:
    messages = [Message.system("be brief"), Message.user("go")]
    for step in range(steps):
        call = ToolUse(id=f"c{step}", name="read" if step % 2 else "keep", input={"n": step})
        messages.append(Message.assistant([call]))
        messages.append(Message.tool_results([ToolResult(tool_use_id=call.id, content="x" * size)]))
    return messages


# -- the strategies ---------------------------------------------------------------------------


def test_clear_tool_results_keeps_the_newest_and_the_named_tools():
    messages = _loop(6, 1000)
    cleared, count = clear_tool_results(
        messages, 1, ClearToolResults(keep_last=2, keep_tools=("keep",))
    )
    texts = [
        block.text
        for message in cleared
        for block in message.content
        if isinstance(block, ToolResult)
    ]
    # c0..c5: the 'keep' tool (even steps) is never cleared; the last two stay whole
    assert count == 2  # c1 and c3
    assert texts[1].startswith("[tool result cleared to save context: 1000 characters from read]")
    assert texts[3].startswith("[tool result cleared")
    assert texts[0] == texts[2] == texts[4] == texts[5] == "x" * 1000
    assert messages[3].content[0].text == "x" * 1000  # the input list is untouched
    assert_pairs_intact(cleared)


def test_a_sliding_window_never_splits_a_call_from_its_result_and_keeps_the_system_prompt():
    messages = _loop(10, 400)

    def estimate(candidate):
        return heuristic_count_tokens(candidate)

    slid, removed = slide(messages, 1, 600, estimate)
    assert removed > 0
    assert slid[0] == messages[0]
    assert slid[1].role.value == "user"
    assert "removed to fit the context window" in slid[1].text
    assert estimate(slid) <= 600
    assert_pairs_intact(slid)


def test_summary_cut_falls_on_a_step_boundary():
    messages = _loop(5, 10)
    cut = summary_cut(messages, 1, keep_last=3)
    assert cut is not None
    assert messages[cut].role.value == "assistant"
    assert len(messages) - cut >= 3


def test_an_oversized_result_is_cut_with_a_note():
    messages = [Message.user("go"), *_loop(1, 100_000)[2:]]
    cut, count = cut_oversized(messages, 0, 2_000, heuristic_count_tokens)
    assert count == 1
    text = cut[-1].content[0].text
    assert "cut to fit the context window" in text
    assert heuristic_count_tokens(cut) <= 2_000


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ContextPolicy("slide"), "strategies"),
        (lambda: ContextPolicy(window=0), "window"),
        (lambda: ContextPolicy(window=100, reserve=100), "smaller than window"),
        (lambda: ClearToolResults(keep_last=-1), "keep_last"),
        (lambda: ClearToolResults(keep_tools="read"), "keep_tools"),
        (lambda: Summarize(instructions=""), "instructions"),
    ],
)
def test_bad_policies_are_refused(make, message):
    with pytest.raises(BuildError, match=message):
        make()


def test_known_windows_and_an_unknown_model():
    assert known_window("claude-sonnet-4-5") == 200_000
    assert known_window("gpt-4o-mini") == 128_000
    assert known_window("my-local-model") is None
    with pytest.raises(BuildError, match="needs window="):
        ContextPolicy(SlidingWindow()).limit("my-local-model", None)
    assert ContextPolicy(window=1000, reserve=100).limit(None, None) == 900
    assert ContextPolicy(window=1000).limit(None, 300) == 700


# -- the core decides -------------------------------------------------------------------------


def _turn(policy: ContextPolicy, history: list[Message]) -> Turn:
    return Turn.start(
        history, tools=[], config=InferenceConfig(), context=policy, model="m", max_iterations=100
    )


def test_without_a_need_nothing_is_compacted():
    turn = _turn(ContextPolicy(SlidingWindow(), window=100_000), [Message.user("hi")])
    step = turn.next_step()
    assert isinstance(step, CallModel)
    assert turn.take_events() == ()
    turn.model_replied(reply_text("hello"))
    assert turn.next_step().response.compaction is None


def test_the_core_compacts_before_the_call_and_reports_it():
    history = _loop(8, 2000)[1:]  # no system prompt in the caller's history
    before = list(history)
    turn = Turn.start(
        history,
        tools=[],
        config=InferenceConfig(),
        system_prompt="be brief",
        context=ContextPolicy(ClearToolResults(keep_last=1), window=2_000, reserve=200),
    )
    step = turn.next_step()
    assert isinstance(step, CallModel)
    assert heuristic_count_tokens(step.request.messages) <= 1_800
    assert step.request.messages[0].text == "be brief"
    assert_pairs_intact(step.request.messages)
    (event,) = turn.take_events()
    assert isinstance(event, ContextCompacted)
    assert event.strategy.startswith("clear_tool_results")
    assert event.tokens_before > event.tokens_after
    assert history == before  # the caller's history is never changed
    turn.model_replied(reply_text("done"))
    response = turn.next_step().response
    assert response.compaction is not None
    assert response.compaction.history[-1].text == "done"
    assert response.compaction.history[0].role.value == "user"
    assert len(response.new_messages) == 1


def test_nothing_makes_it_fit_is_a_clear_error():
    turn = _turn(ContextPolicy(SlidingWindow(), window=20, reserve=1), [Message.user("x" * 400)])
    with pytest.raises(ContextBudgetExceededError):
        turn.next_step()


def test_a_summary_is_a_step_and_replaces_what_it_sums_up():
    history = _loop(6, 2000)[1:]
    turn = _turn(ContextPolicy(Summarize(keep_last=2), window=2_000, reserve=100), history)
    step = turn.next_step()
    assert isinstance(step, Compact)
    assert step.request.tools == ()
    assert "<conversation>" in step.request.messages[0].text
    assert turn.next_step() == step  # the same answer until the transition
    turn.compacted(
        reply_text("the user wanted files read", usage=Usage(input_tokens=5, output_tokens=3))
    )
    step = turn.next_step()
    assert isinstance(step, CallModel)
    assert step.request.messages[0].text.startswith("Summary of the earlier conversation:")
    assert_pairs_intact(step.request.messages)
    events = turn.take_events()
    assert [event.strategy for event in events] == ["summarize"]
    turn.model_replied(reply_text("ok"))
    response = turn.next_step().response
    assert response.llm_calls == 2  # the summary counts as a model call
    assert response.compaction.strategy == "summarize"


def test_a_summary_survives_json_and_is_never_asked_twice():
    history = _loop(6, 2000)[1:]
    policy = ContextPolicy(Summarize(keep_last=2), SlidingWindow(), window=2_000, reserve=100)
    turn = _turn(policy, history)
    assert isinstance(turn.next_step(), Compact)
    turn.compacted(reply_text("summary " * 2000))  # a summary too long to fit on its own
    restored = Turn.from_json(turn.to_json())
    restored.set_context(policy, model="m")
    step = restored.next_step()
    assert isinstance(step, CallModel)  # the window slid; no second summary
    assert heuristic_count_tokens(step.request.messages) <= 1_900


@pytest.mark.parametrize("seed", range(60))
def test_long_tool_loops_never_overflow_and_never_split_pairs(seed):
    """Seeded: random result sizes, a small window, random strategy orders that can bound a
    growing history (clearing results alone cannot: the calls pile up). Every request fits
    (by the estimate the core uses) and keeps calls with their results."""
    rng = random.Random(seed)
    strategies = rng.choice(
        [
            (SlidingWindow(),),
            (ClearToolResults(keep_last=rng.randint(0, 3)), SlidingWindow()),
            (Summarize(keep_last=rng.randint(0, 6)), SlidingWindow()),
            (ClearToolResults(keep_last=1), Summarize(keep_last=2), SlidingWindow()),
        ]
    )
    window = rng.choice([1_500, 4_000, 8_000])
    turn = _turn(ContextPolicy(*strategies, window=window, reserve=200), [Message.user("go")])
    for step_number in range(rng.randint(5, 60)):
        step = turn.next_step()
        if isinstance(step, Compact):
            turn.compacted(reply_text("summary of what happened " * rng.randint(1, 20)))
            step = turn.next_step()
        assert isinstance(step, CallModel)
        assert heuristic_count_tokens(step.request.messages) <= window - 200
        assert_pairs_intact(step.request.messages)
        calls = [(f"read_{step_number}_{n}", {"n": n}) for n in range(rng.randint(1, 3))]
        turn.model_replied(reply_tool_calls(*calls))
        step = turn.next_step()
        assert isinstance(step, RunTools)
        turn.tools_finished(
            [ToolResult(content="y" * rng.choice([10, 500, 5_000, 60_000])) for _ in step.calls]
        )


# -- whole agent runs ---------------------------------------------------------------------------


@tool
def read_page(n: int) -> str:
    """Read one page of a long document."""
    return f"page {n}: " + "lorem ipsum " * 300


async def test_a_200_step_tool_loop_in_a_4k_window_finishes():
    script = [reply_tool_calls(("read_page", {"n": n})) for n in range(200)] + [
        reply_text("read it all")
    ]
    provider = ScriptedProvider(script)
    agent = (
        AgentBuilder()
        .provider(provider)
        .tool(read_page)
        .max_iterations(250)
        .context(ClearToolResults(keep_last=2), SlidingWindow(), window=4_000, reserve=500)
        .build()
    )
    history = [Message.user("read the whole document")]
    async with agent:
        response = await agent.run(history)
    assert response.text == "read it all"
    assert len(provider.requests) == 201
    for request in provider.requests:
        assert heuristic_count_tokens(request.messages, request.tools) <= 3_500
        assert_pairs_intact(request.messages)
    assert history == [Message.user("read the whole document")]
    assert len(response.new_messages) == 401  # the full record, for audit
    assert response.compaction is not None
    history_after = response.compaction.history
    assert len(history_after) < len(response.new_messages)
    assert heuristic_count_tokens(history_after) <= 3_500
    assert_pairs_intact(history_after)


async def test_a_per_call_policy_and_a_summary_through_the_agent():
    script = [reply_tool_calls(("read_page", {"n": n})) for n in range(6)]
    # The provider is asked for a summary when the window fills: answer it, then go on.
    summaries = []

    def answer(request):
        if not request.tools:
            summaries.append(request)
            return reply_text("pages 0-3 were read: lorem ipsum")
        return script.pop(0) if script else reply_text("done")

    from kova.testing import FunctionProvider

    agent = (
        AgentBuilder().provider(FunctionProvider(answer)).tool(read_page).max_iterations(20).build()
    )
    policy = ContextPolicy(Summarize(keep_last=2), window=3_000, reserve=300)
    async with agent, agent.stream("read", context=policy) as events:
        seen = [event async for event in events]
    compacted = [event for event in seen if isinstance(event, ContextCompacted)]
    assert compacted
    assert all(event.strategy == "summarize" for event in compacted)
    assert len(summaries) == len(compacted)
    assert seen[-1].response.text == "done"


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("context", "scale"), 100.0),
        (("context", "removed"), "3"),
        (("context", "pending"), [1]),
        (("deferred", "limit"), 0),
        (("deferred", "found"), [1]),
    ],
)
def test_a_changed_saved_turn_state_is_refused(path, value):
    """What a saved turn records of its compaction and tool search comes back from outside:
    a field of the wrong type or range is a SerializationError, never a misread turn."""
    import json

    from kova.errors import SerializationError

    turn = Turn.start(
        _loop(6, 2000)[1:],
        tools=[],
        config=InferenceConfig(),
        context=ContextPolicy(ClearToolResults(keep_last=1), window=2_000, reserve=100),
        deferred=[kova_tool_definition()],
    )
    turn.next_step()
    document = json.loads(turn.to_json())
    document[path[0]][path[1]] = value
    with pytest.raises(SerializationError):
        Turn.from_dict(document)


def kova_tool_definition():
    from kova import ToolDefinition

    return ToolDefinition(name="send_email", description="Send an email message.")
