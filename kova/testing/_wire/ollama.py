"""The server side of Ollama's ``/api/chat`` wire format, for kova's fake server: reading a
request body back into kova values, and writing kova values as response lines.

Test scaffolding, kept out of the production codec (which holds only what a client needs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..._models import (
    Image,
    InferenceConfig,
    JSONValue,
    Message,
    ModelResponse,
    ResponseFormat,
    StopKind,
    StopReason,
    Text,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from ..._record import Record
from ...providers._codec import call_id
from ._common import tool_definition

__all__ = [
    "CREATED_AT",
    "DecodedRequest",
    "decode_request",
    "done_json",
    "message_json",
    "stop_to_done_reason",
]

CREATED_AT = "2026-01-01T00:00:00.000000Z"


class DecodedRequest(Record):
    """A ``/api/chat`` body read back into kova values."""

    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...]
    config: InferenceConfig
    stream: bool
    model: str


def _images(item: Mapping[str, JSONValue]) -> list[Image]:
    images = item.get("images")
    if not isinstance(images, Sequence) or isinstance(images, str):
        return []
    return [Image(media_type="image/png", data=str(data)) for data in images]


def decode_request(body: JSONValue) -> DecodedRequest:
    """A request body as kova values (tool results matched to calls by ``tool_name``, in
    order, as an Ollama server does).

    Raises:
        ValueError: not a chat request (no model, no messages list, a string ``arguments``, an
            unknown role, a tool message without a name, ...).
    """
    if not isinstance(body, Mapping):
        raise ValueError("the body must be a JSON object")
    model = body.get("model")
    raw = body.get("messages")
    if not isinstance(model, str) or not model:
        raise ValueError("model is required")
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise ValueError("messages must be a list")
    options = body.get("options")
    options = options if isinstance(options, Mapping) else {}
    stream = body.get("stream")
    return DecodedRequest(
        messages=tuple(_messages(raw)),
        tools=tuple(_tools(body.get("tools"))),
        config=_config(model, options, body.get("format")),
        stream=stream is not False,  # streaming is Ollama's default
        model=model,
    )


def _messages(raw: Sequence[JSONValue]) -> list[Message]:
    messages: list[Message] = []
    pending: dict[str, list[str]] = {}
    """Unanswered call ids by tool name, in call order."""
    results: list[ToolResult] = []
    for item in raw:
        if not isinstance(item, Mapping):
            raise ValueError("a message must be an object")
        role = item.get("role")
        content = item.get("content", "")
        text = content if isinstance(content, str) else ""
        if role == "tool":
            name = item.get("tool_name")
            if not isinstance(name, str) or not name:
                raise ValueError("a tool message needs tool_name")
            waiting = pending.get(name) or []
            identifier = waiting.pop(0) if waiting else name
            results.append(ToolResult(tool_use_id=identifier, content=text))
            continue
        if results:
            messages.append(Message.tool_results(results))
            results = []
        if role == "system":
            messages.append(Message.system(text))
        elif role == "user":
            blocks: list[Text | Image] = [Text(text=text)] if text else []
            blocks.extend(_images(item))
            messages.append(Message.user(blocks))
        elif role == "assistant":
            messages.append(_assistant(item, text, pending))
        else:
            raise ValueError(f"unknown role {role!r}")
    if results:
        messages.append(Message.tool_results(results))
    return messages


def _assistant(item: Mapping[str, JSONValue], text: str, pending: dict[str, list[str]]) -> Message:
    uses: list[Text | ToolUse] = [Text(text=text)] if text else []
    calls = item.get("tool_calls")
    for position, call in enumerate(calls if isinstance(calls, Sequence) else []):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            raise ValueError("a tool call needs a function")
        arguments = function.get("arguments", {})
        if not isinstance(arguments, Mapping):
            raise ValueError("tool call arguments must be an object")
        name = str(function.get("name"))
        identifier = call_id(name, dict(arguments), position)
        pending.setdefault(name, []).append(identifier)
        uses.append(ToolUse(id=identifier, name=name, input=dict(arguments)))
    return Message.assistant(uses)


def _tools(raw_tools: JSONValue) -> list[ToolDefinition]:
    tools: list[ToolDefinition] = []
    for tool in raw_tools if isinstance(raw_tools, Sequence) else []:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping):
            name, description = function.get("name"), function.get("description")
            tools.append(tool_definition(name, description, function.get("parameters")))
    return tools


def _config(model: str, options: Mapping[str, JSONValue], schema: JSONValue) -> InferenceConfig:
    predict = options.get("num_predict")
    temperature = options.get("temperature")
    top_p = options.get("top_p")
    stop = options.get("stop")
    return InferenceConfig(
        model=model,
        max_tokens=predict if isinstance(predict, int) and predict > 0 else None,
        temperature=float(temperature) if isinstance(temperature, int | float) else None,
        top_p=float(top_p) if isinstance(top_p, int | float) else None,
        stop_sequences=[str(s) for s in stop] if isinstance(stop, Sequence) else None,
        response_format=ResponseFormat(name="format", schema=dict(schema))
        if isinstance(schema, Mapping)
        else None,
    )


def stop_to_done_reason(stop_reason: StopReason) -> str:
    """The ``done_reason`` Ollama sends (``stop`` after tool calls too)."""
    if stop_reason.kind is StopKind.MAX_TOKENS:
        return "length"
    if stop_reason.kind is StopKind.UNKNOWN:
        return stop_reason.raw
    return "stop"


def message_json(
    content: str = "", *, thinking: str = "", calls: Sequence[ToolUse] = ()
) -> dict[str, JSONValue]:
    """An assistant ``message`` object."""
    message: dict[str, JSONValue] = {"role": "assistant", "content": content}
    if thinking:
        message["thinking"] = thinking
    if calls:
        message["tool_calls"] = [
            {"function": {"index": index, "name": call.name, "arguments": call.input}}
            for index, call in enumerate(calls)
        ]
    return message


def done_json(
    model: str,
    stop_reason: StopReason,
    usage: Usage | None,
    message: dict[str, JSONValue],
    *,
    created_at: str = CREATED_AT,
) -> dict[str, JSONValue]:
    """The final object: ``done: true``, ``done_reason``, counts and (fake) durations."""
    body: dict[str, JSONValue] = {
        "model": model,
        "created_at": created_at,
        "message": message,
        "done": True,
        "done_reason": stop_to_done_reason(stop_reason),
        "total_duration": 1_000_000,
        "load_duration": 100_000,
    }
    if usage is not None:
        body["prompt_eval_count"] = usage.input_tokens
        body["prompt_eval_duration"] = 200_000
        body["eval_count"] = usage.output_tokens
        body["eval_duration"] = 700_000
    return body


def response_json(
    response: ModelResponse, model: str, *, created_at: str = CREATED_AT
) -> dict[str, JSONValue]:
    """A whole non-streaming answer."""
    message = message_json(
        response.text, thinking=response.thinking or "", calls=response.tool_uses
    )
    return done_json(model, response.stop_reason, response.usage, message, created_at=created_at)
