"""A2A at ``/a2a`` (JSON-RPC binding) with the agent card at
``/.well-known/agent-card.json``, on ``a2a-sdk``'s protocol types and served by kova's own
handlers: the SDK's request handler and event queues run on asyncio, kova's turns on trio.

``SendMessage`` runs a turn and answers with the task; ``SendStreamingMessage`` streams the
task, its status updates and its answer as artifact chunks; ``GetTask`` and ``CancelTask``
look a task up and cancel its turn. A message's ``contextId`` is a conversation: the turns
of one context see each other (kept in memory, the least recent forgotten first). Errors are
JSON-RPC errors with A2A's codes (task not found -32001, not cancelable -32002, ...).
"""

from __future__ import annotations

import secrets
import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import trio

from .._errors import KovaError
from .._messages import Message
from .._models import TextDelta
from ..agent import ToolCallDeferred, TurnCompleted
from ._http import BadRequest, EventStream, json_body, read_json
from ._turns import PausedTurn, Watched, failure

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from a2a.types import a2a_pb2
    from starlette.requests import Request
    from starlette.routing import BaseRoute

    from ..agent import Agent
    from ..sessions import Session
    from ._app import Served

__all__ = ["routes"]

PROTOCOL_VERSION = "1.0"
_KEEP = 1024
"""Tasks and contexts kept (each), the least recent forgotten first."""


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_TERMINAL = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"})


class _Task:
    """A task's record: its protocol value and the scope of the turn running it."""

    __slots__ = ("scope", "task")

    def __init__(self, task: a2a_pb2.Task) -> None:
        self.task = task
        self.scope: trio.CancelScope | None = None


class Tasks:
    """Tasks and conversations of one served agent, in memory. Changed only in plain methods
    (trio's one thread: no task sees a half-made change)."""

    __slots__ = ("contexts", "tasks")

    def __init__(self) -> None:
        self.tasks: OrderedDict[str, _Task] = OrderedDict()
        self.contexts: OrderedDict[str, tuple[Message, ...]] = OrderedDict()

    def add(self, record: _Task) -> None:
        self.tasks[record.task.id] = record
        while len(self.tasks) > _KEEP:
            self.tasks.popitem(last=False)

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
    from starlette.responses import Response
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

    async def card(request: Request) -> Response:
        try:
            agent, _, url = agent_of(request)
        except BadRequest as exc:
            return Response(json_body({"error": exc.message}), status_code=404)
        body = json_body(_card(agent, url, secured=secured))
        return Response(body, media_type="application/json")

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
    from starlette.responses import Response

    body = json_body(_error_json(identifier, code, message))
    return Response(body, status_code=status, media_type="application/json")


def _parse(params: dict[str, Any], kind: Any) -> Any:
    from google.protobuf.json_format import ParseDict, ParseError

    try:
        return ParseDict(params, kind(), ignore_unknown_fields=True)
    except (ParseError, ValueError, TypeError) as exc:
        raise RpcError(-32602, f"invalid params: {exc}") from None


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
        run = _Run(agent, tasks, request, served)
        if method == "SendMessage":

            async def compute() -> tuple[int, Any]:
                task = await run.run(None)
                return 200, {"jsonrpc": "2.0", "id": identifier, "result": {"task": _dict(task)}}

            return Watched(compute)

        async def produce(write: Callable[[bytes], Awaitable[None]]) -> None:
            async def emit(kind: str, value: Any) -> None:
                data = {"jsonrpc": "2.0", "id": identifier, "result": {kind: _dict(value)}}
                await write(b"data: " + json_body(data) + b"\n\n")

            await run.run(emit)

        return EventStream(produce)
    if method == "GetTask":
        request = _parse(params, a2a_pb2.GetTaskRequest)
        task = tasks.get(request.id).task
        result = a2a_pb2.Task()
        result.CopyFrom(task)
        if request.HasField("history_length"):
            keep = request.history_length
            del result.history[: max(0, len(result.history) - keep)]
        return _result(identifier, _dict(result))
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


def _result(identifier: Any, result: Any) -> Any:
    from starlette.responses import Response

    body = json_body({"jsonrpc": "2.0", "id": identifier, "result": result})
    return Response(body, media_type="application/json")


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

    __slots__ = ("_agent", "_history", "_record", "_session", "_tasks", "_user")

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
        self._user = user
        task = a2a_pb2.Task(id=str(uuid.uuid4()), context_id=context_id, history=[user])
        user.task_id = task.id
        _status(task, "TASK_STATE_SUBMITTED")
        self._record = _Task(task)
        tasks.add(self._record)

    async def run(self, emit: Callable[[str, Any], Awaitable[None]] | None) -> a2a_pb2.Task:
        """Run the turn (streaming to ``emit`` when given); returns the task as it ended."""
        from a2a.types import a2a_pb2

        record, task = self._record, self._record.task
        artifact_id = "answer-" + secrets.token_hex(6)
        record.scope = trio.CancelScope()
        _status(task, "TASK_STATE_WORKING")
        if emit is not None:
            await emit("task", task)
        chunks = 0
        try:
            with record.scope:
                turn = self._agent.stream(self._history, session=self._session)
                async with turn as events:
                    async for event in events:
                        if event.path:
                            continue
                        if isinstance(event, TextDelta) and event.text and emit is not None:
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
                            await emit("artifactUpdate", update)
                        elif isinstance(event, ToolCallDeferred):
                            raise PausedTurn
                        elif isinstance(event, TurnCompleted):
                            response = event.response
                            if response.pending is not None:
                                raise PausedTurn
                            if self._session is None:
                                self._tasks.remember(
                                    task.context_id, (*self._history, *response.new_messages)
                                )
                            answer = _agent_message(task, response.text)
                            task.history.append(answer)
                            task.artifacts.append(
                                a2a_pb2.Artifact(
                                    artifact_id=artifact_id,
                                    name="answer",
                                    parts=[a2a_pb2.Part(text=response.text)],
                                )
                            )
                            _status(task, "TASK_STATE_COMPLETED")
                            task.status.message.CopyFrom(answer)
        except KovaError as exc:
            _, _, message = failure(exc)
            _status(task, "TASK_STATE_FAILED", message)
        finally:
            record.scope = None
            if a2a_pb2.TaskState.Name(task.status.state) not in _TERMINAL:
                _status(task, "TASK_STATE_CANCELED", "the turn was cancelled")
        if emit is not None:
            final = a2a_pb2.TaskStatusUpdateEvent(
                task_id=task.id, context_id=task.context_id, status=task.status
            )
            await emit("statusUpdate", final)
        return task
