"""ToolContext: a @tool parameter the model never sees, filled from the call (ids, the
agent's name, an idempotency key, the caller's deps); the caller's contextvars reach tools."""

from __future__ import annotations

import contextvars
import dataclasses
from typing import Any

import pytest
import trio

from kova import Message, Secret
from kova.agent import AgentBuilder, PendingApprovals, TurnCompleted
from kova.errors import ApprovalMismatchError
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import ToolContext, current_tool_context, tool
from kova.tools._context import idempotency_key


@dataclasses.dataclass
class Deps:
    user: str
    seen: list[tuple[str, str, str, str]] = dataclasses.field(default_factory=list)


@tool
async def greet(ctx: ToolContext[Deps], greeting: str) -> str:
    """Greet the current user.

    Args:
        greeting: the word to greet with.
    """
    ctx.deps.seen.append((ctx.call_id, ctx.turn_id, ctx.agent, ctx.idempotency_key))
    assert current_tool_context() is ctx
    return f"{greeting} {ctx.deps.user}"


def test_the_context_parameter_is_not_shown_to_the_model() -> None:
    assert list(greet.parameters["properties"]) == ["greeting"]
    assert greet.parameters["required"] == ["greeting"]


async def test_run_gives_the_tool_the_ids_the_agent_name_and_the_deps() -> None:
    provider = ScriptedProvider(
        [reply_tool_calls(("greet", {"greeting": "hello"})), reply_text("done")]
    )
    deps = Deps(user="alice")
    async with AgentBuilder().provider(provider).tool(greet).name("support").build() as agent:
        response = await agent.run("hi", deps=deps)
    [(call_id, turn_id, name, key)] = deps.seen
    assert (call_id, name) == ("call_1", "support")
    assert turn_id
    assert key == idempotency_key(turn_id, call_id)
    assert response.new_messages[1].content[0].text == "hello alice"  # type: ignore[union-attr]


async def test_stream_gives_the_deps_too_and_each_call_its_own_context() -> None:
    provider = ScriptedProvider(
        [
            reply_tool_calls(("greet", {"greeting": "hi"}), ("greet", {"greeting": "hey"})),
            reply_text("done"),
        ]
    )
    deps = Deps(user="bob")
    async with AgentBuilder().provider(provider).tool(greet).build() as agent:
        async with agent.stream([Message.user("hi")], deps=deps) as events:
            last = [event async for event in events][-1]
    assert isinstance(last, TurnCompleted)
    assert sorted(call for call, *_ in deps.seen) == ["call_1", "call_2"]
    keys = {key for *_, key in deps.seen}
    assert len(keys) == 2  # every call its own key
    assert len({turn for _, turn, _, _ in deps.seen}) == 1


REQUEST_USER: contextvars.ContextVar[str] = contextvars.ContextVar("request_user")


@tool
def whoami() -> str:
    """The user of the current request."""
    return REQUEST_USER.get("nobody")


async def test_the_callers_contextvars_reach_the_tool() -> None:
    provider = ScriptedProvider(
        [
            reply_tool_calls(("whoami", {})),
            reply_text("a"),
            reply_tool_calls(("whoami", {})),
            reply_text("b"),
        ]
    )
    async with AgentBuilder().provider(provider).tool(whoami).build() as agent:
        REQUEST_USER.set("carol")
        first = await agent.run("who?")
        async with trio.open_nursery() as nursery:

            async def other_request() -> None:
                REQUEST_USER.set("dave")
                await agent.run("who?")

            nursery.start_soon(other_request)
    assert first.new_messages[1].content[0].text == "carol"  # type: ignore[union-attr]
    assert provider.requests[3].messages[-1].content[0].text == "dave"  # type: ignore[union-attr]


MARK: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="unset")
FRESH: contextvars.ContextVar[str] = contextvars.ContextVar("fresh", default="unset")


@tool
async def set_mark(value: str) -> str:
    """Set a context variable and say what it was."""
    before = MARK.get()
    MARK.set(value)
    FRESH.set(value)  # a variable the caller never set
    await trio.lowlevel.checkpoint()
    return f"{before} -> {MARK.get()}"


async def test_a_variable_a_tool_sets_does_not_outlive_its_call() -> None:
    # One call (run in the turn's own task) and two in parallel, streamed and not: each call
    # sees the caller's value and its own change, and the caller never sees the change.
    provider = ScriptedProvider(
        [
            reply_tool_calls(("set_mark", {"value": "one"})),
            reply_tool_calls(("set_mark", {"value": "two"}), ("set_mark", {"value": "three"})),
            reply_text("done"),
            reply_tool_calls(("set_mark", {"value": "four"})),
            reply_text("done"),
        ]
    )
    async with AgentBuilder().provider(provider).tool(set_mark).build() as agent:
        MARK.set("caller")
        response = await agent.run("go")
        assert (MARK.get(), FRESH.get()) == ("caller", "unset")
        async with agent.stream("go") as events:
            async for _ in events:
                pass
        assert (MARK.get(), FRESH.get()) == ("caller", "unset")
    texts = [
        result.text
        for message in response.new_messages
        for result in message.content
        if hasattr(result, "tool_use_id") and hasattr(result, "is_error")
    ]
    assert texts == ["caller -> one", "caller -> two", "caller -> three"]
    assert provider.requests[4].messages[-1].content[0].text == "caller -> four"  # type: ignore[union-attr]


@tool
def ids(ctx: ToolContext) -> str:  # type: ignore[type-arg]
    """The call's ids."""
    return f"{ctx.call_id!r} {ctx.turn_id!r} {ctx.deps!r}"


async def test_a_tool_run_outside_an_agent_gets_an_empty_context() -> None:
    result = await ids.execute({})
    assert result.text == "'' '' None"


async def test_the_idempotency_key_is_stable_when_a_paused_call_runs_again() -> None:
    """The same decided call resumed twice (a host retrying after a crash): both runs carry
    the same turn id and idempotency key; the deps come with each resume."""
    provider = ScriptedProvider(
        [reply_tool_calls(("greet", {"greeting": "hi"})), reply_text("done"), reply_text("again")]
    )
    deps = Deps(user="erin")
    key = Secret("a test key, 32 characters long..")
    builder = AgentBuilder().provider(provider).tool(greet).defer_approvals().approval_key(key)
    async with builder.build() as agent:
        history = [Message.user("hi")]
        paused = await agent.run(history, deps=deps)
        assert paused.pending is not None
        assert deps.seen == []  # nothing ran: the call waits for a person
        decided = PendingApprovals.from_json(paused.pending.to_json()).approve("call_1")
        resumed = [*history, *paused.new_messages]
        await agent.resume(resumed, decided, deps=deps)
        with pytest.raises(ApprovalMismatchError, match="already used"):
            await agent.resume(resumed, decided, deps=deps)  # once per agent
    # Another process (here: another agent object) runs it again after a crash.
    async with builder.build() as again:
        await again.resume(resumed, decided, deps=deps)
    first, second = deps.seen
    assert first == second
    assert first[1] == paused.pending.turn_id
    assert first[3] == idempotency_key(paused.pending.turn_id, "call_1")


def test_any_call_id_has_an_idempotency_key_and_valid_ids_keep_theirs() -> None:
    """A model's call id may hold lone surrogates (which UTF-8 refuses): it still gets a key,
    distinct from every other id's, and a valid id's key is what it always was."""
    import hashlib

    ids = [
        "call_1",
        "\ud800",
        "\udfff",
        "a\ud800b",
        "a\udc00b",
        "\ud83d\ude00",
        "😀",
        "",
        "x" * 10_240,
    ]
    keys = [idempotency_key("turn", call_id) for call_id in ids]
    assert len(set(keys)) == len(ids)
    assert all(len(key) == 32 for key in keys)
    expected = hashlib.sha256(b"kova-tool-call\x00turn\x00call_1").hexdigest()[:32]
    assert keys[0] == expected


@pytest.mark.parametrize("field", ["call_id", "turn_id", "agent"])
def test_a_context_whose_ids_are_not_text_is_refused_naming_the_field(field: str) -> None:
    values: dict[str, Any] = {"call_id": "c1", "turn_id": "t1", "agent": "a", "deps": None}
    values[field] = 1
    with pytest.raises(TypeError, match=f"ToolContext {field} must be a str, got int"):
        ToolContext(**values)

    class Name(str):
        pass

    values[field] = Name("x")  # a str subclass is text
    assert getattr(ToolContext(**values), field) == "x"
