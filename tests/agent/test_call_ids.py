"""Tool calls get ids unique within their turn, whatever the provider sent (issue 42 item 5,
issue 43 item 2): every call runs, the journal keys each call's result by its own id, and
``ToolContext.idempotency_key`` differs per call and holds across re-runs of the same call."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

import pytest
import trio

from kova import Message, ToolAnnotations, ToolResult, ToolUse
from kova.agent import AgentBuilder, Turn
from kova.durable import SqliteJournal
from kova.providers.openai import (
    OpenAiCompatibleProvider,
    OpenAiConfig,
    OpenAiResponsesConfig,
    OpenAiResponsesProvider,
)
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.testing._http_server import FakeResponse, FakeStream, RecordedRequest, serve_http
from kova.tools import Tool, ToolContext, tool

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator
    from pathlib import Path

    from kova.providers import ModelResponse
    from kova.testing import ScriptRequest

HISTORY = [Message.user("pay both")]


@asynccontextmanager
async def raw_server(
    reply: Callable[[RecordedRequest], FakeResponse | FakeStream],
) -> AsyncIterator[tuple[str, None]]:
    """A loopback server answering every request with ``reply(request)``."""

    async def handler(request: RecordedRequest) -> FakeResponse | FakeStream:
        return reply(request)

    async with trio.open_nursery() as nursery:
        url: str = await nursery.start(serve_http, handler)
        yield url, None
        nursery.cancel_scope.cancel()


def _ids(messages: tuple[Message, ...]) -> list[str]:
    return [call.id for message in messages for call in message.tool_uses]


def _result_ids(messages: tuple[Message, ...]) -> list[str]:
    return [
        block.tool_use_id
        for message in messages
        for block in message.content
        if isinstance(block, ToolResult)
    ]


def _charging() -> tuple[Tool, list[tuple[str, str, str]]]:
    charged: list[tuple[str, str, str]] = []

    @tool
    async def charge(ctx: ToolContext[None], amount: str) -> str:
        """Charge an amount."""
        charged.append((amount, ctx.call_id, ctx.idempotency_key))
        return f"charged {amount}"

    return charge, charged


@pytest.mark.parametrize("streamed", [False, True])
async def test_two_calls_sharing_an_id_in_one_reply_both_run(streamed: bool) -> None:
    charge, charged = _charging()
    provider = ScriptedProvider(
        [
            reply_tool_calls(
                ToolUse(id="dup", name="charge", input={"amount": "5"}),
                ToolUse(id="dup", name="charge", input={"amount": "7"}),
            ),
            reply_text("done"),
        ]
    )
    async with AgentBuilder().provider(provider).tool(charge).build() as agent:
        if streamed:
            async with agent.stream(HISTORY) as events:
                response = None
                async for event in events:
                    response = getattr(event, "response", response)
            assert response is not None
        else:
            response = await agent.run(HISTORY)
    # No AssertionError: both ran, each answered under its own id, the first keeps the wire id.
    assert sorted(amount for amount, _, _ in charged) == ["5", "7"]
    assert _ids(response.new_messages) == ["dup", "dup_2"]
    assert _result_ids(response.new_messages) == ["dup", "dup_2"]
    results = [b for m in response.new_messages for b in m.content if isinstance(b, ToolResult)]
    assert [r.text for r in results] == ["charged 5", "charged 7"]
    assert len({key for _, _, key in charged}) == 2
    # The provider got the history back with the same ids in the calls and their results.
    sent = provider.requests[1].messages
    assert _ids(sent) == _result_ids(sent) == ["dup", "dup_2"]


def test_the_turn_renames_only_repeats_and_never_takes_a_later_wire_id() -> None:
    turn = Turn.start("go", tools=[], config=__import__("kova").InferenceConfig())
    turn.next_step()
    turn.model_replied(
        reply_tool_calls(
            ToolUse(id="a", name="f"), ToolUse(id="a", name="f"), ToolUse(id="a_2", name="f")
        )
    )
    step = turn.next_step()
    assert [call.id for call in step.calls] == ["a", "a_3", "a_2"]  # type: ignore[union-attr]
    turn.tools_finished([ToolResult(content="x")] * 3)
    turn.next_step()
    turn.model_replied(reply_tool_calls(ToolUse(id="a", name="f"), ToolUse(id="b", name="f")))
    step = turn.next_step()
    assert [call.id for call in step.calls] == ["a_4", "b"]  # type: ignore[union-attr]
    # The same value restored from JSON goes on with the same ids (a journal's replay).
    again = Turn.from_json(turn.to_json())
    assert again.next_step() == step


async def test_a_journaled_turn_runs_a_call_whose_id_an_earlier_reply_used(tmp_path: Path) -> None:
    # An OpenAI-compatible server that sends no ids: each reply's call is call_0 by position.
    def call(amount: str) -> dict[str, Any]:
        arguments = json.dumps({"amount": amount})
        function = {"name": "charge", "arguments": arguments}
        return {"tool_calls": [{"type": "function", "function": function}]}

    replies: Iterator[dict[str, Any]] = iter([call("5"), call("7"), {"content": "done"}])

    def reply(request: RecordedRequest) -> FakeResponse:
        message = {"role": "assistant", "content": None, **next(replies)}
        finish = "tool_calls" if "tool_calls" in message else "stop"
        body = {
            "id": "c",
            "object": "chat.completion",
            "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
        return FakeResponse(
            headers={"content-type": "application/json"}, body=json.dumps(body).encode()
        )

    charge, charged = _charging()
    async with raw_server(reply) as (url, _):
        provider = OpenAiCompatibleProvider(OpenAiConfig(model="m", base_url=url, api_key="k"))
        async with AgentBuilder().provider(provider).tool(charge).build() as agent:
            response = await agent.run(
                HISTORY, journal=SqliteJournal(tmp_path / "j.db"), turn_id="t"
            )
    # On the old main the journal answered the second call_0 with the first one's result.
    assert [amount for amount, _, _ in charged] == ["5", "7"]
    assert response.text == "done"
    results = [b for m in response.new_messages for b in m.content if isinstance(b, ToolResult)]
    assert [r.text for r in results] == ["charged 5", "charged 7"]
    assert charged[0][2] != charged[1][2]  # two charges, two idempotency keys
    assert len(set(_ids(response.new_messages))) == 2


async def test_the_idempotency_key_holds_across_a_rerun_of_the_same_call(tmp_path: Path) -> None:
    keys: list[str] = []
    first = trio.Event()
    attempts = 0

    @tool(annotations=ToolAnnotations(idempotent=True))
    async def charge(ctx: ToolContext[None], amount: str) -> str:
        """Charge an amount (deduplicated by the idempotency key)."""
        nonlocal attempts
        attempts += 1
        keys.append(ctx.idempotency_key)
        if attempts == 1:
            first.set()
            await trio.sleep_forever()
        return "charged"

    def model(request: ScriptRequest) -> ModelResponse:
        if any(isinstance(b, ToolResult) for m in request.messages for b in m.content):
            return reply_text("done")
        return reply_tool_calls(("charge", {"amount": "5"}))

    journal = SqliteJournal(tmp_path / "j.db")
    async with AgentBuilder().provider(ScriptedProvider(model)).tool(charge).build() as agent:
        # The first run is cancelled while its call runs (as a crash would stop it).
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(agent.run, HISTORY, journal=journal, turn_id="t"))
            await first.wait()
            nursery.cancel_scope.cancel()
        response = await agent.run(HISTORY, journal=journal, turn_id="t")
    assert response.text == "done"
    assert len(keys) == 2
    assert keys[0] == keys[1]


async def test_a_script_numbers_its_calls_on_across_replies() -> None:
    provider = ScriptedProvider(
        [
            reply_tool_calls(("f", {}), ("f", {})),
            reply_tool_calls(("f", {}), ToolUse(id="mine", name="f")),
            reply_tool_calls(ToolUse(id="mine", name="f")),
            reply_text("ok"),
        ]
    )

    @tool
    def f() -> str:
        """Nothing."""
        return "x"

    async with AgentBuilder().provider(provider).tool(f).build() as agent:
        response = await agent.run(HISTORY)
    # call_N ids go on across the script; other ids are served as written (and the turn
    # makes a repeated one unique).
    assert _ids(response.new_messages) == ["call_1", "call_2", "call_3", "mine", "mine_2"]


def _responses_stream(repeat: int) -> list[bytes]:
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_x",
        "name": "charge",
        "arguments": '{"amount":"5"}',
        "status": "completed",
    }
    frames = [
        {"type": "response.created", "response": {"id": "r", "model": "m"}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "arguments": ""},
        },
    ]
    frames += [{"type": "response.output_item.done", "output_index": 0, "item": item}] * repeat
    frames.append(
        {
            "type": "response.completed",
            "response": {"id": "r", "model": "m", "status": "completed", "output": [item]},
        }
    )
    return [b"data: " + json.dumps(frame).encode() + b"\n\n" for frame in frames]


async def test_a_responses_stream_repeating_an_item_ends_the_turn_cleanly() -> None:
    served = 0

    def reply(request: RecordedRequest) -> FakeStream:
        nonlocal served
        served += 1
        if served == 1:
            chunks = _responses_stream(repeat=2)
        else:
            done = {
                "type": "message",
                "id": "m1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "done", "annotations": []}],
            }
            chunks = [
                b"data: "
                + json.dumps(
                    {
                        "type": "response.completed",
                        "response": {"id": "r2", "status": "completed", "output": [done]},
                    }
                ).encode()
                + b"\n\n"
            ]
        return FakeStream(headers={"content-type": "text/event-stream"}, chunks=chunks)

    charge, charged = _charging()
    async with raw_server(reply) as (url, _):
        provider = OpenAiResponsesProvider(
            OpenAiResponsesConfig(model="m", base_url=url, api_key="k")
        )
        async with AgentBuilder().provider(provider).tool(charge).build() as agent:
            async with agent.stream(HISTORY) as events:
                async for _ in events:
                    pass
    # Whatever the stream's repeats make of the call, each call the turn runs has its own
    # id and key, and the turn ends with its answer (no AssertionError).
    assert charged
    assert len({call_id for _, call_id, _ in charged}) == len(charged)
    assert len({key for _, _, key in charged}) == len(charged)
