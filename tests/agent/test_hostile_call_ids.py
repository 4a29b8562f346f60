"""Whatever a model sends as a tool-call id, no actor crashes and the runtime keeps serving
(issue 43, item 1): lone surrogates, the empty id, 10 KB ids, control characters and ids two
calls share, from all six wire formats, streamed and not, on one shared runtime beside agents
that keep answering."""

from __future__ import annotations

import random
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

import pytest
import structlog
import trio
from _fake_formats import NATIVE as FORMATS

from kova import KovaError, Message, ToolUse
from kova._record import set_field
from kova.actors import open_runtime
from kova.agent import AgentBuilder, RetryConfig, TurnCompleted, spawn_provider
from kova.testing import (
    Script,
    ScriptRequest,
    reply_text,
    reply_tool_calls,
)
from kova.tools import ToolContext, tool

if TYPE_CHECKING:
    from collections.abc import Callable

    from kova.agent import Agent


@tool
async def echo(ctx: ToolContext[None], word: str) -> str:
    """Echo a word.

    Args:
        word: the word.
    """
    return f"{word} {ctx.idempotency_key}"


def _hostile_id(rng: random.Random) -> str:
    kind = rng.randrange(9)
    if kind == 0:
        return rng.choice(["\ud800", "\udfff", "call_\udc80", "\ud83d", "a\ud800b\udc00"])
    if kind == 1:
        return ""
    if kind == 2:
        return "x" * 10_240
    if kind == 3:
        return "".join(chr(rng.randrange(32)) for _ in range(rng.randint(1, 8)))
    if kind == 4:
        return rng.choice(["\x00", "\r\n", "\x1b[2J", "\u2028", "\x7f", "\ufeff"])
    if kind == 5:
        return rng.choice(['"', "\\", "</script>", "${jndi}", "{}", "%s%n"])
    if kind == 6:
        return "".join(chr(rng.randrange(0xD800, 0xE000)) for _ in range(rng.randint(1, 4)))
    if kind == 7:
        return rng.choice(["\U0001f600", "é", "日本"]) * rng.randint(1, 3000)
    return f"call_{rng.randrange(1000)}"


def _call(call_id: str) -> ToolUse:
    call = ToolUse(id="placeholder", name="echo", input={"word": "hi"})
    set_field(call, "id", call_id)  # a server can send what a ToolUse would refuse
    return call


def _model(cases: dict[str, list[str]]) -> Callable[[ScriptRequest], object]:
    def reply(request: ScriptRequest) -> object:
        last = request.messages[-1]
        if last.role == "tool":
            return reply_text("done")
        ids = cases.get(last.text)
        if ids is None:
            return reply_text("still here")
        return reply_tool_calls(*[_call(call_id) for call_id in ids])

    return reply


@pytest.mark.parametrize(("seed", "repeats"), [(1, False), (2, True), (3, True)])
async def test_hostile_tool_call_ids_never_stop_a_shared_runtime(
    seed: int, repeats: bool, autojump_clock: object
) -> None:
    rng = random.Random(seed)
    cases: dict[str, list[str]] = {}
    wanted = [rng.randint(1, 3) for _ in range(60)]
    for number in range(60):
        ids: list[str] = []
        while len(ids) < wanted[number]:
            call_id = _hostile_id(rng)
            if repeats or call_id not in ids:
                ids.append(call_id)
        if repeats and rng.random() < 0.25:
            ids.append(ids[0])  # two calls share an id
        cases[f"case {number}"] = ids
    outcomes: dict[str, int] = {"result": 0, "kova error": 0}
    bystander_turns = 0
    with structlog.testing.capture_logs() as logs:
        async with AsyncExitStack() as stack:
            runtime = await stack.enter_async_context(open_runtime())
            hostile: list[Agent] = []
            bystanders: list[Agent] = []
            for wire in FORMATS:
                server = await stack.enter_async_context(wire.open_server(Script(_model(cases))))
                shared = await spawn_provider(runtime, wire.build(server))
                for agents in (hostile, bystanders):
                    builder = AgentBuilder().provider(shared).runtime(runtime).tool(echo)
                    builder = builder.retry_config(RetryConfig(max_retries=0))
                    agents.append(await stack.enter_async_context(builder.build()))
            children = runtime.supervisor.children

            async def bystander_loop(agent: Agent) -> None:
                nonlocal bystander_turns
                for _ in range(15):
                    response = await agent.run("hello")
                    assert response.text == "still here"
                    bystander_turns += 1
                    await trio.sleep(0.01)

            async def hostile_turn(agent: Agent, prompt: str, streamed: bool) -> None:
                try:
                    if streamed:
                        async with agent.stream([Message.user(prompt)]) as events:
                            last = [event async for event in events][-1]
                        assert isinstance(last, TurnCompleted)
                    else:
                        await agent.run(prompt)
                except KovaError:
                    outcomes["kova error"] += 1
                else:
                    outcomes["result"] += 1

            async def hostile_loop() -> None:
                for prompt in cases:
                    for agent in hostile:
                        await hostile_turn(agent, prompt, rng.random() < 0.5)

            async with trio.open_nursery() as nursery:
                for agent in bystanders:
                    nursery.start_soon(bystander_loop, agent)
                nursery.start_soon(hostile_loop)
            assert runtime.supervisor.children == children
            for agent in bystanders:  # and they still answer afterwards
                assert (await agent.run("hello")).text == "still here"
    crashes = [e for e in logs if e["event"] in {"actor.crashed", "supervisor.gave_up"}]
    assert crashes == []
    assert bystander_turns == 15 * len(FORMATS)
    assert sum(outcomes.values()) == len(cases) * len(FORMATS)
    assert outcomes["result"] > len(cases)  # most hostile ids are served
