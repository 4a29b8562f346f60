"""The turn core, driven by hand: plain functions, no event loop, no I/O."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kova import (
    InferenceConfig,
    Message,
    Secret,
    StopReason,
    Text,
    ToolAnnotations,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from kova.agent import (
    DEFER,
    AwaitApproval,
    CallModel,
    Finished,
    PendingApprovals,
    RunTools,
    Turn,
    UsageLimits,
)
from kova.errors import (
    AgentLoopError,
    ApprovalMismatchError,
    ContextBudgetExceededError,
    MaxIterationsError,
    SerializationError,
    UsageLimitExceeded,
)
from kova.providers import ModelResponse
from kova.testing import reply_text, reply_tool_calls

if TYPE_CHECKING:
    from collections.abc import Sequence

HISTORY = (Message.user("hello"),)
CONFIG = InferenceConfig(model="m", max_tokens=100)
KEY = Secret("a test key, 32 characters long..")
TOOLS = (
    ToolDefinition(name="read", annotations=ToolAnnotations(read_only=True)),
    ToolDefinition(name="write", annotations=ToolAnnotations(destructive=True)),
)


def start(**options: object) -> Turn:
    return Turn.start(HISTORY, tools=TOOLS, config=CONFIG, **options)  # type: ignore[arg-type]


def ran(calls: Sequence[ToolUse]) -> list[ToolResult]:
    return [ToolResult(content=f"{call.name} ok") for call in calls]


def call_model(turn: Turn) -> CallModel:
    step = turn.next_step()
    assert isinstance(step, CallModel)
    return step


def run_tools(turn: Turn) -> RunTools:
    step = turn.next_step()
    assert isinstance(step, RunTools)
    return step


def finished(turn: Turn) -> Finished:
    step = turn.next_step()
    assert isinstance(step, Finished)
    return step


def await_approval(turn: Turn) -> AwaitApproval:
    step = turn.next_step()
    assert isinstance(step, AwaitApproval)
    return step


# --- the loop ---------------------------------------------------------------------------------


def test_a_plain_answer_finishes_the_turn() -> None:
    turn = start(system_prompt="be brief")
    step = call_model(turn)
    assert step.request.messages == (Message.system("be brief"), *HISTORY)
    assert step.request.tools == TOOLS
    assert step.request.config == CONFIG
    assert not step.count_tokens
    assert turn.next_step() == step  # the same answer until a transition
    turn.model_replied(reply_text("hi", usage=Usage(input_tokens=7, output_tokens=3)))
    response = finished(turn).response
    assert response.text == "hi"
    assert response.new_messages == (Message.assistant("hi"),)
    assert response.usage == Usage(input_tokens=7, output_tokens=3)
    assert response.llm_calls == 1
    assert response.pending is None
    assert turn.last_usage == Usage(input_tokens=7, output_tokens=3)


def test_a_tool_step_runs_the_calls_and_sends_their_results_in_order() -> None:
    turn = start(turn_id="t-1")
    call_model(turn)
    turn.model_replied(reply_tool_calls(("read", {"path": "a"}), ("write", {"path": "b"})))
    step = run_tools(turn)
    assert [call.name for call in step.calls] == ["read", "write"]
    assert step.turn_id == "t-1"
    assert step.approved == frozenset()
    # Results without ids get their call's id.
    turn.tools_finished([ToolResult(content="A"), ToolResult(content="B", tool_use_id="call_2")])
    request = call_model(turn).request
    assert request.messages[-1] == Message.tool_results(
        [
            ToolResult(content="A", tool_use_id="call_1"),
            ToolResult(content="B", tool_use_id="call_2"),
        ]
    )
    turn.model_replied(reply_text("done"))
    response = finished(turn).response
    assert [message.role for message in response.new_messages] == ["assistant", "tool", "assistant"]
    assert response.llm_calls == 2
    assert response.usage == Usage(input_tokens=20, output_tokens=10)


def test_thinking_is_joined_over_the_calls() -> None:
    turn = start()
    turn.model_replied(reply_tool_calls(("read", {}), thinking="first"))
    turn.tools_finished(ran(run_tools(turn).calls))
    turn.model_replied(reply_text("x", thinking="second"))
    assert finished(turn).response.thinking == "first\n\nsecond"


def test_tools_are_read_per_model_call() -> None:
    turn = start()
    turn.model_replied(reply_tool_calls(("read", {})))
    turn.tools_finished(ran(run_tools(turn).calls))
    turn.set_tools([TOOLS[0]])  # the server removed "write"
    assert call_model(turn).request.tools == (TOOLS[0],)
    with pytest.raises(TypeError, match=r"tools\[0\]"):
        turn.set_tools(["read"])  # type: ignore[list-item]


@pytest.mark.parametrize("max_iterations", [1, 3])
def test_the_iteration_limit_stops_before_tools_whose_results_could_not_be_sent(
    max_iterations: int,
) -> None:
    turn = start(max_iterations=max_iterations)
    for _ in range(max_iterations):
        call_model(turn)
        turn.model_replied(reply_tool_calls(("read", {})))
        turn.tools_finished(ran(run_tools(turn).calls))
    call_model(turn)
    turn.model_replied(reply_tool_calls(("read", {})))
    with pytest.raises(MaxIterationsError) as caught:
        turn.next_step()
    assert caught.value.max_iterations == max_iterations
    with pytest.raises(MaxIterationsError):  # a failed turn stays failed
        turn.tools_finished([])


def test_the_context_budget_is_checked_before_every_call() -> None:
    turn = start(context_budget=40)
    call_model(turn)
    turn.model_replied(reply_tool_calls(("read", {})))
    turn.tools_finished([ToolResult(content="y" * 400)])
    with pytest.raises(ContextBudgetExceededError) as caught:
        turn.next_step()
    assert caught.value.budget == 40


def test_transitions_out_of_turn_are_refused() -> None:
    turn = start()
    with pytest.raises(AgentLoopError, match="waiting for a model reply"):
        turn.tools_finished([])
    turn.model_replied(reply_tool_calls(("read", {})))
    with pytest.raises(AgentLoopError, match="waiting for tool results"):
        turn.model_replied(reply_text("x"))
    with pytest.raises(ValueError, match="needs 1 results, got 2"):
        turn.tools_finished(ran(run_tools(turn).calls) * 2)
    with pytest.raises(TypeError, match="ToolResult or DEFER"):
        turn.tools_finished(["ok"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="answers 'other'"):
        turn.tools_finished([ToolResult(content="x", tool_use_id="other")])
    turn.tools_finished(ran(run_tools(turn).calls))
    turn.model_replied(reply_text("x"))
    with pytest.raises(AgentLoopError, match="finished"):
        turn.model_replied(reply_text("again"))


def test_start_takes_history_as_agent_run_does() -> None:
    for history in ("Weather in Oslo?", Message.user("Weather in Oslo?")):
        step = Turn.start(history, tools=(), config=CONFIG).next_step()
        assert isinstance(step, CallModel)
        assert step.request.messages == (Message.user("Weather in Oslo?"),)


def test_start_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match=r"history\[0\]"):
        Turn.start(["hi"], tools=(), config=CONFIG)  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"history must be a str, a kova\.Message or a sequence"):
        Turn.start(5, tools=(), config=CONFIG)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="config"):
        Turn.start(HISTORY, tools=(), config={})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_iterations"):
        Turn.start(HISTORY, tools=(), config=CONFIG, max_iterations=0)
    with pytest.raises(TypeError, match="limits"):
        Turn.start(HISTORY, tools=(), config=CONFIG, limits={"requests": 1})  # type: ignore[arg-type]


# --- answers that stop for another reason (issue 28 item 6) -----------------------------------


def test_complete_calls_under_an_unknown_stop_reason_are_run() -> None:
    turn = start()
    reply = reply_tool_calls(("read", {"path": "a"}))
    turn.model_replied(ModelResponse(content=reply.content, stop_reason=StopReason.unknown("NEW")))
    assert [call.name for call in run_tools(turn).calls] == ["read"]


@pytest.mark.parametrize("stop", [StopReason.MAX_TOKENS, StopReason.STOP_SEQUENCE])
def test_calls_cut_off_are_answered_not_run(stop: StopReason) -> None:
    turn = start()
    content = (
        Text(text="let me"),
        ToolUse(id="a", name="read", input={"path": "x"}),
        ToolUse(id="b", name="write", input={}, raw_arguments='{"path": "y'),
    )
    turn.model_replied(ModelResponse(content=content, stop_reason=stop))
    response = finished(turn).response
    assistant, results = response.new_messages
    assert assistant.tool_uses == content[1:]
    assert [r.tool_use_id for r in results.content if isinstance(r, ToolResult)] == ["a", "b"]
    assert all(
        isinstance(r, ToolResult) and r.is_error and "not run" in r.text for r in results.content
    )
    assert response.stop_reason == stop
    assert response.text == "let me"


# --- usage limits -----------------------------------------------------------------------------


def test_the_requests_limit_allows_exactly_its_count() -> None:
    turn = start(limits=UsageLimits(requests=2))
    call_model(turn)
    turn.model_replied(reply_tool_calls(("read", {})))
    turn.tools_finished(ran(run_tools(turn).calls))
    call_model(turn)  # the second call: at the limit
    turn.model_replied(reply_tool_calls(("read", {})))
    turn.tools_finished(ran(run_tools(turn).calls))
    with pytest.raises(UsageLimitExceeded) as caught:
        turn.next_step()
    assert (caught.value.limit, caught.value.value, caught.value.figure) == ("requests", 2, 3)
    assert "requests=2" in str(caught.value)
    assert "was not sent" in str(caught.value)


def test_the_tool_calls_limit_refuses_the_step_that_would_go_over() -> None:
    turn = start(limits=UsageLimits(tool_calls=3))
    turn.model_replied(reply_tool_calls(("read", {}), ("read", {})))
    turn.tools_finished(ran(run_tools(turn).calls))
    turn.model_replied(reply_tool_calls(("read", {})))  # 3: at the limit
    turn.tools_finished(ran(run_tools(turn).calls))
    turn.model_replied(reply_tool_calls(("read", {})))  # 4: over
    with pytest.raises(UsageLimitExceeded) as caught:
        turn.next_step()
    assert (caught.value.limit, caught.value.value, caught.value.figure) == ("tool_calls", 3, 4)


@pytest.mark.parametrize(
    ("limit", "usage_ok", "usage_over"),
    [
        ("input_tokens", Usage(input_tokens=10, output_tokens=1), Usage(input_tokens=11)),
        ("output_tokens", Usage(input_tokens=1, output_tokens=10), Usage(output_tokens=11)),
        ("total_tokens", Usage(input_tokens=4, output_tokens=6), Usage(input_tokens=11)),
    ],
)
def test_token_limits_end_the_turn_only_past_the_edge(
    limit: str, usage_ok: Usage, usage_over: Usage
) -> None:
    limits: dict[str, Any] = {limit: 10}
    at_edge = start(limits=UsageLimits(**limits))
    at_edge.model_replied(reply_text("ok", usage=usage_ok))
    assert finished(at_edge).response.usage == usage_ok
    over = start(limits=UsageLimits(**limits))
    with pytest.raises(UsageLimitExceeded) as caught:
        over.model_replied(reply_text("no", usage=usage_over))
    assert (caught.value.limit, caught.value.value, caught.value.figure) == (limit, 10, 11)
    with pytest.raises(UsageLimitExceeded):
        over.next_step()


def test_token_limits_sum_the_turns_calls() -> None:
    turn = start(limits=UsageLimits(total_tokens=25))
    turn.model_replied(reply_tool_calls(("read", {})))  # 15
    turn.tools_finished(ran(run_tools(turn).calls))
    with pytest.raises(UsageLimitExceeded) as caught:
        turn.model_replied(reply_text("x"))  # 30
    assert caught.value.figure == 30


def test_counting_tokens_first_refuses_a_request_that_would_go_over() -> None:
    turn = start(limits=UsageLimits(input_tokens=100, count_tokens_before_request=True))
    step = call_model(turn)
    assert step.count_tokens
    turn.tokens_counted(100)  # exactly at the limit
    step = call_model(turn)
    assert not step.count_tokens
    turn.model_replied(reply_tool_calls(("read", {}), usage=Usage(input_tokens=60)))
    turn.tools_finished(ran(run_tools(turn).calls))
    assert call_model(turn).count_tokens  # counted again for every call
    with pytest.raises(UsageLimitExceeded) as caught:
        turn.tokens_counted(41)  # 60 + 41
    assert (caught.value.limit, caught.value.figure) == ("input_tokens", 101)
    assert "was not sent" in str(caught.value)


def test_count_tokens_first_needs_an_input_limit() -> None:
    turn = start(limits=UsageLimits(requests=5, count_tokens_before_request=True))
    assert not call_model(turn).count_tokens


def test_usage_limits_check_their_values() -> None:
    with pytest.raises(TypeError, match="requests"):
        UsageLimits(requests="3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tool_calls"):
        UsageLimits(tool_calls=-1)
    with pytest.raises(TypeError, match="count_tokens_before_request"):
        UsageLimits(count_tokens_before_request=1)  # type: ignore[arg-type]


# --- deferred approvals -----------------------------------------------------------------------


def paused(turn: Turn) -> PendingApprovals:
    """Model asks for read, write, write; read runs, both writes are deferred."""
    turn.model_replied(
        reply_tool_calls(
            ("read", {"path": "a"}),
            ("write", {"path": "b"}),
            ("write", {"path": "c"}),
            text="on it",
        )
    )
    run_tools(turn)
    turn.tools_finished([ToolResult(content="A"), DEFER, DEFER])
    return await_approval(turn).pending


def test_deferred_calls_pause_the_turn_with_the_assistant_message_last() -> None:
    turn = start(turn_id="t-9")
    pending = paused(turn)
    step = await_approval(turn)
    response = step.response
    assert response.pending is pending
    assert response.text == "on it"
    assert response.stop_reason == StopReason.TOOL_USE
    assert [message.role for message in response.new_messages] == ["assistant"]
    assert pending.turn_id == "t-9"
    assert [(call.id, call.name, call.arguments) for call in pending.calls] == [
        ("call_2", "write", {"path": "b"}),
        ("call_3", "write", {"path": "c"}),
    ]
    assert pending.calls[0].annotations == ToolAnnotations(destructive=True)
    assert pending.calls[0].fingerprint != pending.calls[1].fingerprint
    assert pending.results == (ToolResult(content="A", tool_use_id="call_1"),)
    assert [call.id for call in pending.undecided] == ["call_2", "call_3"]


def test_decisions_run_the_approved_calls_and_answer_the_denied_in_band() -> None:
    turn = start()
    pending = paused(turn)
    decided = pending.approve("call_3").deny("call_2", "not that file")
    assert pending.decisions == {}  # decisions make new values
    turn.decided(decided)
    step = run_tools(turn)
    assert [call.id for call in step.calls] == ["call_3"]
    assert step.approved == frozenset({"call_3"})
    assert [call.id for call, _ in turn.decided_denials()] == ["call_2"]
    turn.tools_finished([ToolResult(content="C")])
    results = call_model(turn).request.messages[-1].content
    assert [(r.tool_use_id, r.text) for r in results if isinstance(r, ToolResult)] == [
        ("call_1", "A"),
        ("call_2", "tool call denied: not that file"),
        ("call_3", "C"),
    ]
    # A plain approval is for that call only: the tool is asked about again next time.
    turn.model_replied(reply_tool_calls(("write", {"path": "d"})))
    assert run_tools(turn).approved == frozenset()


def test_always_approves_the_tool_for_the_rest_of_the_turn() -> None:
    turn = start()
    pending = paused(turn)
    turn.decided(pending.approve("call_2", always=True))  # covers call_3 too
    assert [call.id for call in run_tools(turn).calls] == ["call_2", "call_3"]
    turn.tools_finished(ran(run_tools(turn).calls))
    turn.model_replied(reply_tool_calls(("write", {"path": "d"}), ("read", {})))
    # The write (its id made unique in the turn): no asking again.
    assert run_tools(turn).approved == frozenset({"call_1_2"})


def test_denying_everything_goes_straight_back_to_the_model() -> None:
    turn = start()
    pending = paused(turn)
    turn.decided(pending.deny("call_2").deny("call_3"))
    results = call_model(turn).request.messages[-1].content
    assert [r.is_error for r in results if isinstance(r, ToolResult)] == [False, True, True]


def test_decisions_fail_closed() -> None:
    turn = start()
    pending = paused(turn)
    with pytest.raises(ApprovalMismatchError, match="no pending call has id 'call_1'"):
        pending.approve("call_1")  # it already ran
    with pytest.raises(TypeError):
        pending.approve(2)  # type: ignore[arg-type]
    with pytest.raises(ApprovalMismatchError, match="no decision for 'call_3'"):
        turn.decided(pending.approve("call_2"))
    with pytest.raises(TypeError, match="PendingApprovals"):
        turn.decided({"call_2": True})  # type: ignore[arg-type]
    other = start()
    with pytest.raises(ApprovalMismatchError, match="other pending calls"):
        turn.decided(paused(other).approve("call_2").approve("call_3"))
    # Nothing was applied: the right decisions still work.
    turn.decided(pending.approve("call_2").approve("call_3"))
    assert len(run_tools(turn).calls) == 2


# --- resuming from the stored value -----------------------------------------------------------


def resumed(
    pending: PendingApprovals, history: Sequence[Message], limits: UsageLimits | None = None
) -> Turn:
    return Turn.resume(history, pending, tools=TOOLS, config=CONFIG, limits=limits)


def test_resume_continues_from_the_stored_pending_state() -> None:
    turn = start(limits=UsageLimits(requests=3))
    pending = paused(turn)
    paused_messages = await_approval(turn).response.new_messages
    stored = pending.approve("call_2").deny("call_3", "no").sign(KEY).to_json()
    again = resumed(PendingApprovals.from_json(stored), [*HISTORY, *paused_messages])
    step = run_tools(again)
    assert [call.id for call in step.calls] == ["call_2"]
    again.tools_finished([ToolResult(content="B")])
    request = call_model(again).request
    assert request.messages[:2] == (*HISTORY, *paused_messages)
    assert [r.text for r in request.messages[-1].content if isinstance(r, ToolResult)] == [
        "A",
        "B",
        "tool call denied: no",
    ]
    again.model_replied(reply_text("done"))
    response = finished(again).response
    # The resumed part's messages, usage and calls: the parts add up to the turn.
    assert [message.role for message in response.new_messages] == ["tool", "assistant"]
    assert response.llm_calls == 1
    assert response.usage == Usage(input_tokens=10, output_tokens=5)
    assert again.turn_id == turn.turn_id


def test_resume_keeps_counting_the_whole_turn_for_limits() -> None:
    turn = start(limits=UsageLimits(requests=2))
    pending = paused(turn)
    history = [*HISTORY, *await_approval(turn).response.new_messages]
    # The driver gives the limits (an agent its own): the stored value's are not trusted.
    again = resumed(pending.approve("call_2").approve("call_3"), history, UsageLimits(requests=2))
    again.tools_finished(ran(run_tools(again).calls))
    again.model_replied(reply_tool_calls(("read", {})))  # the turn's second call
    again.tools_finished(ran(run_tools(again).calls))
    with pytest.raises(UsageLimitExceeded, match="requests=2"):
        again.next_step()


def test_resume_fails_closed() -> None:
    turn = start()
    pending = paused(turn)
    history = [*HISTORY, *await_approval(turn).response.new_messages]
    decided = pending.approve("call_2").approve("call_3")
    resumed(decided, history)  # fits
    with pytest.raises(ApprovalMismatchError, match="does not end with the assistant message"):
        resumed(decided, HISTORY)
    with pytest.raises(ApprovalMismatchError, match="does not end with the assistant message"):
        resumed(decided, [*history, Message.user("and also")])
    edited = Message.assistant(
        [*history[-1].content[:-1], ToolUse(id="call_3", name="write", input={"path": "z"})]
    )
    with pytest.raises(ApprovalMismatchError, match="does not end with the assistant message"):
        resumed(decided, [*HISTORY, edited])
    with pytest.raises(ApprovalMismatchError, match="no decision"):
        resumed(pending.approve("call_2"), history)
    with pytest.raises(TypeError, match="PendingApprovals"):
        resumed(decided.sign(KEY).to_json(), history)  # type: ignore[arg-type]
    # A stored value whose call was changed: the fingerprint no longer matches.
    data = json.loads(decided.sign(KEY).to_json())
    data["calls"][1]["arguments"] = {"path": "/etc/passwd"}
    with pytest.raises(ApprovalMismatchError, match="fingerprint"):
        resumed(PendingApprovals.from_json(json.dumps(data)), history)
    # ... or whose fingerprint was recomputed for the changed call: not the message's call.
    tampered = PendingApprovals.from_json(json.dumps(data))
    forged = json.loads(decided.sign(KEY).to_json())
    forged["calls"][1] = {
        **forged["calls"][1],
        "arguments": {"path": "/etc/passwd"},
        "fingerprint": tampered.calls[1].fingerprint,
    }
    from kova.agent._approvals import call_fingerprint

    forged["calls"][1]["fingerprint"] = call_fingerprint("write", {"path": "/etc/passwd"})
    with pytest.raises(ApprovalMismatchError, match="not the call the assistant message made"):
        resumed(PendingApprovals.from_json(json.dumps(forged)), history)
    # A decision for an unknown call in stored JSON.
    data = json.loads(decided.sign(KEY).to_json())
    data["decisions"]["call_9"] = {"approved": True, "always": False, "reason": None}
    with pytest.raises(ApprovalMismatchError, match="call_9"):
        PendingApprovals.from_json(json.dumps(data))


def test_pending_json_is_versioned() -> None:
    pending = paused(start()).sign(KEY)
    assert PendingApprovals.from_json(pending.to_json()) == pending
    data = json.loads(pending.to_json())
    data["version"] = 0
    with pytest.raises(SerializationError, match="older format"):
        PendingApprovals.from_json(json.dumps(data))
    with pytest.raises(SerializationError, match="not a stored kova pending approvals"):
        PendingApprovals.from_json(json.dumps({"kova": "turn", "version": 1}))
    with pytest.raises(SerializationError, match="not JSON"):
        PendingApprovals.from_json("{")
    with pytest.raises(TypeError):
        PendingApprovals.from_json(data)


# --- the turn as JSON -------------------------------------------------------------------------


def test_a_turn_round_trips_at_every_step() -> None:
    turn = start(system_prompt="sys", limits=UsageLimits(requests=9), context_budget=10_000)
    seen = []

    def check() -> None:
        restored = Turn.from_json(turn.to_json())
        assert restored == turn
        assert restored.next_step() == turn.next_step()
        seen.append(type(turn.next_step()).__name__)

    check()
    turn.model_replied(reply_tool_calls(("read", {}), ("write", {"x": [1, 2.5, None]})))
    check()
    turn.tools_finished([ToolResult(content="r"), DEFER])
    check()
    turn.decided(await_approval(turn).pending.approve("call_2"))
    check()
    turn.tools_finished([ToolResult(content=(Text(text="w"),))])
    check()
    turn.model_replied(reply_text("end"))
    check()
    assert seen == ["CallModel", "RunTools", "AwaitApproval", "RunTools", "CallModel", "Finished"]


def test_a_turn_from_another_format_version_is_refused() -> None:
    data = json.loads(start().to_json())
    data["version"] = 0
    with pytest.raises(SerializationError, match=r"older format \(version 0\).*version 3 only"):
        Turn.from_json(json.dumps(data))
    data["version"] = 4
    with pytest.raises(SerializationError, match="version 4"):
        Turn.from_json(json.dumps(data))
    with pytest.raises(SerializationError, match="not a stored kova turn"):
        Turn.from_json("{}")


def test_a_failed_turn_is_not_restored() -> None:
    turn = start(limits=UsageLimits(output_tokens=1))
    with pytest.raises(UsageLimitExceeded):
        turn.model_replied(reply_text("x"))
    with pytest.raises(SerializationError, match="had failed"):
        Turn.from_json(turn.to_json())


# --- random turns round-trip ------------------------------------------------------------------

JSON_SCALARS = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8)
ARGUMENTS = st.dictionaries(
    st.text(max_size=5),
    st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=3), max_leaves=5),
    max_size=3,
)
USAGE = (
    st.builds(Usage, input_tokens=st.integers(0, 500), output_tokens=st.integers(0, 500))
    | st.none()
)


@st.composite
def replies(draw: st.DrawFn, number: int) -> ModelResponse:
    calls = draw(st.lists(st.tuples(st.sampled_from(["read", "write"]), ARGUMENTS), max_size=3))
    text = draw(st.text(max_size=10))
    content: list[Text | ToolUse] = [Text(text=text)] if text else []
    content += [
        ToolUse(id=f"c{number}_{index}", name=name, input=arguments)
        for index, (name, arguments) in enumerate(calls)
    ]
    stop = draw(
        st.sampled_from(
            [
                StopReason.TOOL_USE,
                StopReason.END_TURN,
                StopReason.MAX_TOKENS,
                StopReason.unknown("x"),
            ]
        )
    )
    return ModelResponse(
        content=content,
        stop_reason=stop,
        usage=draw(USAGE),
        thinking=draw(st.none() | st.text(min_size=1, max_size=5)),
    )


@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_random_turns_round_trip_through_json(data: st.DataObject) -> None:
    turn = Turn.start(
        HISTORY,
        tools=TOOLS,
        config=CONFIG,
        system_prompt=data.draw(st.none() | st.text(min_size=1, max_size=5)),
        limits=data.draw(st.none() | st.builds(UsageLimits, requests=st.integers(1, 9))),
        max_iterations=data.draw(st.integers(1, 4)),
    )
    for number in range(8):
        restored = Turn.from_json(turn.to_json())
        assert restored == turn
        try:
            step = turn.next_step()
        except (MaxIterationsError, UsageLimitExceeded):
            return
        assert restored.next_step() == step
        match step:
            case CallModel():
                try:
                    turn.model_replied(data.draw(replies(number)))
                except UsageLimitExceeded:
                    return
            case RunTools(calls=calls):
                turn.tools_finished(
                    [data.draw(st.sampled_from([ToolResult(content="r"), DEFER])) for _ in calls]
                )
            case AwaitApproval(pending=pending):
                for call in pending.calls:
                    if data.draw(st.booleans()):
                        pending = pending.approve(call.id, always=data.draw(st.booleans()))
                    else:
                        pending = pending.deny(call.id, data.draw(st.none() | st.text(max_size=5)))
                signed = pending.sign(KEY)
                assert PendingApprovals.from_json(signed.to_json()) == signed
                turn.decided(pending)
            case Finished(response=response):
                history = [*HISTORY, *response.new_messages]
                # Whatever happened, the history is valid to send back: no unanswered call.
                for index, message in enumerate(history):
                    ids = [call.id for call in message.tool_uses]
                    if ids:
                        after = history[index + 1].content
                        assert [b.tool_use_id for b in after if isinstance(b, ToolResult)] == ids
                return


def test_the_driver_shown_in_the_docs_is_the_one_the_suite_runs() -> None:
    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "turns.md").read_text()
    example = (root / "docs" / "examples" / "turn_driver.py").read_text()
    start = page.index("def drive(turn: Turn)")
    shown = page[start : page.index("```", start)]
    assert shown in example
    assert 20 <= len(shown.splitlines()) <= 35


def test_the_turn_core_does_no_io() -> None:
    """The core's modules import no event loop, network, clock or file API."""
    import ast

    root = Path(__file__).resolve().parents[2] / "kova" / "agent"
    banned = {"trio", "anyio", "asyncio", "httpx", "httpx2", "socket", "time", "pathlib", "io"}
    for name in ("_turn.py", "_approvals.py", "_limits.py", "_state_json.py"):
        tree = ast.parse((root / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found = {node.module.split(".")[0]}
            else:
                continue
            assert not found & banned, f"{name} imports {found & banned}"
        assert not any(
            isinstance(node, ast.AsyncFunctionDef | ast.Await) for node in ast.walk(tree)
        )


def test_the_turn_and_its_pending_state_share_one_counters_record() -> None:
    """Issue 41: the counters are one record (kova.agent.Counters) in the turn core and in
    PendingApprovals, written the same way in both documents; resuming sets that record."""
    from kova.agent import Counters

    turn = start(limits=UsageLimits(requests=9))
    pending = paused(turn)
    assert turn.counters == pending.counters == Counters(requests=1, tool_calls=3)
    assert turn.to_dict()["counters"] == pending.to_dict()["counters"]
    assert Turn.from_json(turn.to_json()).counters == turn.counters
    history = [*HISTORY, *await_approval(turn).response.new_messages]
    again = resumed(pending.approve("call_2").approve("call_3"), history)
    assert again.counters == pending.counters
    assert "requests" not in pending.to_dict()  # one place only
