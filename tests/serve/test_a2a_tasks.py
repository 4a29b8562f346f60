"""A2A's task methods beyond send and stream, driven by a2a-sdk's own client: a send with
``returnImmediately`` (the client's polling mode), ``SubscribeToTask`` to a running task,
``ListTasks`` with its filters and pages, ``GetTask``/``CancelTask`` of a task running in the
background."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
import trio
from a2a.types import a2a_pb2

import kova.serve

from ._agents import TOKEN, open_agent, released_within
from ._serving import serving
from .test_a2a import _message, a2a_client

pytestmark = [
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpx.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore2.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpx2.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'a2a.:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object:"
        "pytest.PytestUnraisableExceptionWarning"
    ),
]


def _state(task: Any) -> str:
    return a2a_pb2.TaskState.Name(task.status.state).removeprefix("TASK_STATE_")


async def _until(client: Any, task_id: str, state: str) -> Any:
    with trio.fail_after(10):
        while True:
            task = await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))
            if _state(task) == state:
                return task
            await trio.sleep(0.01)


async def test_return_immediately_answers_at_once_and_the_turn_runs_on() -> None:
    async with open_agent() as (agent, fake), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with a2a_client(url, streaming=False, polling=True) as client:
            (sent,) = [r async for r in client.send_message(_message("weather"))]
            done = await _until(client, sent.task.id, "COMPLETED")
    assert _state(sent.task) in ("SUBMITTED", "WORKING")
    assert not sent.task.artifacts  # answered before the turn
    assert done.artifacts[0].parts[0].text == "It is -3°C, snow in Oslo."
    assert len(fake.chat_requests()) == 2


async def test_subscribe_streams_a_running_task_and_cancel_ends_it() -> None:
    async with open_agent() as (agent, fake), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with a2a_client(url, streaming=False, polling=True) as polling:
            (sent,) = [r async for r in polling.send_message(_message("hold"))]
        task_id = sent.task.id
        async with a2a_client(url, streaming=True) as client:
            # The answer so far is the task's artifact while it works (GetTask shows it).
            with trio.fail_after(10):
                while True:
                    working = await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))
                    if working.artifacts:
                        break
                    await trio.sleep(0.01)
            seen: list[Any] = []
            async with trio.open_nursery() as nursery:

                async def follow() -> None:
                    request = a2a_pb2.SubscribeToTaskRequest(id=task_id)
                    async for response in client.subscribe(request):
                        seen.append(response)

                nursery.start_soon(follow)
                with trio.fail_after(10):
                    while not seen:  # noqa: ASYNC110
                        await trio.sleep(0.005)
                # A second subscriber gets the task as it is now too, then the rest.
                late: list[Any] = []

                async def follow_late() -> None:
                    request = a2a_pb2.SubscribeToTaskRequest(id=task_id)
                    async for response in client.subscribe(request):
                        late.append(response)

                nursery.start_soon(follow_late)
                with trio.fail_after(10):
                    while not late:  # noqa: ASYNC110
                        await trio.sleep(0.005)
                cancelled = await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task_id))
            assert await released_within(fake.base_url, 1.0) is not None
            with pytest.raises(Exception, match="canceled") as refused:
                async for _ in client.subscribe(a2a_pb2.SubscribeToTaskRequest(id=task_id)):
                    pass
    assert _state(working) == "WORKING"
    assert "a partial answer that stalls".startswith(working.artifacts[0].parts[0].text)
    assert [r.WhichOneof("payload") for r in seen] == ["task", "status_update"]
    assert seen[0].task.artifacts[0].parts[0].text == working.artifacts[0].parts[0].text
    assert _state(seen[-1].status_update) == "CANCELED"
    assert _state(cancelled) == "CANCELED"
    assert [r.WhichOneof("payload") for r in late] == ["task", "status_update"]
    assert _state(late[0].task) == "WORKING"
    assert "-32004" in str(refused.value) or "nsupported" in type(refused.value).__name__


async def test_list_tasks_filters_and_pages_the_most_recent_first() -> None:
    async with open_agent() as (agent, _), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with a2a_client(url, streaming=False) as client:
            (sent,) = [r async for r in client.send_message(_message("one"))]
            first = sent.task
            context = first.context_id
            ids = [first.id]
            for text in ("two", "three"):
                (sent,) = [r async for r in client.send_message(_message(text, context))]
                ids.append(sent.task.id)
            (sent,) = [r async for r in client.send_message(_message("elsewhere"))]
            other = sent.task
            everything = await client.list_tasks(a2a_pb2.ListTasksRequest())
            pages: list[Any] = []
            token = ""
            while True:
                page = await client.list_tasks(
                    a2a_pb2.ListTasksRequest(context_id=context, page_size=2, page_token=token)
                )
                pages.append(page)
                token = page.next_page_token
                if not token:
                    break
            full = await client.list_tasks(
                a2a_pb2.ListTasksRequest(
                    context_id=context, include_artifacts=True, history_length=1
                )
            )
            done = await client.list_tasks(
                a2a_pb2.ListTasksRequest(status=a2a_pb2.TaskState.TASK_STATE_COMPLETED)
            )
            none = await client.list_tasks(
                a2a_pb2.ListTasksRequest(status=a2a_pb2.TaskState.TASK_STATE_WORKING)
            )
    assert [t.id for t in everything.tasks] == [other.id, *reversed(ids)]
    assert everything.total_size == 4
    assert everything.page_size == 50
    assert not everything.tasks[0].artifacts  # only when asked for
    assert [[t.id for t in p.tasks] for p in pages] == [ids[:0:-1], ids[:1]]
    assert [p.total_size for p in pages] == [3, 3]
    assert full.tasks[0].artifacts[0].parts[0].text == "You said: three"
    assert [len(t.history) for t in full.tasks] == [1, 1, 1]
    assert len(done.tasks) == 4
    assert list(none.tasks) == []


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"pageSize": 0}, -32602),
        ({"pageSize": 101}, -32602),
        ({"pageToken": "!!not-ours"}, -32602),
        ({"historyLength": -1}, -32602),
    ],
)
async def test_bad_list_requests_get_invalid_params(params: dict[str, Any], code: int) -> None:
    async with open_agent() as (agent, _), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}) as http:
            body = {"jsonrpc": "2.0", "id": 7, "method": "ListTasks", "params": params}
            reply = await http.post(url + "/a2a", json=body)
            subscribe = {"jsonrpc": "2.0", "id": 8, "method": "SubscribeToTask", "params": {}}
            unknown = await http.post(url + "/a2a", json=subscribe)
    assert reply.json()["error"]["code"] == code
    assert reply.json()["id"] == 7
    assert unknown.json()["error"]["code"] == -32001  # no task with the empty id


async def test_return_immediately_without_the_apps_lifespan_is_refused() -> None:
    """Mounted without running its lifespan, the app has nowhere to run a background turn:
    the send says so (and a blocking send still works)."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    async with open_agent() as (agent, _), agent:
        host = Starlette(routes=[Mount("/agents", kova.serve.app(agent))])
        async with serving(host) as url, httpx2.AsyncClient() as http:
            message = {
                "messageId": "m1",
                "role": "ROLE_USER",
                "parts": [{"text": "hi"}],
            }
            params = {"message": message, "configuration": {"returnImmediately": True}}
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
            refused = await http.post(url + "/agents/a2a", json=body)
            del params["configuration"]
            answered = await http.post(url + "/agents/a2a", json=body)
    assert refused.json()["error"]["code"] == -32004
    assert "lifespan" in refused.json()["error"]["message"]
    assert answered.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_stopping_the_server_cancels_the_background_turns() -> None:
    async with open_agent() as (agent, fake):
        app = kova.serve.app(agent, token=TOKEN)
        async with serving(app) as url:
            async with a2a_client(url, streaming=False, polling=True) as client:
                (sent,) = [r async for r in client.send_message(_message("slow"))]
                with trio.fail_after(10):
                    while not fake.chat_requests():  # noqa: ASYNC110
                        await trio.sleep(0.005)
        assert await released_within(fake.base_url, 1.0) is not None
    assert _state(sent.task) in ("SUBMITTED", "WORKING")
