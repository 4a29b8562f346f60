"""AG-UI at /agui: runs posted as RunAgentInput, events back as SSE, each event validated with
ag-ui-protocol's own models; a deferred approval as an interrupt the client resumes."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from ag_ui.core import Event, EventType, RunAgentInput
from pydantic import TypeAdapter

import kova.serve

from ._agents import TOKEN, open_agent
from ._serving import serving

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)
HEADERS = {"authorization": f"Bearer {TOKEN}"}


def _input(prompt: str, **extra: Any) -> dict[str, Any]:
    value = RunAgentInput(
        thread_id="thread-1",
        run_id="run-1",
        messages=[{"id": "m1", "role": "user", "content": prompt}],  # type: ignore[list-item]
        **extra,
    )
    dumped: dict[str, Any] = value.model_dump(by_alias=True, exclude_none=True)
    return dumped


async def _run(client: httpx2.AsyncClient, url: str, body: Any) -> list[Any]:
    """The run's events, each parsed and validated by ag-ui-protocol."""
    events = []
    async with client.stream("POST", url, json=body, headers=HEADERS) as reply:
        assert reply.status_code == 200, await reply.aread()
        assert reply.headers["content-type"].startswith("text/event-stream")
        async for line in reply.aiter_lines():
            if line.startswith("data: "):
                events.append(EVENTS.validate_json(line[6:]))
    return events


def _types(events: list[Any]) -> list[str]:
    return [event.type.value for event in events]


async def test_a_run_streams_tool_calls_text_and_usage_as_agui_events() -> None:
    async with open_agent() as (agent, _), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with httpx2.AsyncClient() as client:
            events = await _run(client, url + "/agui", _input("weather", state={"step": 1}))
    kinds = _types(events)
    assert kinds[:3] == ["RUN_STARTED", "STATE_SNAPSHOT", "TOOL_CALL_START"]
    end = kinds.index("TOOL_CALL_END")
    # The arguments as the model streamed them, piece by piece.
    assert set(kinds[3:end]) == {"TOOL_CALL_ARGS"}
    assert len(kinds[3:end]) > 1
    assert kinds[end + 1 : end + 3] == ["TOOL_CALL_RESULT", "TEXT_MESSAGE_START"]
    assert kinds[-2:] == ["TEXT_MESSAGE_END", "RUN_FINISHED"]
    start, result = events[2], events[end + 1]
    assert start.tool_call_name == "get_weather"
    assert json.loads("".join(e.delta for e in events[3:end])) == {"city": "Oslo"}
    assert {e.tool_call_id for e in events[3 : end + 1]} == {start.tool_call_id}
    assert result.tool_call_id == start.tool_call_id
    assert result.content == "-3°C, snow"
    text = "".join(e.delta for e in events if e.type == EventType.TEXT_MESSAGE_CONTENT)
    assert text == "It is -3°C, snow in Oslo."
    finished = events[-1]
    assert (finished.thread_id, finished.run_id) == ("thread-1", "run-1")
    assert finished.result == text
    assert finished.usage[0].total_tokens > 0
    assert events[1].snapshot == {"step": 1}


async def test_a_conversation_with_earlier_tool_calls_is_taken_whole() -> None:
    body = _input("x")
    body["messages"] = [
        {"id": "1", "role": "user", "content": "weather"},
        {
            "id": "2",
            "role": "assistant",
            "toolCalls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"id": "3", "role": "tool", "toolCallId": "c1", "content": "sunny"},
    ]
    async with open_agent() as (agent, fake), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with httpx2.AsyncClient() as client:
            events = await _run(client, url + "/agui", body)
    assert events[-1].result == "It is sunny in Oslo."
    sent = fake.chat_requests()[0].json()["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]


@pytest.mark.parametrize("approve", [True, False])
async def test_a_deferred_approval_is_an_interrupt_the_client_resumes(approve: bool) -> None:
    async with open_agent(defer=True) as (agent, fake):
        async with serving(kova.serve.app(agent, token=TOKEN)) as url:
            async with httpx2.AsyncClient() as client:
                first = await _run(client, url + "/agui", _input("weather"))
                outcome = first[-1].outcome
                assert outcome.type == "interrupt"
                (interrupt,) = outcome.interrupts
                assert interrupt.reason == "tool_approval"
                assert interrupt.tool_call_id == first[1].tool_call_id
                assert "TOOL_CALL_RESULT" not in _types(first)
                answer = {"approve": approve, "reason": "not now"}
                resume = _input(
                    "ignored",
                    resume=[
                        {"interrupt_id": interrupt.id, "status": "resolved", "payload": answer}
                    ],
                )
                second = await _run(client, url + "/agui", resume)
                again = await client.post(url + "/agui", json=resume, headers=HEADERS)
    results = [e for e in second if e.type == EventType.TOOL_CALL_RESULT]
    assert second[-1].type == EventType.RUN_FINISHED
    assert second[-1].outcome is None
    if approve:
        assert results[0].content == "-3°C, snow"
        assert second[-1].result == "It is -3°C, snow in Oslo."
    else:
        assert "not now" in results[0].content
        assert "not now" in second[-1].result
    assert again.status_code == 404  # answered already
    assert again.json()["error"]["code"] == "unknown_interrupt"
    assert len(fake.chat_requests()) == 2


@pytest.mark.parametrize(
    ("path", "body", "status", "words"),
    [
        ("/agui", b"{junk", 400, "not valid JSON"),
        ("/agui", b"[]", 400, "RunAgentInput"),
        ("/agui", b'{"threadId": 5, "runId": "r", "messages": []}', 400, "threadId"),
        ("/agui", b'{"threadId": "t", "runId": "r", "messages": []}', 400, "messages ending"),
        ("/agui/ghost", json.dumps(_input("hi")).encode(), 404, "ghost"),
    ],
)
async def test_bad_runs_get_an_error_and_the_server_serves_on(
    path: str, body: bytes, status: int, words: str
) -> None:
    async with open_agent() as (agent, _), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with httpx2.AsyncClient() as client:
            reply = await client.post(url + path, content=body, headers=HEADERS)
            unauthorized = await client.post(url + "/agui", json=_input("hi"))
            ok = await _run(client, url + "/agui", _input("hi"))
    assert reply.status_code == status
    assert words in reply.json()["error"]["message"]
    assert unauthorized.status_code == 401
    assert "error" in unauthorized.json()
    assert ok[-1].result == "You said: hi"


async def test_a_failed_turn_ends_with_run_error() -> None:
    from kova.agent import AgentBuilder
    from kova.testing import ErrorReply, ScriptedProvider

    agent = (
        AgentBuilder()
        .provider(ScriptedProvider([ErrorReply(status_code=400, message="bad things")]))
        .build()
    )
    async with serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with httpx2.AsyncClient() as client:
            events = await _run(client, url + "/agui", _input("hi"))
    assert _types(events) == ["RUN_STARTED", "RUN_ERROR"]
    assert "bad things" in events[-1].message
