"""The OpenAI-compatible routes: ``POST /v1/chat/completions``, ``POST /v1/responses`` and
``GET /v1/models``, each agent a model under its own name.

The agent runs its tools here, on the server; the client gets the answer. Chat Completions
has no place for calls a server ran, so a streamed completion carries the text only; the
Responses API has one (hosted tool calls), so its answer lists each call as an ``mcp_call``
item (``server_label`` the agent's name) with its arguments and output, streamed as it
happens. Usage is in every answer (streamed chat completions: with
``stream_options.include_usage``, as OpenAI does). Errors come in OpenAI's shape,
``{"error": {"message", "type", "param", "code"}}``; a failure mid-stream as a last
``data: {"error": ...}`` chunk (chat) or a ``response.failed`` event (responses).
"""

from __future__ import annotations

import json
import secrets
import time
from typing import TYPE_CHECKING, Any

from .._errors import KovaError
from .._json import dumps_bytes
from .._messages import Image, Message, Text
from .._models import TextDelta
from .._requests import InferenceConfig
from .._responses import StopKind
from ..agent import ToolCallDeferred, ToolCallFinished, ToolCallStarted, TurnCompleted
from ..providers.openai._convert import encode_usage
from ..providers.openai._responses_convert import encode_usage as encode_responses_usage
from ._http import BadRequest, EventStream, json_response, read_json
from ._turns import PausedTurn, Watched, failure, find_agent

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from starlette.requests import Request
    from starlette.routing import BaseRoute

    from .._messages import ToolResult, ToolUse
    from .._responses import StopReason, Usage
    from ..agent import Agent, AgentResponse
    from ..sessions import Session
    from ._turns import Served

__all__ = ["routes"]

_ROLES = ("system", "developer", "user", "assistant")


def routes(served: Served) -> list[BaseRoute]:
    from starlette.routing import Route

    async def chat_completions(request: Request) -> Any:
        try:
            return await _chat_completions(served, request)
        except BadRequest as exc:
            return _error_response(exc.status, exc.message, code=exc.code)

    async def responses(request: Request) -> Any:
        try:
            return await _responses(served, request)
        except BadRequest as exc:
            return _error_response(exc.status, exc.message, code=exc.code)

    async def models(request: Request) -> Any:
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": "kova"}
            for name in served.agents
        ]
        return json_response({"object": "list", "data": data})

    async def not_found(request: Request) -> Any:
        return _error_response(404, f"no route for {request.method} {request.url.path}")

    return [
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/responses", responses, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/{rest:path}", not_found, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
    ]


# -- errors -----------------------------------------------------------------------------------


def _error_json(message: str, *, code: str | None, param: str | None = None) -> dict[str, Any]:
    error_type = (
        "server_error" if code in ("server_error", "upstream_error") else ("invalid_request_error")
    )
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def _error_response(status: int, message: str, *, code: str | None = None) -> Any:
    return json_response(_error_json(message, code=code), status)


# -- requests ---------------------------------------------------------------------------------


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest(400, f"the request body must be a JSON object, not {_kind(body)}")
    return body


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else "null"
    )


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise BadRequest(400, f"{name} must be a boolean, not {_kind(value)}")
    return value


def _parts(content: Any, *, where: str, images: bool) -> str | list[Text | Image]:
    """A message's content: a string, or a list of text (and image) parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise BadRequest(400, f"{where}.content must be a string or an array of parts")
    blocks: list[Text | Image] = []
    for index, part in enumerate(content):
        if not isinstance(part, dict):
            raise BadRequest(400, f"{where}.content[{index}] must be an object")
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text"):
            text = part.get("text")
            if not isinstance(text, str):
                raise BadRequest(400, f"{where}.content[{index}].text must be a string")
            blocks.append(Text(text=text))
        elif images and kind in ("image_url", "input_image"):
            url = part.get("image_url")
            if isinstance(url, dict):
                url = url.get("url")
            if not isinstance(url, str) or not url:
                raise BadRequest(400, f"{where}.content[{index}] needs an image URL")
            blocks.append(_image(url))
        else:
            raise BadRequest(400, f"{where}.content[{index}] has an unsupported type {kind!r}")
    return blocks


def _image(url: str) -> Image:
    if url.startswith("data:"):
        header, _, data = url.partition(",")
        media_type = header[5:].split(";", 1)[0]
        if not data or not media_type:
            raise BadRequest(400, "an image data URL must be data:<type>;base64,<data>")
        return Image(media_type=media_type, data=data)
    return Image(url=url)


def _message(role: str, content: str | list[Text | Image], *, where: str) -> Message:
    if role in ("system", "developer"):
        text = (
            content
            if isinstance(content, str)
            else "".join(block.text for block in content if isinstance(block, Text))
        )
        return Message.system(text)
    if role == "user":
        return Message.user(content)
    if not isinstance(content, str) and any(isinstance(b, Image) for b in content):
        raise BadRequest(400, f"{where}: an assistant message cannot hold images")
    return Message.assistant(content)


def _check_size(messages: list[Message], served: Served) -> None:
    total = 0
    for message in messages:
        for block in message.content:
            if isinstance(block, Text):
                total += len(block.text)
    if total > served.max_prompt_chars:
        raise BadRequest(
            400,
            f"the messages hold {total} characters, over this server's {served.max_prompt_chars}",
            code="context_length_exceeded",
        )


_CLIENT_TOOLS = (
    "this server's agents run their own tools: tool calls and tool results cannot be sent "
    "(send the conversation's text)"
)


def _chat_messages(body: dict[str, Any], served: Served) -> list[Message]:
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise BadRequest(400, "messages must be a non-empty array of messages")
    messages: list[Message] = []
    for index, item in enumerate(raw):
        where = f"messages[{index}]"
        if not isinstance(item, dict):
            raise BadRequest(400, f"{where} must be an object")
        role = item.get("role")
        if role in ("tool", "function") or item.get("tool_calls") or item.get("function_call"):
            raise BadRequest(400, f"{where}: {_CLIENT_TOOLS}")
        if role not in _ROLES:
            raise BadRequest(400, f"{where}.role must be one of {', '.join(_ROLES)}")
        content = item.get("content")
        if content is None and role == "assistant":
            continue
        messages.append(_message(role, _parts(content, where=where, images=True), where=where))
    if not messages or messages[-1].role.value != "user":
        raise BadRequest(400, "the last message must be the user's")
    _check_size(messages, served)
    return messages


def _inference(body: dict[str, Any], *, max_tokens_keys: tuple[str, ...]) -> InferenceConfig | None:
    fields: dict[str, Any] = {}
    for key in max_tokens_keys:
        value = body.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise BadRequest(400, f"{key} must be a positive integer")
            fields["max_tokens"] = value
    for key in ("temperature", "top_p"):
        value = body.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise BadRequest(400, f"{key} must be a number")
            fields[key] = float(value)
    if not fields:
        return None
    try:
        return InferenceConfig(**fields)
    except ValueError as exc:
        raise BadRequest(400, str(exc)) from None


# -- answers ----------------------------------------------------------------------------------


def _finish_reason(stop: StopReason) -> str:
    return "length" if stop.kind is StopKind.MAX_TOKENS else "stop"


async def _chat_completions(served: Served, request: Request) -> Any:
    body = _object(await read_json(request, limit=served.max_body_bytes))
    agent = find_agent(served, body.get("model"))
    messages = _chat_messages(body, served)
    stream = _flag(body, "stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise BadRequest(400, "stream_options must be an object")
    include_usage = _flag(options, "include_usage")
    n = body.get("n", 1)
    if n not in (1, None):
        raise BadRequest(400, "n must be 1: an agent gives one answer per turn")
    config = _inference(body, max_tokens_keys=("max_tokens", "max_completion_tokens"))
    completion_id = "chatcmpl-" + secrets.token_hex(12)
    created = int(time.time())
    name = agent.config.name
    if not stream:

        async def compute() -> tuple[int, Any]:
            try:
                response = await _run(agent, messages, config)
            except KovaError as exc:
                status, code, message = failure(exc)
                return status, _error_json(message, code=code)
            return 200, {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": name,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": response.text, "refusal": None},
                        "logprobs": None,
                        "finish_reason": _finish_reason(response.stop_reason),
                    }
                ],
                "usage": encode_usage(response.usage),
            }

        return Watched(compute)

    def chunk(delta: dict[str, Any], finish: str | None = None, **usage: Any) -> bytes:
        """A chunk of the answer, or (with ``usage=``) the last one, of no choices."""
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        data = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": name,
            "choices": [] if usage else [choice],
            **usage,
        }
        return b"data: " + dumps_bytes(data) + b"\n\n"

    async def produce(write: Callable[[bytes], Awaitable[None]]) -> None:
        await write(chunk({"role": "assistant", "content": ""}))
        try:
            async with agent.stream(messages, config=config) as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        if not event.path and event.text:
                            await write(chunk({"content": event.text}))
                    elif isinstance(event, ToolCallDeferred) and not event.path:
                        raise PausedTurn
                    elif isinstance(event, TurnCompleted):
                        response = event.response
                        if response.pending is not None:
                            raise PausedTurn
                        await write(chunk({}, _finish_reason(response.stop_reason)))
                        if include_usage:
                            await write(chunk({}, usage=encode_usage(response.usage)))
        except KovaError as exc:
            _, code, message = failure(exc)
            await write(b"data: " + dumps_bytes(_error_json(message, code=code)) + b"\n\n")
        await write(b"data: [DONE]\n\n")

    return EventStream(produce)


async def _run(
    agent: Agent,
    messages: list[Message],
    config: InferenceConfig | None,
    session: Session | None = None,
) -> AgentResponse:
    response = await agent.run(messages, config=config, session=session)
    if response.pending is not None:
        raise PausedTurn
    return response


# -- the Responses API ------------------------------------------------------------------------


def _responses_messages(body: dict[str, Any], served: Served) -> list[Message]:
    messages: list[Message] = []
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise BadRequest(400, "instructions must be a string")
        messages.append(Message.system(instructions))
    if body.get("previous_response_id") is not None:
        raise BadRequest(
            400,
            "previous_response_id is not supported: this server keeps no responses; "
            "send the whole conversation as input, or name a conversation",
        )
    raw = body.get("input")
    if isinstance(raw, str):
        messages.append(Message.user(raw))
    elif isinstance(raw, list) and raw:
        for index, item in enumerate(raw):
            where = f"input[{index}]"
            if not isinstance(item, dict):
                raise BadRequest(400, f"{where} must be an object")
            kind = item.get("type", "message")
            if kind == "mcp_call":
                continue  # a call this server ran, sent back with the conversation
            if kind in ("function_call", "function_call_output"):
                raise BadRequest(400, f"{where}: {_CLIENT_TOOLS}")
            if kind != "message":
                raise BadRequest(400, f"{where}: items of type {kind!r} are not supported")
            role = item.get("role")
            if role not in _ROLES:
                raise BadRequest(400, f"{where}.role must be one of {', '.join(_ROLES)}")
            content = _parts(item.get("content"), where=where, images=True)
            messages.append(_message(role, content, where=where))
    else:
        raise BadRequest(400, "input must be a non-empty string or array of input items")
    if not messages or messages[-1].role.value != "user":
        raise BadRequest(400, "the last input item must be the user's")
    _check_size(messages, served)
    return messages


class _ResponseShape:
    """The ``response`` object of one Responses request, as it grows."""

    __slots__ = ("conversation", "created", "id", "model", "output")

    def __init__(self, model: str, conversation: str | None = None) -> None:
        self.id = "resp_" + secrets.token_hex(12)
        self.created = int(time.time())
        self.model = model
        self.conversation = conversation
        self.output: list[dict[str, Any]] = []

    def json(
        self,
        status: str,
        *,
        usage: Usage | None = None,
        error: dict[str, Any] | None = None,
        incomplete: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": list(self.output),
            "usage": None if usage is None else encode_responses_usage(usage),
            "error": error,
            "incomplete_details": incomplete,
            "instructions": None,
            "metadata": {},
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "temperature": None,
            "top_p": None,
            "text": {"format": {"type": "text"}},
            "conversation": None if self.conversation is None else {"id": self.conversation},
        }


def _message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def _call_item(item_id: str, server: str, call: ToolUse) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "mcp_call",
        "server_label": server,
        "name": call.name,
        "arguments": json.dumps(call.input, ensure_ascii=False),
        "status": "in_progress",
        "output": None,
        "error": None,
    }


def _finish_call(item: dict[str, Any], result: ToolResult) -> None:
    if result.is_error:
        item["status"], item["error"] = "failed", result.text
    else:
        item["status"], item["output"] = "completed", result.text


def _incomplete(response: AgentResponse) -> dict[str, Any] | None:
    if response.stop_reason.kind is StopKind.MAX_TOKENS:
        return {"reason": "max_output_tokens"}
    return None


def _output_of(response: AgentResponse, server: str) -> list[dict[str, Any]]:
    """The output items of a finished turn: each call it ran, then the texts, in order."""
    from .._messages import ToolResult, ToolUse

    results = {
        block.tool_use_id: block
        for message in response.new_messages
        for block in message.content
        if isinstance(block, ToolResult)
    }
    output: list[dict[str, Any]] = []
    for message in response.new_messages:
        if message.role.value != "assistant":
            continue
        text = "".join(b.text for b in message.content if isinstance(b, Text))
        if text:
            output.append(_message_item("msg_" + secrets.token_hex(12), text))
        for block in message.content:
            if isinstance(block, ToolUse):
                item = _call_item("mcp_" + secrets.token_hex(12), server, block)
                found = results.get(block.id)
                if found is not None:
                    _finish_call(item, found)
                output.append(item)
    return output


async def _responses(served: Served, request: Request) -> Any:
    body = _object(await read_json(request, limit=served.max_body_bytes))
    agent = find_agent(served, body.get("model"))
    messages = _responses_messages(body, served)
    stream = _flag(body, "stream")
    config = _inference(body, max_tokens_keys=("max_output_tokens",))
    name = agent.config.name
    conversation = _conversation(body, served)
    session = None
    if conversation is not None:
        assert served.sessions is not None
        session = served.sessions.session(f"responses/{name}/{conversation}")
    shape = _ResponseShape(name, conversation)
    if not stream:

        async def compute() -> tuple[int, Any]:
            try:
                response = await _run(agent, messages, config, session)
            except KovaError as exc:
                status, code, message = failure(exc)
                return status, _error_json(message, code=code)
            shape.output = _output_of(response, name)
            incomplete = _incomplete(response)
            state = "incomplete" if incomplete else "completed"
            return 200, shape.json(state, usage=response.usage, incomplete=incomplete)

        return Watched(compute)

    return EventStream(_ResponsesStream(agent, messages, config, shape, session).produce)


def _conversation(body: dict[str, Any], served: Served) -> str | None:
    """The request's ``conversation`` id (a string, or an object with an ``id``)."""
    raw = body.get("conversation")
    if raw is None:
        return None
    found = raw.get("id") if isinstance(raw, dict) else raw
    if not isinstance(found, str) or not 0 < len(found) <= 200:
        raise BadRequest(400, 'conversation must be an id (1 to 200 characters) or {"id": ...}')
    if served.sessions is None:
        raise BadRequest(
            400,
            "this server keeps no conversations (serve it with kova.serve.app(sessions=...)); "
            "send the whole conversation as input",
        )
    return found


class _ResponsesStream:
    """One streamed Responses turn: agent events in, Responses SSE events out."""

    __slots__ = (
        "_agent",
        "_calls",
        "_config",
        "_messages",
        "_open",
        "_sequence",
        "_session",
        "_shape",
    )

    def __init__(
        self,
        agent: Agent,
        messages: list[Message],
        config: InferenceConfig | None,
        shape: _ResponseShape,
        session: Session | None = None,
    ) -> None:
        self._agent = agent
        self._session = session
        self._messages = messages
        self._config = config
        self._shape = shape
        self._sequence = 0
        self._open: tuple[dict[str, Any], int, list[str]] | None = None
        """The message item being streamed, its output index and its text so far."""
        self._calls: dict[str, tuple[dict[str, Any], int]] = {}

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return b"event: " + kind.encode() + b"\ndata: " + dumps_bytes(data) + b"\n\n"

    def _text(self, text: str) -> list[bytes]:
        out: list[bytes] = []
        if self._open is None:
            item = _message_item("msg_" + secrets.token_hex(12), "", "in_progress")
            item["content"] = []
            index = len(self._shape.output)
            self._shape.output.append(item)
            self._open = (item, index, [])
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            out.append(self._event("response.output_item.added", output_index=index, item=item))
            out.append(
                self._event(
                    "response.content_part.added",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    part=part,
                )
            )
        item, index, texts = self._open
        texts.append(text)
        out.append(
            self._event(
                "response.output_text.delta",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                delta=text,
                logprobs=[],
            )
        )
        return out

    def _close_text(self) -> list[bytes]:
        if self._open is None:
            return []
        item, index, texts = self._open
        self._open = None
        text = "".join(texts)
        done = _message_item(item["id"], text)
        self._shape.output[index] = done
        ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
        return [
            self._event("response.output_text.done", **ids, text=text, logprobs=[]),
            self._event("response.content_part.done", **ids, part=done["content"][0]),
            self._event("response.output_item.done", output_index=index, item=done),
        ]

    def _started(self, call: ToolUse) -> list[bytes]:
        out = self._close_text()
        item = _call_item("mcp_" + secrets.token_hex(12), self._shape.model, call)
        index = len(self._shape.output)
        self._shape.output.append(item)
        self._calls[call.id] = (item, index)
        out.append(self._event("response.output_item.added", output_index=index, item=dict(item)))
        out.append(
            self._event("response.mcp_call.in_progress", item_id=item["id"], output_index=index)
        )
        out.append(
            self._event(
                "response.mcp_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            )
        )
        return out

    def _finished(self, call: ToolUse, result: ToolResult) -> list[bytes]:
        found = self._calls.pop(call.id, None)
        if found is None:
            return []
        item, index = found
        _finish_call(item, result)
        kind = "response.mcp_call.failed" if result.is_error else "response.mcp_call.completed"
        return [
            self._event(kind, item_id=item["id"], output_index=index),
            self._event("response.output_item.done", output_index=index, item=dict(item)),
        ]

    async def produce(self, write: Callable[[bytes], Awaitable[None]]) -> None:
        shape = self._shape
        await write(self._event("response.created", response=shape.json("in_progress")))
        await write(self._event("response.in_progress", response=shape.json("in_progress")))
        try:
            turn = self._agent.stream(self._messages, config=self._config, session=self._session)
            async with turn as events:
                async for event in events:
                    if event.path:
                        continue  # an inner agent's (agent.as_tool()): inside its call
                    chunks: list[bytes] = []
                    if isinstance(event, TextDelta):
                        if event.text:
                            chunks = self._text(event.text)
                    elif isinstance(event, ToolCallStarted):
                        chunks = self._started(event.call)
                    elif isinstance(event, ToolCallFinished):
                        chunks = self._finished(event.call, event.result)
                    elif isinstance(event, ToolCallDeferred):
                        raise PausedTurn
                    elif isinstance(event, TurnCompleted):
                        response = event.response
                        if response.pending is not None:
                            raise PausedTurn
                        incomplete = _incomplete(response)
                        chunks = self._close_text()
                        chunks.append(
                            self._event(
                                "response.incomplete" if incomplete else "response.completed",
                                response=shape.json(
                                    "incomplete" if incomplete else "completed",
                                    usage=response.usage,
                                    incomplete=incomplete,
                                ),
                            )
                        )
                    if chunks:
                        await write(b"".join(chunks))
        except KovaError as exc:
            _, code, message = failure(exc)
            error = {"code": code, "message": message}
            await write(self._event("response.failed", response=shape.json("failed", error=error)))
