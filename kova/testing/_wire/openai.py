"""The server side of the OpenAI Chat Completions wire format, for kova's fake server:
reading a request body back into kova values, and the ``finish_reason`` of a stop reason;
and what both OpenAI fakes (Chat Completions and Responses) answer alike: error bodies with
their ``retry-after`` headers, the model list and the SSE headers.

Test scaffolding, kept out of the production codec (which holds only what a client needs).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import assert_never

from ..._models import (
    Audio,
    Document,
    File,
    Image,
    InferenceConfig,
    JSONValue,
    Message,
    ResponseFormat,
    Role,
    StopKind,
    StopReason,
    Text,
    Thinking,
    ToolDefinition,
    ToolResult,
    ToolUse,
)
from ..._record import Record
from ...providers.openai._convert import decode_arguments, reasoning_of
from .._http_server import FakeResponse, json_response
from ._common import tool_definition

__all__ = [
    "SSE_HEADERS",
    "DecodedRequest",
    "decode_request",
    "error_code",
    "error_response",
    "model_list",
    "stop_to_finish_reason",
]

SSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}
"""The headers of an OpenAI event stream (both APIs)."""


def error_code(status: int) -> str | None:
    """The ``code`` OpenAI sends with an error status, where it names one."""
    if status == 401:
        return "invalid_api_key"
    if status == 404:
        return "model_not_found"
    if status == 429:
        return "rate_limit_exceeded"
    return None


def _error_type(status: int) -> str:
    if status == 429:
        return "requests"
    return "server_error" if status >= 500 else "invalid_request_error"


def error_response(
    status: int,
    message: str,
    *,
    error_type: str | None = None,
    code: str | None = None,
    retry_after: float | None = None,
) -> FakeResponse:
    """An OpenAI error: ``{"error": {"message", "type", "param": null, "code"}}`` (``type`` by
    default the status's), with ``retry-after`` (whole seconds, rounded up) and, for a
    fraction, ``retry-after-ms``, as OpenAI sends them."""
    headers: dict[str, str] = {}
    if retry_after is not None:
        if float(retry_after).is_integer():
            headers["retry-after"] = str(int(retry_after))
        else:
            headers["retry-after-ms"] = str(round(retry_after * 1000))
            headers["retry-after"] = str(math.ceil(retry_after))
    body: JSONValue = {
        "error": {
            "message": message,
            "type": error_type or _error_type(status),
            "param": None,
            "code": code,
        }
    }
    return json_response(body, status=status, headers=headers)


def model_list(models: Iterable[str], *, created: int) -> FakeResponse:
    """``GET …/models``: the ids, each owned by ``kova-testing``."""
    data: list[JSONValue] = [
        {"id": model, "object": "model", "created": created, "owned_by": "kova-testing"}
        for model in models
    ]
    return json_response({"object": "list", "data": data})


class DecodedRequest(Record):
    """A Chat Completions request body read back into kova values."""

    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...]
    config: InferenceConfig
    stream: bool
    include_usage: bool


def _text_of(content: JSONValue) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return ""


def image_from_url(url: str) -> Image:
    """An ``image_url``'s image: inline when it is a base64 ``data:`` URL."""
    if url.startswith("data:") and ";base64," in url:
        header, _, data = url.partition(";base64,")
        return Image(media_type=header[len("data:") :], data=data)
    return Image(url=url)


def file_block(part: Mapping[str, JSONValue]) -> Document | File:
    """A ``file`` / ``input_file`` part (``part`` holds ``file_data``, ``file_id``,
    ``file_url``, ``filename``)."""
    data = part.get("file_data")
    name = part.get("filename")
    title = name if isinstance(name, str) and name else None
    if isinstance(data, str):
        if not data.startswith("data:") or ";base64," not in data:
            raise ValueError("file_data must be a base64 data: URL")
        header, _, payload = data.partition(";base64,")
        if title is None:
            raise ValueError("file_data needs a filename")
        if title.startswith("document."):
            title = None
        return Document(data=payload, media_type=header[len("data:") :], title=title)
    url = part.get("file_url")
    if isinstance(url, str):
        return Document(url=url)
    file_id = part.get("file_id")
    if isinstance(file_id, str):
        return File(file_id)
    raise ValueError(f"a file part without file_data, file_url or file_id: {sorted(part)}")


def _user_blocks(content: JSONValue) -> list[Text | Image | Document | Audio | File]:
    if isinstance(content, str):
        return [Text(text=content)]
    blocks: list[Text | Image | Document | Audio | File] = []
    if isinstance(content, Sequence):
        for part in content:
            if not isinstance(part, Mapping):
                continue
            if part.get("type") == "text":
                blocks.append(Text(text=str(part.get("text", ""))))
            elif part.get("type") == "image_url":
                image_url = part.get("image_url")
                url = image_url.get("url") if isinstance(image_url, Mapping) else image_url
                if isinstance(url, str):
                    blocks.append(image_from_url(url))
            elif part.get("type") == "file":
                file = part.get("file")
                if not isinstance(file, Mapping):
                    raise ValueError("a file part needs a file object")
                blocks.append(file_block(file))
            elif part.get("type") == "input_audio":
                audio = part.get("input_audio")
                if not isinstance(audio, Mapping) or audio.get("format") not in ("wav", "mp3"):
                    raise ValueError("input_audio needs data and a format of wav or mp3")
                blocks.append(Audio(data=str(audio.get("data")), format=str(audio["format"])))
    return blocks


def _decode_message(item: Mapping[str, JSONValue]) -> Message | None:
    role = item.get("role")
    content = item.get("content")
    if role in ("system", "developer"):
        return Message.system(_text_of(content))
    if role == "user":
        return Message.user(_user_blocks(content))
    if role == "tool":
        return Message.tool_results(
            [
                ToolResult(
                    tool_use_id=str(item.get("tool_call_id") or "?"), content=_text_of(content)
                )
            ]
        )
    if role == "assistant":
        blocks: list[Text | ToolUse | Thinking] = []
        reasoning = reasoning_of(item)
        if reasoning:
            blocks.append(Thinking(text=reasoning))
        text = _text_of(content)
        if text:
            blocks.append(Text(text=text))
        calls = item.get("tool_calls")
        if isinstance(calls, Sequence):
            for call in calls:
                if not isinstance(call, Mapping):
                    continue
                function = call.get("function")
                if not isinstance(function, Mapping):
                    continue
                arguments = function.get("arguments")
                text = arguments if isinstance(arguments, str) else ""
                parsed, raw, metadata = decode_arguments(text)  # as the client reads an answer
                blocks.append(
                    ToolUse(
                        id=str(call.get("id") or "call"),
                        name=str(function.get("name") or "unknown"),
                        input=parsed,
                        raw_arguments=raw,
                        provider_metadata=metadata,
                    )
                )
        return Message.assistant(blocks)
    return None


def _merge_tool_messages(messages: list[Message]) -> list[Message]:
    """Consecutive ``tool`` messages become one kova TOOL message (kova's own shape)."""
    merged: list[Message] = []
    for message in messages:
        if message.role is Role.TOOL and merged and merged[-1].role is Role.TOOL:
            merged[-1] = Message(role=Role.TOOL, content=merged[-1].content + message.content)
        else:
            merged.append(message)
    return merged


def decode_request(body: JSONValue) -> DecodedRequest:
    """Read a Chat Completions request body back into kova values (for fake servers).

    Lenient: parts kova does not model are skipped rather than rejected.
    """
    if not isinstance(body, Mapping):
        raise ValueError("the request body is not a JSON object")
    raw_messages = body.get("messages")
    messages: list[Message] = []
    if isinstance(raw_messages, Sequence):
        for item in raw_messages:
            if isinstance(item, Mapping):
                message = _decode_message(item)
                if message is not None:
                    messages.append(message)
    tools: list[ToolDefinition] = []
    raw_tools = body.get("tools")
    if isinstance(raw_tools, Sequence):
        for tool in raw_tools:
            function = tool.get("function") if isinstance(tool, Mapping) else None
            if isinstance(function, Mapping) and isinstance(function.get("name"), str):
                name, description = function["name"], function.get("description")
                tools.append(tool_definition(name, description, function.get("parameters")))
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    temperature = body.get("temperature")
    top_p = body.get("top_p")
    stop = body.get("stop")
    response_format: ResponseFormat | None = None
    raw_format = body.get("response_format")
    if isinstance(raw_format, Mapping) and isinstance(raw_format.get("json_schema"), Mapping):
        schema_spec = raw_format["json_schema"]
        assert isinstance(schema_spec, Mapping)
        schema = schema_spec.get("schema")
        description = schema_spec.get("description")
        response_format = ResponseFormat(
            name=str(schema_spec.get("name") or "response"),
            schema=schema if isinstance(schema, Mapping) else {},
            strict=bool(schema_spec.get("strict", False)),
            description=description if isinstance(description, str) else None,
        )
    stream_options = body.get("stream_options")
    model = body.get("model")
    return DecodedRequest(
        messages=tuple(_merge_tool_messages(messages)),
        tools=tuple(tools),
        config=InferenceConfig(
            model=model if isinstance(model, str) else None,
            max_tokens=max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else None,
            temperature=float(temperature) if isinstance(temperature, int | float) else None,
            top_p=float(top_p) if isinstance(top_p, int | float) else None,
            stop_sequences=[str(s) for s in stop]
            if isinstance(stop, Sequence) and not isinstance(stop, str)
            else (stop if isinstance(stop, str) else None),
            response_format=response_format,
        ),
        stream=body.get("stream") is True,
        include_usage=isinstance(stream_options, Mapping)
        and stream_options.get("include_usage") is True,
    )


def stop_to_finish_reason(stop_reason: StopReason) -> str:
    """The ``finish_reason`` OpenAI sends for a kova stop reason (used by the fake server)."""
    match stop_reason.kind:
        case StopKind.END_TURN | StopKind.STOP_SEQUENCE:
            return "stop"
        case StopKind.TOOL_USE:
            return "tool_calls"
        case StopKind.MAX_TOKENS:
            return "length"
        case StopKind.UNKNOWN:
            return stop_reason.raw or "stop"
        case _:
            assert_never(stop_reason.kind)
