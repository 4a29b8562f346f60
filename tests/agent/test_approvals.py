"""Deferred approvals through the agent: pause, store, decide, resume (here and in another
process), and every way a resume fails closed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing

import kova
import kova.providers
from kova import Message, ResponseFormat, ToolAnnotations, ToolResult, ToolUse
from kova.agent import (
    DEFER,
    AgentBuilder,
    AgentResponse,
    CancelToken,
    Deferred,
    PendingApprovals,
    ToolCallDeferred,
    ToolCallFinished,
    ToolCallStarted,
    TurnCompleted,
)
from kova.errors import ApprovalMismatchError, StructuredOutputError, TurnCancelled
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import tool

if TYPE_CHECKING:
    from pathlib import Path

HISTORY = (Message.user("tidy up"),)
KEY = kova.Secret("a test key, 32 characters long..")
RUNS: list[str] = []


@tool(annotations=ToolAnnotations(read_only=True))
def look(path: str) -> str:
    """List a folder."""
    RUNS.append(f"look {path}")
    return f"{path}: a, b"


@tool(annotations=ToolAnnotations(destructive=True))
def remove(path: str) -> str:
    """Delete a file."""
    RUNS.append(f"remove {path}")
    return f"removed {path}"


@pytest.fixture(autouse=True)
def _clear_runs() -> None:
    RUNS.clear()


def script() -> list[kova.providers.ModelResponse]:
    return [
        reply_tool_calls(
            ("look", {"path": "/tmp"}),
            ("remove", {"path": "/tmp/a"}),
            ("remove", {"path": "/tmp/b"}),
            text="Looking and removing.",
        ),
        reply_text("Done."),
    ]


def results(message: Message) -> dict[str, ToolResult]:
    return {b.tool_use_id: b for b in message.content if isinstance(b, ToolResult)}


async def test_deferred_calls_pause_the_turn_after_the_others_ran() -> None:
    provider = ScriptedProvider(script())
    agent = AgentBuilder().provider(provider).tools(look, remove).defer_approvals().build()
    async with agent:
        first = await agent.run(HISTORY)
        assert RUNS == ["look /tmp"]
        pending = first.pending
        assert pending is not None
        assert [m.role for m in first.new_messages] == ["assistant"]
        assert first.new_messages[-1].tool_uses[0].name == "look"
        assert [(c.id, c.name, c.arguments) for c in pending.calls] == [
            ("call_2", "remove", {"path": "/tmp/a"}),
            ("call_3", "remove", {"path": "/tmp/b"}),
        ]
        assert pending.calls[0].annotations == ToolAnnotations(destructive=True)
        assert len(provider.requests) == 1

        history = [*HISTORY, *first.new_messages]
        decided = pending.approve("call_2").deny("call_3", "keep b")
        second = await agent.resume(history, decided)
    assert RUNS == ["look /tmp", "remove /tmp/a"]  # look did not run again
    assert second.pending is None
    assert second.text == "Done."
    assert [m.role for m in second.new_messages] == ["tool", "assistant"]
    answered = results(second.new_messages[0])
    assert answered["call_1"].text == "/tmp: a, b"
    assert answered["call_2"].text == "removed /tmp/a"
    assert answered["call_3"].is_error
    assert "keep b" in answered["call_3"].text
    # The model saw the whole turn, in order.
    assert provider.requests[1].messages == (*history, second.new_messages[0])


async def test_a_handler_may_defer_and_always_approves_the_tool_for_the_turn() -> None:
    asked: list[str] = []

    def approve(call: ToolUse) -> bool | Deferred:
        asked.append(call.id)
        return DEFER if call.name == "remove" else True

    provider = ScriptedProvider(
        [
            *script()[:1],
            reply_tool_calls(("remove", {"path": "/tmp/c"})),
            reply_text("Done."),
        ]
    )
    agent = AgentBuilder().provider(provider).tools(look, remove).approval_handler(approve).build()
    async with agent:
        first = await agent.run(HISTORY)
        assert first.pending is not None
        decided = first.pending.approve("call_3").approve("call_2", always=True)
        second = await agent.resume([*HISTORY, *first.new_messages], decided)
    assert second.pending is None
    # Approved calls are not asked again, nor is the tool approved "always" later on.
    assert sorted(asked) == ["call_1", "call_2", "call_3"]
    assert sorted(RUNS) == ["look /tmp", "remove /tmp/a", "remove /tmp/b", "remove /tmp/c"]
    assert second.llm_calls == 2


async def test_defer_predicate_with_annotations_and_handler_for_the_rest() -> None:
    def only_b(call: ToolUse, annotations: ToolAnnotations) -> bool:
        return call.input.get("path") == "/tmp/b" and not annotations.is_read_only

    provider = ScriptedProvider(script())
    agent = (
        AgentBuilder()
        .provider(provider)
        .tools(look, remove)
        .defer_approvals(only_b)
        .approval_handler(lambda call: "no" if call.input.get("path") == "/tmp/a" else True)
        .build()
    )
    async with agent:
        first = await agent.run(HISTORY)
    assert first.pending is not None
    assert [call.id for call in first.pending.calls] == ["call_3"]
    assert RUNS == ["look /tmp"]  # a was denied by the handler, b deferred
    assert first.pending.results[1].text == "tool call denied: no"


async def test_every_fail_closed_case_runs_nothing() -> None:
    provider = ScriptedProvider(script())
    agent = (
        AgentBuilder()
        .provider(provider)
        .tools(look, remove)
        .defer_approvals()
        .approval_key(KEY)
        .build()
    )
    async with agent:
        first = await agent.run(HISTORY)
        pending = first.pending
        assert pending is not None
        history = [*HISTORY, *first.new_messages]
        decided = pending.approve("call_2").approve("call_3")
        with pytest.raises(ApprovalMismatchError, match="does not end with"):
            await agent.resume(HISTORY, decided)
        with pytest.raises(ApprovalMismatchError, match="does not end with"):
            await agent.resume([*history, Message.user("more")], decided)
        with pytest.raises(ApprovalMismatchError, match="no pending call has id 'call_7'"):
            pending.approve("call_7")
        with pytest.raises(ApprovalMismatchError, match="no decision for 'call_3'"):
            await agent.resume(history, pending.approve("call_2"))
        stored = json.loads(decided.to_json())
        stored["calls"][0]["arguments"] = {"path": "/"}
        with pytest.raises(ApprovalMismatchError, match="signature"):
            await agent.resume(history, PendingApprovals.from_json(json.dumps(stored)))
        stored = json.loads(decided.to_json())
        stored["decisions"]["call_9"] = stored["decisions"]["call_2"]
        with pytest.raises(ApprovalMismatchError, match="names 'call_9', which is not pending"):
            PendingApprovals.from_json(json.dumps(stored))
        with pytest.raises(TypeError, match="PendingApprovals"):
            await agent.resume(history, decided.to_json())  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="history"):
            await agent.resume(42, decided)  # type: ignore[arg-type]
        async with agent.stream(history, resume=decided) as events:  # the stream fits
            async for _ in events:
                pass
        with pytest.raises(ApprovalMismatchError):
            async with agent.stream(HISTORY, resume=decided):
                pass  # pragma: no cover
    assert sorted(RUNS) == ["look /tmp", "remove /tmp/a", "remove /tmp/b"]  # the good resume
    assert len(provider.requests) == 2


async def test_a_cancelled_resume_produces_nothing_and_pending_stays_usable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    @tool
    async def slow(path: str) -> str:
        """Slow delete."""
        await trio.sleep(10)
        RUNS.append(f"slow {path}")
        return "gone"

    provider = ScriptedProvider(
        [reply_tool_calls(("slow", {"path": "x"})), reply_text("done"), reply_text("done")]
    )
    agent = AgentBuilder().provider(provider).tool(slow).defer_approvals().build()
    async with agent:
        first = await agent.run(HISTORY)
        assert first.pending is not None
        history = [*HISTORY, *first.new_messages]
        decided = first.pending.approve("call_1")
        token = CancelToken()

        async def cancel_soon() -> None:
            await trio.sleep(5)  # the tool is running
            token.cancel("changed my mind")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_soon)
            with pytest.raises(TurnCancelled):
                await agent.resume(history, decided, cancel=token)
        assert RUNS == []
        assert len(provider.requests) == 1
        second = await agent.resume(history, decided)  # the same value, again
    assert RUNS == ["slow x"]
    assert second.text == "done"


async def test_streamed_pause_and_resume() -> None:
    provider = ScriptedProvider(script())
    agent = AgentBuilder().provider(provider).tools(look, remove).defer_approvals().build()
    async with agent:
        async with agent.stream(HISTORY) as events:
            first = [event async for event in events]
        kinds = [(type(e).__name__, getattr(e, "name", None)) for e in first]
        assert ("ToolCallFinished", "look") in kinds
        deferred = [e for e in first if isinstance(e, ToolCallDeferred)]
        assert sorted(e.call.id for e in deferred) == ["call_2", "call_3"]
        started = [e.call.id for e in first if isinstance(e, ToolCallStarted)]
        assert sorted(started) == ["call_1", "call_2", "call_3"]
        completed = first[-1]
        assert isinstance(completed, TurnCompleted)
        pending = completed.response.pending
        assert pending is not None
        history = [*HISTORY, *completed.response.new_messages]
        decided = pending.deny("call_2").approve("call_3")
        async with agent.stream(history, resume=decided) as events:
            second = [event async for event in events]
    finished = {e.call.id: e.result for e in second if isinstance(e, ToolCallFinished)}
    assert finished["call_2"].is_error
    assert finished["call_3"].text == "removed /tmp/b"
    # The denial was decided out of band: bracketed first, then the approved call runs.
    assert [e.call.id for e in second if isinstance(e, ToolCallStarted)] == ["call_2", "call_3"]
    last = second[-1]
    assert isinstance(last, TurnCompleted)
    assert last.response.text == "Done."
    assert RUNS == ["look /tmp", "remove /tmp/b"]


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_resume_runs_under_the_agents_or_the_calls_limits(streamed: bool) -> None:
    """The limits a resumed turn runs under are the agent's (or the call's), never the
    stored value's: the paused turn had none, the resume's limit counts the whole turn."""
    provider = ScriptedProvider([*script()[:1], reply_tool_calls(("look", {"path": "/c"}))])
    builder = AgentBuilder().provider(provider).tools(look, remove).defer_approvals()
    async with builder.build() as agent:
        first = await agent.run(HISTORY)
    assert first.pending is not None
    assert first.pending.limits is None
    history = [*HISTORY, *first.new_messages]
    decided = first.pending.approve("call_2").approve("call_3")
    limits = kova.agent.UsageLimits(requests=1)  # the paused part made the one request
    async with builder.usage_limits(limits).build() as limited:
        with pytest.raises(kova.errors.UsageLimitExceeded, match="requests=1"):
            if streamed:
                async with limited.stream(history, resume=decided) as events:
                    async for _ in events:
                        pass
            else:
                await limited.resume(history, decided)
    async with builder.usage_limits(None).build() as agent:
        with pytest.raises(kova.errors.UsageLimitExceeded, match="requests=1"):
            await agent.resume(history, decided, limits=limits)
    assert len(provider.requests) == 1


# --- a resume in another process --------------------------------------------------------------

PROGRAM = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path

    import trio

    from kova import Message, ToolAnnotations, messages_from_json, messages_to_json
    from kova.agent import AgentBuilder, PendingApprovals
    from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
    from kova.tools import tool

    folder = Path(sys.argv[2])
    counts = folder / "runs.txt"

    def ran(name):
        with counts.open("a") as file:
            file.write(name + "\\n")

    @tool(annotations=ToolAnnotations(read_only=True))
    def look(path: str) -> str:
        \"\"\"List a folder.\"\"\"
        ran("look")
        return "a, b"

    @tool
    def remove(path: str) -> str:
        \"\"\"Delete a file.\"\"\"
        ran("remove " + path)
        return "removed " + path

    SCRIPT = [
        reply_tool_calls(
            ("look", {"path": "/"}), ("remove", {"path": "/a"}), ("remove", {"path": "/b"})
        ),
        reply_text("all done"),
    ]

    async def main():
        step = sys.argv[1]
        provider = ScriptedProvider(SCRIPT if step == "run" else SCRIPT[1:])
        agent = AgentBuilder().provider(provider).tools(look, remove).defer_approvals().build()
        async with agent:
            if step == "run":
                history = [Message.user("tidy")]
                response = await agent.run(history)
                (folder / "history.json").write_text(
                    messages_to_json([*history, *response.new_messages])
                )
                (folder / "pending.json").write_text(response.pending.to_json())
                print("paused")
            else:
                history = messages_from_json((folder / "history.json").read_text())
                pending = PendingApprovals.from_json((folder / "pending.json").read_text())
                response = await agent.resume(history, pending)
                print(json.dumps({"text": response.text, "new": len(response.new_messages),
                                  "sent": len(provider.requests[0].messages)}))

    trio.run(main)
    """
)


def test_a_turn_paused_in_one_process_is_resumed_in_another(tmp_path: Path) -> None:
    program = tmp_path / "agent.py"
    program.write_text(PROGRAM)
    # The two processes share the approval key (the environment's: no code change).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "KOVA_APPROVAL_KEY": "k" * 32}

    def run(step: str) -> str:
        done = subprocess.run(
            [sys.executable, str(program), step, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    assert run("run").strip() == "paused"
    # The person decides, e.g. in a web backend: read, decide, store.
    stored = tmp_path / "pending.json"
    pending = PendingApprovals.from_json(stored.read_text())
    stored.write_text(pending.approve("call_2").deny("call_3", "keep /b").to_json())
    outcome = json.loads(run("resume"))
    assert outcome == {"text": "all done", "new": 2, "sent": 3}
    assert (tmp_path / "runs.txt").read_text().splitlines() == ["look", "remove /a"]


async def test_a_structured_turn_that_pauses_says_so_and_can_be_resumed() -> None:
    provider = ScriptedProvider([*script()[:1], reply_text('{"removed": 1}')])
    agent = AgentBuilder().provider(provider).tools(look, remove).defer_approvals().build()
    async with agent:
        with pytest.raises(StructuredOutputError, match="paused for approvals") as caught:
            await agent.run_structured(HISTORY, ResponseFormat.named("r", {"type": "object"}))
        paused = caught.value.response
        assert isinstance(paused, AgentResponse)
        assert paused.pending is not None
        decided = paused.pending.deny("call_2").deny("call_3")
        done = await agent.resume([*HISTORY, *paused.new_messages], decided)
    assert json.loads(done.text) == {"removed": 1}


async def test_a_streamed_structured_turn_that_pauses_says_so() -> None:
    provider = ScriptedProvider(script()[:1])
    agent = AgentBuilder().provider(provider).tools(look, remove).defer_approvals().build()
    async with agent:
        with pytest.raises(StructuredOutputError, match="paused for approvals") as caught:
            async with agent.stream_structured(HISTORY, dict) as values:
                async for _ in values:
                    pass
    paused = caught.value.response
    assert isinstance(paused, AgentResponse)
    assert paused.pending is not None
    assert [call.id for call in paused.pending.calls] == ["call_2", "call_3"]


async def test_approve_deny_and_always_on_one_step() -> None:
    provider = ScriptedProvider(
        [
            reply_tool_calls(
                ("remove", {"path": "/tmp/a"}),
                ("remove", {"path": "/tmp/b"}),
                ("look", {"path": "/x"}),
                ("remove", {"path": "/tmp/c"}),
            ),
            reply_tool_calls(("remove", {"path": "/tmp/d"})),
            reply_text("Done."),
        ]
    )
    # Every call is deferred, the read-only one too: three decisions cover four calls.
    agent = (
        AgentBuilder()
        .provider(provider)
        .tools(look, remove)
        .defer_approvals(lambda c: True)
        .build()
    )
    async with agent:
        first = await agent.run(HISTORY)
        assert first.pending is not None
        assert len(first.pending.calls) == 4
        decided = (
            first.pending.approve("call_3")
            .deny("call_2", "not b")
            .approve("call_1", always=True)  # covers call_4, and later calls to remove
        )
        assert decided.undecided == ()
        second = await agent.resume([*HISTORY, *first.new_messages], decided)
    assert second.pending is None  # /tmp/d ran without asking
    assert sorted(RUNS) == ["look /x", "remove /tmp/a", "remove /tmp/c", "remove /tmp/d"]
    answered = results(second.new_messages[0])
    assert answered["call_2"].text == "tool call denied: not b"
    assert [m.role for m in second.new_messages] == ["tool", "assistant", "tool", "assistant"]


async def test_a_deferred_call_with_lone_surrogates_pauses_and_resumes() -> None:
    """A model's call id and arguments may hold lone surrogates (UTF-8 refuses them): the
    pause's fingerprints are still made, the pending state round-trips as JSON, and the
    resumed turn runs the call."""

    @tool
    async def shout(word: str) -> str:
        """Shout.

        Args:
            word: the word.
        """
        return word.upper()

    call = ToolUse(id="call_\ud800", name="shout", input={"word": "a\udc80"})
    provider = ScriptedProvider([reply_tool_calls(call), reply_text("Done.")])
    agent = (
        AgentBuilder().provider(provider).tool(shout).defer_approvals().approval_key(KEY).build()
    )
    async with agent:
        first = await agent.run(HISTORY)
        pending = first.pending
        assert pending is not None
        assert [c.id for c in pending.calls] == ["call_\ud800"]
        stored = PendingApprovals.from_json(pending.approve("call_\ud800").to_json())
        second = await agent.resume([*HISTORY, *first.new_messages], stored)
    assert second.text == "Done."
    (result,) = second.new_messages[0].content
    assert isinstance(result, ToolResult)
    assert (result.tool_use_id, result.content) == ("call_\ud800", "A\udc80")


async def test_a_pending_value_with_an_impossible_usage_figure_is_refused() -> None:
    from kova import Usage
    from kova._record import evolve

    agent = AgentBuilder().provider(ScriptedProvider(script())).tools(look, remove)
    async with agent.defer_approvals().approval_key(KEY).build() as opened:
        first = await opened.run(HISTORY)
        assert first.pending is not None
        decided = first.pending.approve("call_2").approve("call_3")
        history = [*HISTORY, *first.new_messages]
        for usage in (Usage(input_tokens=-1), Usage(output_tokens=True)):
            bad = evolve(decided, usage=usage)
            with pytest.raises(ApprovalMismatchError, match="pending approvals' usage"):
                await opened.resume(history, bad)
    assert RUNS == ["look /tmp"]  # only the first step's own call ran
