"""A2A at /a2a with the agent card, driven by a2a-sdk's own client (card, send, stream,
cancel); kova.a2a.RemoteAgent as another agent's tool."""

from __future__ import annotations

import uuid
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx
import httpx2
import pytest
import trio
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import a2a_pb2

import kova.serve
from kova.a2a import RemoteAgent, RemoteAgentError
from kova.agent import AgentBuilder
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls

from ._agents import TOKEN, open_agent, open_connections, released_within
from ._serving import serving

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = [
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpx.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'a2a.:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object:"
        "pytest.PytestUnraisableExceptionWarning"
    ),
]


def _message(text: str, context_id: str = "") -> a2a_pb2.SendMessageRequest:
    return a2a_pb2.SendMessageRequest(
        message=a2a_pb2.Message(
            message_id=str(uuid.uuid4()),
            context_id=context_id,
            role=a2a_pb2.Role.ROLE_USER,
            parts=[a2a_pb2.Part(text=text)],
        )
    )


@asynccontextmanager
async def a2a_client(url: str, *, streaming: bool, polling: bool = False) -> AsyncIterator[Any]:
    """a2a-sdk's client of the served agent; ``polling``: sends return at once
    (``returnImmediately``)."""
    headers = {"authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        config = ClientConfig(httpx_client=http, streaming=streaming, polling=polling)
        client = await create_client(url, config)
        try:
            yield client
        finally:
            await client.close()


async def test_the_card_describes_the_agent_and_its_endpoint() -> None:
    async with open_agent() as (agent, _), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with httpx.AsyncClient() as http:  # the card is public
            card = await A2ACardResolver(http, url).get_agent_card()
    assert card.name == "helper"
    (interface,) = card.supported_interfaces
    assert interface.url == url + "/a2a"
    assert interface.protocol_binding == "JSONRPC"
    assert card.capabilities.streaming
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"


async def test_send_runs_a_turn_and_a_context_is_a_conversation() -> None:
    async with open_agent() as (agent, fake), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with a2a_client(url, streaming=False) as client:
            (first,) = [r async for r in client.send_message(_message("weather"))]
            task = first.task
            (again,) = [r async for r in client.send_message(_message("more", task.context_id))]
            fetched = await client.get_task(a2a_pb2.GetTaskRequest(id=task.id))
    assert a2a_pb2.TaskState.Name(task.status.state) == "TASK_STATE_COMPLETED"
    assert task.artifacts[0].parts[0].text == "It is -3°C, snow in Oslo."
    assert [m.role for m in task.history] == [a2a_pb2.Role.ROLE_USER, a2a_pb2.Role.ROLE_AGENT]
    assert fetched.id == task.id
    assert again.task.artifacts[0].parts[0].text == "You said: more"
    # The second task of the context saw the first one's turn.
    third = fake.chat_requests()[2].json()["messages"]
    assert [m["role"] for m in third] == ["user", "assistant", "tool", "assistant", "user"]


async def test_stream_sends_the_task_answer_chunks_and_the_final_status() -> None:
    async with open_agent() as (agent, _), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with a2a_client(url, streaming=True) as client:
            events = [r async for r in client.send_message(_message("hello there"))]
    kinds = [r.WhichOneof("payload") for r in events]
    assert kinds[0] == "task"
    assert kinds[-1] == "status_update"
    chunks = [r.artifact_update for r in events if r.HasField("artifact_update")]
    assert len(chunks) > 2
    assert "".join(c.artifact.parts[0].text for c in chunks) == "You said: hello there"
    assert [c.append for c in chunks][:2] == [False, True]
    final = events[-1].status_update.status
    assert a2a_pb2.TaskState.Name(final.state) == "TASK_STATE_COMPLETED"


async def test_cancel_stops_a_streaming_task_and_its_model_connection() -> None:
    async with open_agent() as (agent, fake), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with a2a_client(url, streaming=True) as client:
            events: list[Any] = []
            async with trio.open_nursery() as nursery:

                async def stream() -> None:
                    async for response in client.send_message(_message("hold")):
                        events.append(response)

                nursery.start_soon(stream)
                with trio.fail_after(10):
                    while not any(e.HasField("artifact_update") for e in events):  # noqa: ASYNC110
                        await trio.sleep(0.005)
                assert open_connections(fake.base_url) == 1
                task_id = events[0].task.id
                cancelled = await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task_id))
            assert await released_within(fake.base_url, 1.0) is not None
            fetched = await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))
            with pytest.raises(Exception, match="cancel") as refused:
                await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task_id))
    assert a2a_pb2.TaskState.Name(cancelled.status.state) == "TASK_STATE_CANCELED"
    assert a2a_pb2.TaskState.Name(fetched.status.state) == "TASK_STATE_CANCELED"
    final = events[-1].status_update.status
    assert a2a_pb2.TaskState.Name(final.state) == "TASK_STATE_CANCELED"
    assert "not cancelable" in type(refused.value).__name__.lower() + str(refused.value) or (
        "canceled" in str(refused.value)
    )


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{junk", -32700),
        (b"[]", -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "Nope", "params": {}}', -32601),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}', -32001),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": 5}}', -32602),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": '
            b'{"messageId": "m", "role": "ROLE_USER", "parts": []}}}',
            -32602,
        ),
    ],
)
async def test_bad_requests_get_json_rpc_errors(body: bytes, code: int) -> None:
    async with open_agent() as (agent, _), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}) as client:
            reply = await client.post(url + "/a2a", content=body)
            unauthorized = await client.post(
                url + "/a2a", content=body, headers={"authorization": "Bearer nope-nope-nope"}
            )
    assert reply.json()["error"]["code"] == code
    assert reply.json()["jsonrpc"] == "2.0"
    assert unauthorized.status_code == 401
    assert unauthorized.json()["error"]["code"] == -32001


async def test_a_remote_agent_is_another_agents_tool() -> None:
    async with open_agent() as (remote_agent, _):
        async with serving(kova.serve.app(remote_agent, token=TOKEN)) as url:
            remote = RemoteAgent(url, token=TOKEN)
            assert await remote.ask("ping") == "You said: ping"
            outer = (
                AgentBuilder()
                .provider(
                    ScriptedProvider(
                        [
                            reply_tool_calls(("helper", {"prompt": "weather"})),
                            reply_text("The helper says it snows."),
                        ]
                    )
                )
                .tool(remote.as_tool(name="helper", description="Ask the weather helper."))
                .build()
            )
            async with outer:
                response = await outer.run("How is Oslo?")
            with pytest.raises(RemoteAgentError, match="failed"):
                await RemoteAgent(url, token="wrong-token-wrong").ask("ping")
    assert response.text == "The helper says it snows."
    results = [b for m in response.new_messages for b in m.content if hasattr(b, "tool_use_id")]
    assert results[0].text == "It is -3°C, snow in Oslo."
