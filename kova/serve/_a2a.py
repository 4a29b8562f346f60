"""A2A at ``/a2a`` (JSON-RPC binding) with the agent card at
``/.well-known/agent-card.json``, on ``a2a-sdk``'s protocol types and served by kova's own
handlers: the SDK's request handler and event queues run on asyncio, kova's turns on trio.

``SendMessage`` runs a turn and answers with the task (at once, still working, with
``returnImmediately``: the turn then runs in the app's own nursery); ``SendStreamingMessage``
streams the task, its status updates and its answer as artifact chunks; ``SubscribeToTask``
streams a running task's from now on (the task first); ``GetTask``, ``ListTasks`` and
``CancelTask`` look tasks up and cancel a task's turn. A message's ``contextId`` is a
conversation: the turns of one context see each other (kept in memory, the least recent
forgotten first). Errors are JSON-RPC errors with A2A's codes (task not found -32001, not
cancelable -32002, unsupported operation -32004, ...).
"""

from __future__ import annotations

import base64
import binascii
import secrets
import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import trio

from .._errors import KovaError
from .._json import dumps_bytes
from .._messages import Message
from .._models import TextDelta
from ..agent import ToolCallDeferred, TurnCompleted
from ._http import BadRequest, EventStream, json_response, read_json
from ._turns import PausedTurn, Watched, failure

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from a2a.types import a2a_pb2
    from starlette.requests import Request
    from starlette.routing import BaseRoute

    from ..agent import Agent, AgentResponse
    from ..sessions import Session
    from ._turns import Served

__all__ = ["routes"]

PROTOCOL_VERSION = "1.0"
_KEEP = 1024
"""Tasks and contexts kept (each), the least recent forgotten first (a running task is
never forgotten); also the most tasks running after their send returned."""
_WATCHER_BACKLOG = 4096
"""Events a subscriber may fall behind by before its stream is ended (it can subscribe
again, and gets the task as it is then)."""
_PAGE_SIZE = 50
_MAX_PAGE_SIZE = 100


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_TERMINAL = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"})


class _Task:
    """A task's record: its protocol value, the scope of the turn running it, and the
    streams of the clients subscribed to it (each gets every event as JSON)."""

    __slots__ = ("running", "scope", "task", "watchers")

    def __init__(self, task: a2a_pb2.Task) -> None:
        self.task = task
        self.scope: trio.CancelScope | None = None
        self.running = True
        """Until its turn ended (or, submitted and never started, it was cancelled)."""
        self.watchers: list[trio.MemorySendChannel[tuple[str, dict[str, Any]]]] = []

    def publish(self, kind: str, value: dict[str, Any]) -> None:
        """Hand an event to every subscriber; one that fell too far behind is dropped."""
        for watcher in list(self.watchers):
            try:
                watcher.send_nowait((kind, value))
            except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                self.watchers.remove(watcher)
                watcher.close()

    def finish(self) -> None:
        """The turn ended: every subscriber's stream ends after what it was sent."""
        self.running = False
        self.scope = None
        for watcher in self.watchers:
            watcher.close()
        self.watchers.clear()


class Tasks:
    """Tasks and conversations of one served agent, in memory. Changed only in plain methods
    (trio's one thread: no task sees a half-made change)."""

    __slots__ = ("contexts", "tasks")

    def __init__(self) -> None:
        self.tasks: OrderedDict[str, _Task] = OrderedDict()
        self.contexts: OrderedDict[str, tuple[Message, ...]] = OrderedDict()

    def add(self, record: _Task) -> None:
        self.tasks[record.task.id] = record
        if len(self.tasks) > _KEEP:
            for task_id in [i for i, r in self.tasks.items() if not r.running]:
                del self.tasks[task_id]
                if len(self.tasks) <= _KEEP:
                    break

    def running(self) -> int:
        return sum(1 for record in self.tasks.values() if record.running)

    def remember(self, context_id: str, history: tuple[Message, ...]) -> None:
        self.contexts[context_id] = history
        self.contexts.move_to_end(context_id)
        while len(self.contexts) > _KEEP:
            self.contexts.popitem(last=False)

    def get(self, task_id: str) -> _Task:
        record = self.tasks.get(task_id)
        if record is None:
            raise RpcError(-32001, f"no task {task_id[:100]!r} here")
        return record


def _card(agent: Agent, url: str, *, secured: bool) -> dict[str, Any]:
    from a2a.types import a2a_pb2
    from google.protobuf.json_format import MessageToDict

    name = agent.config.name
    card = a2a_pb2.AgentCard(
        name=name,
        description=agent.config.system_prompt or f"The kova agent {name!r}.",
        version="1.0.0",
        supported_interfaces=[
            a2a_pb2.AgentInterface(
                url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION
            )
        ],
        capabilities=a2a_pb2.AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            a2a_pb2.AgentSkill(
                id=name, name=name, description=f"Ask the agent {name!r}.", tags=["kova"]
            )
        ],
    )
    if secured:
        card.security_schemes["bearer"].http_auth_security_scheme.scheme = "Bearer"
        requirement = card.security_requirements.add()
        requirement.schemes["bearer"].SetInParent()
    found: dict[str, Any] = MessageToDict(card)
    return found


def routes(served: Served, *, secured: bool) -> list[BaseRoute]:
    from starlette.routing import Route

    books = {name: Tasks() for name in served.agents}
    first = next(iter(served.agents))

    def agent_of(request: Request) -> tuple[Agent, Tasks, str]:
        name = request.path_params.get("name", first)
        agent = served.agents.get(name)
        if agent is None:
            raise BadRequest(404, f"no agent named {name[:100]!r} is served here")
        base = str(request.base_url).rstrip("/")
        url = f"{base}/a2a" if "name" not in request.path_params else f"{base}/a2a/{name}"
        return agent, books[name], url

    async def card(request: Request) -> Any:
        try:
            agent, _, url = agent_of(request)
        except BadRequest as exc:
            return json_response({"error": exc.message}, 404)
        return json_response(_card(agent, url, secured=secured))

    async def rpc(request: Request) -> Any:
        identifier: Any = None
        try:
            agent, tasks, _ = agent_of(request)
            try:
                body = await read_json(request, limit=served.max_body_bytes)
            except BadRequest as exc:
                if exc.status == 413:
                    return _error_response(None, -32600, exc.message, status=413)
                raise RpcError(-32700, exc.message) from None
            if not isinstance(body, dict) or body.get("jsonrpc") != "2.0":
                raise RpcError(-32600, 'not a JSON-RPC 2.0 request: {"jsonrpc": "2.0", ...}')
            identifier = body.get("id")
            if not isinstance(identifier, str | int) or isinstance(identifier, bool):
                identifier = None
                raise RpcError(-32600, "the request needs an id (a string or an integer)")
            method = body.get("method")
            params = body.get("params")
            if not isinstance(params, dict):
                raise RpcError(-32602, "params must be an object")
            return await _dispatch(served, agent, tasks, identifier, method, params)
        except RpcError as exc:
            return _error_response(identifier, exc.code, exc.message)
        except BadRequest as exc:
            return _error_response(identifier, -32001 if exc.status == 404 else -32602, exc.message)

    return [
        Route("/.well-known/agent-card.json", card, methods=["GET"]),
        Route("/a2a/{name}/.well-known/agent-card.json", card, methods=["GET"]),
        Route("/a2a", rpc, methods=["POST"]),
        Route("/a2a/{name}", rpc, methods=["POST"]),
    ]


def _error_json(identifier: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": identifier, "error": {"code": code, "message": message}}


def _error_response(identifier: Any, code: int, message: str, *, status: int = 200) -> Any:
    return json_response(_error_json(identifier, code, message), status)


def _parse(params: dict[str, Any], kind: Any) -> Any:
    from google.protobuf.json_format import ParseDict, ParseError

    try:
        return ParseDict(params, kind(), ignore_unknown_fields=True)
    except (ParseError, ValueError, TypeError) as exc:
        raise RpcError(-32602, f"invalid params: {exc}") from None
    except SystemError:  # protobuf's C parser on some text where an object belongs (a lone
        # surrogate, say): still the client's params
        raise RpcError(-32602, "invalid params: not a valid request of this method") from None


def _dict(value: Any) -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict

    found: dict[str, Any] = MessageToDict(value)
    return found


async def _dispatch(
    served: Served, agent: Agent, tasks: Tasks, identifier: Any, method: Any, params: dict[str, Any]
) -> Any:
    from a2a.types import a2a_pb2

    if method in ("SendMessage", "SendStreamingMessage"):
        request = _parse(params, a2a_pb2.SendMessageRequest)
        config = request.configuration
        keep = config.history_length if config.HasField("history_length") else None
        if keep is not None and keep < 0:
            raise RpcError(-32602, "historyLength must not be negative")
        if method == "SendMessage" and config.return_immediately:
            return _result(identifier, {"task": _dict(_start(served, agent, tasks, request))})
        run = _Run(agent, tasks, request, served)
        if method == "SendMessage":

            async def compute() -> tuple[int, Any]:
                task = _trimmed(await run.run(None), keep)
                return 200, {"jsonrpc": "2.0", "id": identifier, "result": {"task": _dict(task)}}

            return Watched(compute)

        async def produce(write: Callable[[bytes], Awaitable[None]]) -> None:
            async def emit(kind: str, value: dict[str, Any]) -> None:
                await write(_event(identifier, kind, value))

            await run.run(emit)

        return EventStream(produce)
    if method == "SubscribeToTask":
        return _subscribe(tasks.get(_parse(params, a2a_pb2.SubscribeToTaskRequest).id), identifier)
    if method == "GetTask":
        request = _parse(params, a2a_pb2.GetTaskRequest)
        keep = request.history_length if request.HasField("history_length") else None
        if keep is not None and keep < 0:
            raise RpcError(-32602, "historyLength must not be negative")
        return _result(identifier, _dict(_trimmed(tasks.get(request.id).task, keep)))
    if method == "ListTasks":
        return _result(identifier, _list(tasks, _parse(params, a2a_pb2.ListTasksRequest)))
    if method == "CancelTask":
        request = _parse(params, a2a_pb2.CancelTaskRequest)
        record = tasks.get(request.id)
        state = a2a_pb2.TaskState.Name(record.task.status.state)
        if state in _TERMINAL or record.scope is None:
            raise RpcError(-32002, f"the task is {state.removeprefix('TASK_STATE_').lower()}")
        _status(record.task, "TASK_STATE_CANCELED", "cancelled by the client")
        record.scope.cancel(reason="cancelled by the A2A client")
        return _result(identifier, _dict(record.task))
    if isinstance(method, str):
        raise RpcError(-32601, f"method {method[:100]!r} is not supported here")
    raise RpcError(-32600, "method must be a string")


def _event(identifier: Any, kind: str, value: dict[str, Any]) -> bytes:
    """One server-sent event of a stream: a JSON-RPC response whose result is ``{kind:
    value}`` (a StreamResponse)."""
    data = {"jsonrpc": "2.0", "id": identifier, "result": {kind: value}}
    return b"data: " + dumps_bytes(data) + b"\n\n"


def _trimmed(task: a2a_pb2.Task, keep: int | None) -> a2a_pb2.Task:
    """``task`` with at most its ``keep`` latest history messages (all when ``None``)."""
    from a2a.types import a2a_pb2

    if keep is None or len(task.history) <= keep:
        return task
    result = a2a_pb2.Task()
    result.CopyFrom(task)
    del result.history[: len(result.history) - keep]
    return result


def _start(
    served: Served, agent: Agent, tasks: Tasks, request: a2a_pb2.SendMessageRequest
) -> a2a_pb2.Task:
    """A send with ``returnImmediately``: the task, submitted; its turn runs in the app's
    nursery (to be followed with GetTask or SubscribeToTask)."""
    nursery = served.nursery
    if nursery is None:
        raise RpcError(
            -32004,
            "returnImmediately needs the app's lifespan to run (mounted, run "
            "app.router.lifespan_context from your own)",
        )
    if tasks.running() >= _KEEP:
        raise RpcError(-32603, f"{_KEEP} tasks are running already: try again later")
    run = _Run(agent, tasks, request, served)
    config = request.configuration
    keep = config.history_length if config.HasField("history_length") else None
    answer = _trimmed(run.task, keep)
    if answer is run.task:
        answer = type(run.task)()
        answer.CopyFrom(run.task)
    nursery.start_soon(run.run, None)
    return answer


def _subscribe(record: _Task, identifier: Any) -> Any:
    """A running task's stream from now on: the task as it is, then what happens to it."""
    from a2a.types import a2a_pb2

    if not record.running:
        state = a2a_pb2.TaskState.Name(record.task.status.state)
        raise RpcError(-32004, f"the task is {state.removeprefix('TASK_STATE_').lower()}")
    sender, receiver = trio.open_memory_channel[tuple[str, dict[str, Any]]](_WATCHER_BACKLOG)
    record.watchers.append(sender)
    first = _dict(record.task)

    async def produce(write: Callable[[bytes], Awaitable[None]]) -> None:
        try:
            await write(_event(identifier, "task", first))
            async with receiver:
                async for kind, value in receiver:
                    await write(_event(identifier, kind, value))
        finally:
            if sender in record.watchers:
                record.watchers.remove(sender)
            sender.close()

    return EventStream(produce)


def _list(tasks: Tasks, request: a2a_pb2.ListTasksRequest) -> dict[str, Any]:
    """A page of the tasks ``request`` asks for, the most recently updated first."""
    from a2a.types import a2a_pb2

    size = request.page_size if request.HasField("page_size") else _PAGE_SIZE
    if not 1 <= size <= _MAX_PAGE_SIZE:
        raise RpcError(-32602, f"pageSize must be 1 to {_MAX_PAGE_SIZE}")
    keep = request.history_length if request.HasField("history_length") else None
    if keep is not None and keep < 0:
        raise RpcError(-32602, "historyLength must not be negative")
    after = (
        request.status_timestamp_after.ToNanoseconds()
        if request.HasField("status_timestamp_after")
        else None
    )
    found = [
        record.task
        for record in tasks.tasks.values()
        if (not request.context_id or record.task.context_id == request.context_id)
        and (not request.status or record.task.status.state == request.status)
        and (after is None or record.task.status.timestamp.ToNanoseconds() >= after)
    ]
    found.sort(key=_order, reverse=True)
    start = 0
    if request.page_token:
        cursor = _cursor(request.page_token)
        start = next((i for i, task in enumerate(found) if _order(task) < cursor), len(found))
    page = found[start : start + size]
    listed = []
    for task in page:
        copy = a2a_pb2.Task()
        copy.CopyFrom(_trimmed(task, keep))
        if not request.include_artifacts:
            copy.ClearField("artifacts")
        listed.append(_dict(copy))
    more = start + size < len(found)
    token = ""
    if more and page:
        stamp, task_id = _order(page[-1])
        token = base64.urlsafe_b64encode(f"{stamp}:{task_id}".encode()).decode()
    return {
        "tasks": listed,
        "nextPageToken": token,
        "pageSize": size,
        "totalSize": len(found),
    }


def _order(task: a2a_pb2.Task) -> tuple[int, str]:
    return task.status.timestamp.ToNanoseconds(), task.id


def _cursor(token: str) -> tuple[int, str]:
    """The position a page token names (the last task of the page before)."""
    try:
        stamp, _, task_id = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
        return int(stamp), task_id
    except (binascii.Error, UnicodeError, ValueError):
        raise RpcError(-32602, "pageToken is not one this server gave") from None


def _result(identifier: Any, result: Any) -> Any:
    return json_response({"jsonrpc": "2.0", "id": identifier, "result": result})


def _agent_message(task: a2a_pb2.Task, text: str) -> a2a_pb2.Message:
    from a2a.types import a2a_pb2

    return a2a_pb2.Message(
        message_id=str(uuid.uuid4()),
        context_id=task.context_id,
        task_id=task.id,
        role=a2a_pb2.Role.ROLE_AGENT,
        parts=[a2a_pb2.Part(text=text)],
    )


def _status(task: a2a_pb2.Task, state: str, text: str | None = None) -> None:
    from a2a.types import a2a_pb2

    task.status.state = a2a_pb2.TaskState.Value(state)  # type: ignore[assignment]
    task.status.timestamp.GetCurrentTime()
    task.status.ClearField("message")
    if text is not None:
        task.status.message.CopyFrom(_agent_message(task, text))


class _Run:
    """One SendMessage: the task, the turn, and what the stream is told."""

    __slots__ = ("_agent", "_history", "_record", "_session", "_tasks")

    def __init__(
        self, agent: Agent, tasks: Tasks, request: a2a_pb2.SendMessageRequest, served: Served
    ) -> None:
        from a2a.types import a2a_pb2

        message = request.message
        if not message.parts:
            raise RpcError(-32602, "the message has no parts")
        texts = []
        for index, part in enumerate(message.parts):
            if part.WhichOneof("content") != "text":
                raise RpcError(-32005, f"part {index} is not text: only text is taken here")
            texts.append(part.text)
        text = "".join(texts)
        max_chars = served.max_prompt_chars
        if not text or len(text) > max_chars:
            raise RpcError(-32602, f"the message text must be 1 to {max_chars} characters")
        if message.role == a2a_pb2.Role.ROLE_AGENT:
            raise RpcError(-32602, "the message must be the user's (role ROLE_USER)")
        if message.task_id:
            tasks.get(message.task_id)  # -32001 when unknown; a new task continues its context
        context_id = message.context_id or str(uuid.uuid4())
        self._agent = agent
        self._tasks = tasks
        self._session: Session | None = None
        if served.sessions is not None:  # the context is a kova session
            key = f"a2a/{agent.config.name}/{context_id}"
            self._session = served.sessions.session(key)
            self._history: tuple[Message, ...] = (Message.user(text),)
        else:
            self._history = (*tasks.contexts.get(context_id, ()), Message.user(text))
        user = a2a_pb2.Message()
        user.CopyFrom(message)
        user.context_id = context_id
        user.role = a2a_pb2.Role.ROLE_USER
        if not user.message_id:
            user.message_id = str(uuid.uuid4())
        task = a2a_pb2.Task(id=str(uuid.uuid4()), context_id=context_id, history=[user])
        user.task_id = task.id
        _status(task, "TASK_STATE_SUBMITTED")
        self._record = _Task(task)
        self._record.scope = trio.CancelScope()  # a cancel before the turn starts counts
        tasks.add(self._record)

    @property
    def task(self) -> a2a_pb2.Task:
        return self._record.task

    async def run(
        self, emit: Callable[[str, dict[str, Any]], Awaitable[None]] | None
    ) -> a2a_pb2.Task:
        """Run the turn (streaming to ``emit`` when given, and to the task's subscribers);
        returns the task as it ended."""
        from a2a.types import a2a_pb2

        record, task = self._record, self._record.task

        async def tell(kind: str, value: Any) -> None:
            data = _dict(value)
            record.publish(kind, data)
            if emit is not None:
                await emit(kind, data)

        artifact_id = "answer-" + secrets.token_hex(6)
        scope = record.scope
        assert scope is not None
        chunks = 0
        try:
            with scope:
                if not scope.cancel_called:  # (CancelTask may have come first)
                    _status(task, "TASK_STATE_WORKING")
                await tell("task", task)
                turn = self._agent.stream(self._history, session=self._session)
                async with turn as events:
                    async for event in events:
                        if event.path:
                            continue
                        if isinstance(event, TextDelta) and event.text:
                            if not chunks:  # the answer so far, for GetTask and subscribers
                                task.artifacts.add(artifact_id=artifact_id, name="answer")
                                task.artifacts[-1].parts.add(text="")
                            task.artifacts[-1].parts[0].text += event.text
                            artifact = a2a_pb2.Artifact(
                                artifact_id=artifact_id,
                                name="answer",
                                parts=[a2a_pb2.Part(text=event.text)],
                            )
                            update = a2a_pb2.TaskArtifactUpdateEvent(
                                task_id=task.id,
                                context_id=task.context_id,
                                artifact=artifact,
                                append=chunks > 0,
                                last_chunk=False,
                            )
                            chunks += 1
                            await tell("artifactUpdate", update)
                        elif isinstance(event, ToolCallDeferred):
                            raise PausedTurn
                        elif isinstance(event, TurnCompleted):
                            self._completed(event.response, artifact_id)
        except KovaError as exc:
            _, _, message = failure(exc)
            _status(task, "TASK_STATE_FAILED", message)
        finally:
            if a2a_pb2.TaskState.Name(task.status.state) not in _TERMINAL:
                _status(task, "TASK_STATE_CANCELED", "the turn was cancelled")
            final = a2a_pb2.TaskStatusUpdateEvent(
                task_id=task.id, context_id=task.context_id, status=task.status
            )
            record.publish("statusUpdate", _dict(final))
            record.finish()
        if emit is not None:
            await emit("statusUpdate", _dict(final))
        return task

    def _completed(self, response: AgentResponse, artifact_id: str) -> None:
        """The turn answered: the task completes with the answer (or fails, paused)."""
        from a2a.types import a2a_pb2

        task = self._record.task
        if response.pending is not None:
            raise PausedTurn
        if self._session is None:
            self._tasks.remember(task.context_id, (*self._history, *response.new_messages))
        answer = _agent_message(task, response.text)
        task.history.append(answer)
        del task.artifacts[:]  # the streamed answer so far, replaced by the whole one
        task.artifacts.append(
            a2a_pb2.Artifact(
                artifact_id=artifact_id,
                name="answer",
                parts=[a2a_pb2.Part(text=response.text)],
            )
        )
        _status(task, "TASK_STATE_COMPLETED")
        task.status.message.CopyFrom(answer)
