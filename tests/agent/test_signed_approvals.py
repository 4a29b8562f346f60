"""Signed pending approvals (issue 42 items 1-3, 8): what leaves the process comes back
unchanged or is refused, a decided pause runs once, and a resume runs under the agent's
limits. Each test here fails on the code before signing, except the two that kill the
"always" mutants issue 42 lists (they fail when the turn forgets its always approvals on a
resume or in its JSON; the code before signing kept them)."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from typing import TYPE_CHECKING, Any

import pytest
import trio

from kova import InferenceConfig, Message, Secret, ToolAnnotations, ToolResult
from kova.agent import DEFER, AgentBuilder, PendingApprovals, RunTools, Turn
from kova.errors import ApprovalMismatchError, BuildError, SerializationError
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import definition, tool

if TYPE_CHECKING:
    from pathlib import Path

    from kova.agent import Agent, AgentResponse

KEY = Secret("the first test key, 32 characters")
OTHER = Secret("another test key, 32 characters!")
HISTORY = (Message.user("tidy up"),)
RUNS: list[str] = []


@tool(annotations=ToolAnnotations(read_only=True))
def look(path: str) -> str:
    """List a folder."""
    RUNS.append(f"look {path}")
    return f"{path}: a, b"


@tool(annotations=ToolAnnotations(destructive=True))
def delete_file(path: str) -> str:
    """Delete a file."""
    RUNS.append(f"delete {path}")
    return f"deleted {path}"


@pytest.fixture(autouse=True)
def _clear_runs() -> None:
    RUNS.clear()


def _outer_script() -> list[Any]:
    return [reply_tool_calls(("cleaner", {"input": "tidy reports"})), reply_text("all tidy")]


def _inner_script() -> list[Any]:
    return [
        reply_tool_calls(("look", {"path": "reports"}), ("delete_file", {"path": "reports/a.txt"})),
        reply_text("deleted reports/a.txt"),
    ]


def nested(key: Secret | None = KEY, *, resuming: bool = False) -> Agent:
    """A writer whose cleaner (an agent used as a tool) defers its deletions to a person
    (``resuming``: their models answer what comes after the pause)."""
    skip = 1 if resuming else 0
    cleaner = (
        AgentBuilder()
        .provider(ScriptedProvider(_inner_script()[skip:]))
        .name("cleaner")
        .tools(look, delete_file)
        .defer_approvals()
        .build()
    )
    builder = (
        AgentBuilder()
        .provider(ScriptedProvider(_outer_script()[skip:]))
        .name("writer")
        .tool(cleaner.as_tool())
    )
    if key is not None:
        builder = builder.approval_key(key)
    return builder.build()


def flat(provider: ScriptedProvider, key: Secret | list[Secret] | None = KEY) -> Agent:
    builder = AgentBuilder().provider(provider).tools(look, delete_file).defer_approvals()
    if key is not None:
        builder = builder.approval_key(key)
    return builder.build()


def _flat_script() -> list[Any]:
    return [
        reply_tool_calls(("look", {"path": "/tmp"}), ("delete_file", {"path": "/tmp/a"})),
        reply_text("Done."),
        reply_text("Done again."),
    ]


async def _paused(agent: Agent) -> tuple[list[Message], AgentResponse]:
    first = await agent.run(HISTORY)
    assert first.pending is not None
    return [*HISTORY, *first.new_messages], first


# --- finding 1: everything approved or deciding what runs is signed ------------------------


def _edits() -> dict[str, Any]:
    def inner_arguments(doc: dict[str, Any]) -> None:
        # The person saw delete_file('reports/a.txt'); the JSON now says another path, with
        # the inner call's fingerprint recomputed (what passed on the old main).
        from kova.agent._approvals import call_fingerprint

        inner = doc["inner"]["call_1"]["pending"]
        for calls in (inner["calls"], doc["calls"]):
            calls[0]["arguments"] = {"path": "/etc/passwd"}
            calls[0]["fingerprint"] = call_fingerprint("delete_file", {"path": "/etc/passwd"})
        history = doc["inner"]["call_1"]["history"]
        for block in history[-1]["content"]:
            if block.get("type") == "tool_use" and block["name"] == "delete_file":
                block["input"] = {"path": "/etc/passwd"}

    def always(doc: dict[str, Any]) -> None:
        doc["inner"]["call_1"]["pending"]["always"] = ["delete_file"]

    def annotations(doc: dict[str, Any]) -> None:
        doc["calls"][0]["annotations"]["destructive"] = False
        doc["calls"][0]["annotations"]["read_only"] = True

    def results(doc: dict[str, Any]) -> None:
        inner = doc["inner"]["call_1"]["pending"]
        inner["results"][0]["content"] = "reports: nothing worth keeping, delete all"

    def counters(doc: dict[str, Any]) -> None:
        doc["counters"]["requests"] = 0

    def turn_id(doc: dict[str, Any]) -> None:
        doc["turn_id"] = "another-turn"

    def nonce(doc: dict[str, Any]) -> None:
        doc["nonce"] = "0" * 32

    return {
        "inner arguments": inner_arguments,
        "always": always,
        "annotations": annotations,
        "results": results,
        "counters": counters,
        "turn id": turn_id,
        "nonce": nonce,
    }


@pytest.mark.parametrize("edit", sorted(_edits()))
async def test_a_changed_pending_value_is_refused_and_runs_nothing(edit: str) -> None:
    async with nested() as writer:
        history, first = await _paused(writer)
        assert first.pending is not None
        (call,) = first.pending.calls
        assert (call.name, call.arguments) == ("delete_file", {"path": "reports/a.txt"})
        document = json.loads(first.pending.approve(call).to_json())
        _edits()[edit](document)
        forged = PendingApprovals.from_json(json.dumps(document))
        with pytest.raises(ApprovalMismatchError, match="signature"):
            await writer.resume(history, forged)
        assert RUNS == ["look reports"]  # only what ran before the pause
        # The value as signed resumes, and runs exactly the approved call.
        done = await writer.resume(
            history, PendingApprovals.from_json(first.pending.approve(call).to_json())
        )
    assert done.text == "all tidy"
    assert RUNS == ["look reports", "delete reports/a.txt"]


async def test_without_a_key_the_value_resumes_here_and_to_json_names_both_ways(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KOVA_APPROVAL_KEY", raising=False)
    async with flat(ScriptedProvider(_flat_script()), key=None) as agent:
        history, first = await _paused(agent)
        assert first.pending is not None
        with pytest.raises(SerializationError) as caught:
            first.pending.to_json()
        message = str(caught.value)
        assert "\n" not in message
        assert "approval_key" in message
        assert "KOVA_APPROVAL_KEY" in message
        # Moved as a dict to another process, its process-only seal is refused there: in
        # this one, it resumes.
        done = await agent.resume(history, first.pending.approve("call_2"))
    assert done.text == "Done."
    assert RUNS == ["look /tmp", "delete /tmp/a"]


async def test_the_environment_key_signs_and_keys_rotate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KOVA_APPROVAL_KEY", KEY.reveal())
    async with flat(ScriptedProvider(_flat_script()), key=None) as agent:
        history, first = await _paused(agent)
    assert first.pending is not None
    stored = first.pending.approve("call_2").to_json()
    monkeypatch.delenv("KOVA_APPROVAL_KEY")
    # A key the value was not signed with: refused; the new key first and the old one after
    # it (a rotation): accepted.
    async with flat(ScriptedProvider(_flat_script()[1:]), key=OTHER) as other:
        with pytest.raises(ApprovalMismatchError, match=r"another key|does not have"):
            await other.resume(history, PendingApprovals.from_json(stored))
    async with flat(ScriptedProvider(_flat_script()[1:]), key=None) as keyless:
        with pytest.raises(ApprovalMismatchError, match="this agent has none"):
            await keyless.resume(history, PendingApprovals.from_json(stored))
    assert RUNS == ["look /tmp"]
    async with flat(ScriptedProvider(_flat_script()[1:]), key=[OTHER, KEY]) as rotated:
        done = await rotated.resume(history, PendingApprovals.from_json(stored))
    assert done.text == "Done."
    assert RUNS == ["look /tmp", "delete /tmp/a"]
    # The rotated agent signs with its first key.
    async with flat(ScriptedProvider(_flat_script()), key=[OTHER, KEY]) as rotated:
        _, paused = await _paused(rotated)
    assert paused.pending is not None
    paused.pending.verify(OTHER)
    with pytest.raises(ApprovalMismatchError):
        paused.pending.verify(KEY)


def test_an_approval_key_is_a_long_enough_secret() -> None:
    builder = AgentBuilder()
    with pytest.raises(BuildError, match=r"kova\.Secret"):
        builder.approval_key("plain text key, long enough....")  # type: ignore[arg-type]
    with pytest.raises(BuildError, match="shorter than 16"):
        builder.approval_key(Secret("short"))
    with pytest.raises(BuildError, match="at least one"):
        builder.approval_key([])


async def test_an_unsigned_value_from_the_turn_core_is_refused() -> None:
    async with flat(ScriptedProvider(_flat_script())) as agent:
        history, first = await _paused(agent)
        assert first.pending is not None
        from kova._record import evolve

        bare = evolve(first.pending, signature="")
        with pytest.raises(ApprovalMismatchError, match="no signature"):
            await agent.resume(history, bare.approve("call_2"))
    assert RUNS == ["look /tmp"]


# --- finding 2: a decided pause runs once ----------------------------------------------------


async def test_a_decided_value_resumes_once_in_sequence_and_in_20_concurrent_tasks() -> None:
    async with flat(ScriptedProvider(_flat_script())) as agent:
        history, first = await _paused(agent)
        assert first.pending is not None
        decided = PendingApprovals.from_json(first.pending.approve("call_2").to_json())
        outcomes: list[str] = []

        async def submit() -> None:
            try:
                await agent.resume(history, decided)
                outcomes.append("ran")
            except ApprovalMismatchError as exc:
                outcomes.append("refused" if "already used" in str(exc) else str(exc))

        async with trio.open_nursery() as nursery:
            for _ in range(20):
                nursery.start_soon(submit)
        assert sorted(outcomes) == ["ran"] + ["refused"] * 19
        with pytest.raises(ApprovalMismatchError, match="already used"):
            await agent.resume(history, decided)
    assert RUNS == ["look /tmp", "delete /tmp/a"]


async def test_a_failed_resume_gives_its_decisions_back() -> None:
    async with flat(ScriptedProvider(_flat_script())) as agent:
        history, first = await _paused(agent)
        assert first.pending is not None
        decided = first.pending.approve("call_2")
        with pytest.raises(ApprovalMismatchError, match="does not end"):
            await agent.resume(HISTORY, decided)  # refused before anything ran
        done = await agent.resume(history, decided)
    assert done.text == "Done."


PROGRAM = textwrap.dedent(
    """
    import sys, trio
    from kova import Message, ToolAnnotations, messages_from_json
    from kova.agent import AgentBuilder, PendingApprovals
    from kova.durable import SqliteJournal
    from kova.errors import ApprovalMismatchError
    from kova.testing import ScriptedProvider, reply_text
    from kova.tools import tool

    folder, number = sys.argv[1], sys.argv[2]

    @tool(annotations=ToolAnnotations(destructive=True))
    def delete_file(path: str) -> str:
        \"\"\"Delete a file.\"\"\"
        with open(folder + "/runs.txt", "a") as runs:
            runs.write(path + "\\n")
        return "deleted " + path

    @tool(annotations=ToolAnnotations(read_only=True))
    def look(path: str) -> str:
        \"\"\"List a folder.\"\"\"
        return path

    async def main():
        history = messages_from_json(open(folder + "/history.json").read())
        pending = PendingApprovals.from_json(open(folder + "/pending.json").read())
        agent = AgentBuilder().provider(ScriptedProvider([reply_text("done")]))
        agent = agent.tools(look, delete_file).defer_approvals().build()
        async with agent:
            try:
                await agent.resume(
                    history, pending, journal=SqliteJournal(folder + "/j.db"),
                    turn_id="resume-" + number,
                )
                print("ran")
            except ApprovalMismatchError:
                print("refused")

    trio.run(main)
    """
)


async def test_four_processes_with_a_journal_run_the_approved_call_once(tmp_path: Path) -> None:
    from kova import messages_to_json

    async with flat(ScriptedProvider(_flat_script())) as agent:
        history, first = await _paused(agent)
    assert first.pending is not None
    (tmp_path / "history.json").write_text(messages_to_json(history))
    (tmp_path / "pending.json").write_text(first.pending.approve("call_2").to_json())
    (tmp_path / "program.py").write_text(PROGRAM)
    env = {**os.environ, "KOVA_APPROVAL_KEY": KEY.reveal(), "PYTHONPATH": os.pathsep.join(sys.path)}
    outcomes: list[str] = []

    async def one(number: int) -> None:
        done = await trio.run_process(
            [sys.executable, str(tmp_path / "program.py"), str(tmp_path), str(number)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=env,
        )
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        outcomes.append(done.stdout.decode().strip())

    async with trio.open_nursery() as nursery:
        for number in range(4):
            nursery.start_soon(one, number)
    assert sorted(outcomes) == ["ran", "refused", "refused", "refused"]
    assert (tmp_path / "runs.txt").read_text().splitlines() == ["/tmp/a"]


# --- finding 3: limits and counters ----------------------------------------------------------


async def test_counters_must_be_non_negative_and_limits_are_the_agents() -> None:
    async with flat(ScriptedProvider(_flat_script())) as agent:
        history, first = await _paused(agent)
    assert first.pending is not None
    document = json.loads(first.pending.approve("call_2").to_json())
    document["counters"]["requests"] = -1000
    with pytest.raises(SerializationError, match="'requests' must be 0 or more"):
        PendingApprovals.from_json(json.dumps(document))
    # The record itself refuses them (the turn core and the pending value share it).
    from kova.agent import Counters

    with pytest.raises(ValueError, match="0 or more"):
        Counters(requests=-1000)
    assert first.pending.counters == Counters(requests=1, tool_calls=2)
    # A resume counts the whole turn under the agent's max_iterations: with
    # max_iterations=1 the paused part's one request leaves room for one more only.
    model = ScriptedProvider([reply_tool_calls(("look", {"path": "x"}))] * 5)
    builder = AgentBuilder().provider(model).tools(look, delete_file).defer_approvals()
    async with builder.max_iterations(1).approval_key(KEY).build() as limited:
        with pytest.raises(Exception, match=r"iteration|max_iterations"):
            await limited.resume(history, first.pending.approve("call_2"))
    assert len(model.requests) == 1


# --- the mutant of issue 42: an "always" approval survives a second pause --------------------


async def test_an_always_approval_holds_when_the_turn_pauses_a_second_time() -> None:
    provider = ScriptedProvider(
        [
            reply_tool_calls(("delete_file", {"path": "/a"})),
            reply_tool_calls(("delete_file", {"path": "/b"}), ("other", {})),
            reply_text("done"),
        ]
    )

    @tool(annotations=ToolAnnotations(destructive=True))
    def other() -> str:
        """Something else destructive."""
        RUNS.append("other")
        return "ok"

    builder = AgentBuilder().provider(provider).tools(delete_file, other).defer_approvals()
    async with builder.approval_key(KEY).build() as agent:
        history, first = await _paused(agent)
        assert first.pending is not None
        second = await agent.resume(history, first.pending.approve("call_1", always=True))
        # The second pause waits for `other` only; delete_file ran, approved for the turn.
        assert second.pending is not None
        assert [call.name for call in second.pending.calls] == ["other"]
        assert second.pending.always == ("delete_file",)
        assert RUNS == ["delete /a", "delete /b"]
        stored = PendingApprovals.from_json(second.pending.to_json())
        third = await agent.resume([*history, *second.new_messages], stored.approve("call_3"))
    assert third.text == "done"
    assert RUNS == ["delete /a", "delete /b", "other"]


@tool(annotations=ToolAnnotations(destructive=True))
def other() -> str:
    """Something else destructive."""
    RUNS.append("other")
    return "ok"


async def test_an_always_approval_still_holds_after_the_second_pause_is_resumed() -> None:
    """The mutant issue 42 found surviving: a turn resumed from its second pause forgot the
    tools approved "always" at the first (the test above passes without the turn restoring
    them, since its model asks for nothing after the second pause). Here every resume starts
    from the stored JSON, as a web app's does, and the model asks for ``delete_file`` again
    after the second pause: it runs without asking anyone."""
    provider = ScriptedProvider(
        [
            reply_tool_calls(("delete_file", {"path": "/a"})),
            reply_tool_calls(("other", {})),
            reply_tool_calls(("delete_file", {"path": "/c"}), ("other", {})),
            reply_text("done"),
        ]
    )
    builder = AgentBuilder().provider(provider).tools(delete_file, other).defer_approvals()
    async with builder.approval_key(KEY).build() as agent:
        history, first = await _paused(agent)
        assert first.pending is not None
        decided = PendingApprovals.from_json(first.pending.approve("call_1", always=True).to_json())
        second = await agent.resume(history, decided)
        assert second.pending is not None
        assert [call.name for call in second.pending.calls] == ["other"]
        history = [*history, *second.new_messages]
        stored = PendingApprovals.from_json(second.pending.to_json())
        third = await agent.resume(history, stored.approve(stored.calls[0]))
        # `other` was approved once, not always: it pauses again; delete_file does not.
        assert third.pending is not None
        assert [call.name for call in third.pending.calls] == ["other"]
        assert RUNS == ["delete /a", "other", "delete /c"]
        assert third.pending.always == ("delete_file",)
        history = [*history, *third.new_messages]
        stored = PendingApprovals.from_json(third.pending.to_json())
        fourth = await agent.resume(history, stored.approve(stored.calls[0]))
    assert fourth.pending is None
    assert fourth.text == "done"
    assert RUNS == ["delete /a", "other", "delete /c", "other"]


def test_a_stored_turn_keeps_its_always_approvals_at_every_phase() -> None:
    """The same through the turn's own JSON (what the journal stores after each step): a
    turn read back at any phase after the "always" decision still runs that tool unasked."""
    tools = (definition(look), definition(delete_file), definition(other))

    def drive(turn: Turn, store: bool) -> Turn:
        return Turn.from_json(turn.to_json()) if store else turn

    for stored_at in range(5):
        turn = Turn.start(HISTORY, tools=tools, config=InferenceConfig(model="m"))
        turn.next_step()
        turn.model_replied(reply_tool_calls(("delete_file", {"path": "/a"})))
        turn.next_step()
        turn.tools_finished([DEFER])
        pending = turn.next_step().pending  # type: ignore[attr-defined]
        turn.decided(pending.approve("call_1", always=True))
        turn = drive(turn, stored_at == 0)
        turn.next_step()
        turn.tools_finished([ToolResult(content="deleted /a")])
        turn = drive(turn, stored_at == 1)
        turn.next_step()
        turn.model_replied(reply_tool_calls(("other", {})))
        turn = drive(turn, stored_at == 2)
        turn.next_step()
        turn.tools_finished([DEFER])
        turn = drive(turn, stored_at == 3)
        pending = turn.next_step().pending  # type: ignore[attr-defined]
        assert pending.always == ("delete_file",)
        turn.decided(pending.approve(pending.calls[0]))
        turn = drive(turn, stored_at == 4)
        turn.next_step()
        turn.tools_finished([ToolResult(content="ok")])
        turn.next_step()
        turn.model_replied(reply_tool_calls(("delete_file", {"path": "/c"})))
        step = turn.next_step()
        assert isinstance(step, RunTools)
        assert step.approved == frozenset(call.id for call in step.calls), stored_at


# --- finding 8: nesting ---------------------------------------------------------------------


@pytest.mark.parametrize("depth", [600, 100_000])
def test_deeply_nested_json_is_a_serialization_error(depth: int) -> None:
    deep = "[" * depth + "]" * depth
    for read in (PendingApprovals.from_json, Turn.from_json):
        with pytest.raises(SerializationError, match="nested"):
            read('{"kova": "x", "calls": ' + deep + "}")


# --- the property: random forgeries never run a tool ----------------------------------------


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON document (decisions aside: they are the person's)."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            if key != "decisions":
                found.extend(_paths(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_paths(item, (*path, index)))
    return found


def _forge(document: Any, path: tuple[Any, ...], replacement: Any, drop: bool) -> Any:
    if not path:
        return replacement
    copy = json.loads(json.dumps(document))
    parent = copy
    for part in path[:-1]:
        parent = parent[part]
    if drop and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    return copy


def test_random_forgeries_never_run_a_tool() -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    async def pause() -> tuple[list[Message], str]:
        async with nested() as writer:
            history, first = await _paused(writer)
        assert first.pending is not None
        return history, first.pending.approve("call_2").to_json()

    history, decided = trio.run(pause)
    original = json.loads(decided)
    signed = PendingApprovals.from_json(decided)
    paths = _paths(original)
    scalars = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8)
    values = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
        max_leaves=5,
    )
    RUNS.clear()

    async def resume(text: str) -> str:
        try:
            pending = PendingApprovals.from_json(text)
        except (SerializationError, ApprovalMismatchError, TypeError, ValueError):
            return "unreadable"
        async with nested(resuming=True) as writer:
            try:
                response = await writer.resume(history, pending)
            except ApprovalMismatchError:
                return "refused"
        return response.text

    outcomes: dict[str, int] = {}

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        st.lists(st.tuples(st.sampled_from(paths), values, st.booleans()), min_size=1, max_size=3)
    )
    def forged(edits: list[tuple[tuple[Any, ...], Any, bool]]) -> None:
        document: Any = original
        for path, replacement, drop in edits:
            try:
                document = _forge(document, path, replacement, drop)
            except (KeyError, IndexError, TypeError):
                continue  # the path is gone after an earlier edit
        try:
            same = PendingApprovals.from_json(json.dumps(document)) == signed
        except (SerializationError, ApprovalMismatchError, TypeError, ValueError):
            same = False
        if same:
            return  # the JSON changed, not the value (null for a default, say)
        RUNS.clear()
        outcome = trio.run(resume, json.dumps(document))
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        assert outcome in ("unreadable", "refused"), (edits, outcome)
        assert RUNS == []

    forged()
    assert sum(outcomes.values()) > 50
    # Unforged, it runs exactly the approved call.
    RUNS.clear()
    assert trio.run(resume, decided) == "all tidy"
    assert RUNS == ["delete reports/a.txt"]
