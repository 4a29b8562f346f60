"""Pure translation between kova values and Ollama's native ``/api/chat`` wire format.

No I/O and no clock. History rules:

* roles map one to one (``system``, ``user``, ``assistant``, ``tool``); images go as bare
  base64 in the message's ``images`` (Ollama cannot fetch URLs: an image by URL is a clear
  error);
* tool calls go back with ``arguments`` as a JSON object; Ollama sends no call ids, so kova
  makes stable ones, unique across answers (:func:`call_id`), and answers each call with a
  ``tool`` message carrying the call's ``tool_name``, in order;
* thinking blocks are dropped (Ollama's thinking is display text; other providers' are theirs).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, assert_never

from ..._errors import InvalidResponse, ProviderErrorClass
from ..._models import (
    Audio,
    Document,
    File,
    Image,
    JSONValue,
    Message,
    ModelInfo,
    ModelResponse,
    RedactedThinking,
    Role,
    StopReason,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
    Usage,
)
from .._classify import provider_error
from .._codec import call_id, count_of, function_tools, inline_image, optional_str
from .._media import refuse

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..._models import ChatRequest
    from ._config import OllamaConfig

__all__ = [
    "PROVIDER",
    "call_id",
    "decode_models",
    "decode_response",
    "decode_usage",
    "done_reason_to_stop",
    "encode_messages",
    "encode_request",
    "tool_use_of",
]

PROVIDER = "ollama"


def done_reason_to_stop(reason: str | None, *, has_tool_calls: bool) -> StopReason:
    """``done_reason`` → :class:`~kova.StopReason` (Ollama says ``stop`` after tool calls)."""
    if reason == "length":
        return StopReason.MAX_TOKENS
    if reason == "stop":
        return StopReason.TOOL_USE if has_tool_calls else StopReason.END_TURN
    if reason is None or reason == "":
        return StopReason.TOOL_USE if has_tool_calls else StopReason.unknown("none")
    return StopReason.unknown(reason)


# ---------------------------------------------------------------------------------------------
# Requests


def _images(blocks: Sequence[object]) -> list[JSONValue]:
    images: list[JSONValue] = []
    for block in blocks:
        if isinstance(block, Document | Audio | File):
            hint = ""
            if isinstance(block, Document):
                hint = " (send a document's text as a Text block)"
            raise refuse(PROVIDER, block, "Ollama's chat API takes text and images only" + hint)
        if isinstance(block, Image):
            inline = inline_image(block)
            if inline is None:
                raise provider_error(
                    "Ollama takes images as base64 data, not URLs: download it and pass "
                    "Image(data=..., media_type=...)",
                    provider=PROVIDER,
                    error_class=ProviderErrorClass.INVALID_REQUEST,
                )
            images.append(inline[1])
    return images


def _tool_message(result: ToolResult, names: Mapping[str, str]) -> list[dict[str, JSONValue]]:
    name = names.get(result.tool_use_id)
    if name is None:
        raise provider_error(
            f"a tool result answers {result.tool_use_id!r}, but no earlier assistant turn "
            "has a tool call with that id",
            provider=PROVIDER,
            error_class=ProviderErrorClass.INVALID_REQUEST,
        )
    message = _message("tool", result.text)
    message["tool_name"] = name
    messages = [message]
    if not isinstance(result.content, str):
        images = _images(result.content)
        if images:
            # Tool messages carry text; a tool's images follow as a user message.
            messages.append({"role": "user", "images": images})
    return messages


def _message(role: str, content: str) -> dict[str, JSONValue]:
    # Empty content is left out, as the official client leaves out every empty field.
    return {"role": role, "content": content} if content else {"role": role}


def encode_messages(messages: Sequence[Message]) -> list[dict[str, JSONValue]]:
    """kova history as ``/api/chat`` ``messages`` (see the module docstring)."""
    encoded: list[dict[str, JSONValue]] = []
    names: dict[str, str] = {}
    for message in messages:
        for block in message.content:
            if isinstance(block, ToolResult):
                encoded.extend(_tool_message(block, names))
        match message.role:
            case Role.SYSTEM:
                encoded.append(_message("system", message.text))
            case Role.USER:
                text = message.text
                images = _images(message.content)
                if text or images:
                    user = _message("user", text)
                    if images:
                        user["images"] = images
                    encoded.append(user)
            case Role.ASSISTANT:
                calls: list[JSONValue] = []
                for block in message.content:
                    if isinstance(block, ToolUse):
                        names[block.id] = block.name
                        calls.append({"function": {"name": block.name, "arguments": block.input}})
                    elif not isinstance(block, Text | Thinking | RedactedThinking | ToolResult):
                        if isinstance(block, Image | Audio):
                            continue  # the model's own media (see kova.providers._media)
                        if isinstance(block, Document | File):
                            raise refuse(PROVIDER, block, "Ollama takes no documents or files")
                        assert_never(block)
                if calls or message.text:
                    assistant = _message("assistant", message.text)
                    if calls:
                        assistant["tool_calls"] = calls
                    encoded.append(assistant)
            case Role.TOOL:
                pass  # only ToolResult blocks mean anything here; encoded above
            case _:
                assert_never(message.role)
    return encoded


def encode_request(
    request: ChatRequest, config: OllamaConfig, *, stream: bool
) -> dict[str, JSONValue]:
    """The ``/api/chat`` body. ``request.config`` wins over ``config.extra_options`` for
    ``num_predict``, ``temperature``, ``top_p`` and ``stop``."""
    inference = request.config
    body: dict[str, JSONValue] = {
        "model": inference.model or config.model,
        "messages": list(encode_messages(request.messages)),
    }
    if request.tools:
        body["tools"] = function_tools(request.tools)
    body["stream"] = stream
    if config.think is not None:
        body["think"] = config.think.wire
    if inference.response_format is not None:
        body["format"] = inference.response_format.schema
    options: dict[str, JSONValue] = dict(config.extra_options)
    if inference.temperature is not None:
        options["temperature"] = inference.temperature
    if inference.top_p is not None:
        options["top_p"] = inference.top_p
    if inference.max_tokens is not None:
        options["num_predict"] = inference.max_tokens
    if inference.stop_sequences:
        options["stop"] = list(inference.stop_sequences)
    if options:
        body["options"] = options
    if config.keep_alive is not None:
        body["keep_alive"] = config.keep_alive
    return body


# ---------------------------------------------------------------------------------------------
# Responses


def decode_usage(body: Mapping[str, object]) -> Usage:
    """``prompt_eval_count`` / ``eval_count`` (absent means 0: the fields are omitempty)."""
    return Usage(
        input_tokens=count_of(body.get("prompt_eval_count")),
        output_tokens=count_of(body.get("eval_count")),
    )


def tool_use_of(call: object, position: int, *, salt: str = "") -> ToolUse:
    """One ``tool_calls`` item as a :class:`~kova.ToolUse` (``salt``: see :func:`call_id`).

    Raises:
        InvalidResponse: no function name, or ``arguments`` that are not an object.
    """
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        raise InvalidResponse("a tool call has no function object", provider=PROVIDER)
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidResponse("a tool call has no function name", provider=PROVIDER)
    arguments = function.get("arguments", {})
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):  # a few model templates emit a string; accept its object
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            arguments = None
    if not isinstance(arguments, dict):
        raise InvalidResponse("a tool call's arguments should be a JSON object", provider=PROVIDER)
    parsed = dict(arguments)
    return ToolUse(id=call_id(name, parsed, position, salt), name=name, input=parsed)


def _message_parts(
    message: object,
) -> tuple[str, str, list[object]]:
    if not isinstance(message, dict):
        raise InvalidResponse("the response has no message object", provider=PROVIDER)
    content = message.get("content")
    thinking = message.get("thinking")
    calls = message.get("tool_calls")
    content = "" if content is None else content
    thinking = "" if thinking is None else thinking
    calls = [] if calls is None else calls
    if not isinstance(content, str) or not isinstance(thinking, str):
        raise InvalidResponse("message content/thinking is not a string", provider=PROVIDER)
    if not isinstance(calls, list):
        raise InvalidResponse("message.tool_calls is not an array", provider=PROVIDER)
    return content, thinking, calls


def error_of(body: Mapping[str, object]) -> str | None:
    """The ``error`` of a body or stream line, if it has one."""
    error = body.get("error")
    if error is None:
        return None
    return error if isinstance(error, str) else json.dumps(error)


def decode_response(body: JSONValue) -> ModelResponse:
    """A non-streaming ``/api/chat`` answer.

    Raises:
        ProviderError: an ``error`` body (classified), or a malformed one
            (:class:`~kova.InvalidResponse`).
    """
    if not isinstance(body, dict):
        raise InvalidResponse("the response is not a JSON object", provider=PROVIDER)
    error = error_of(body)
    if error is not None:
        raise provider_error(error, provider=PROVIDER)
    content, thinking, calls = _message_parts(body.get("message"))
    blocks: list[Text | ToolUse] = []
    if content:
        blocks.append(Text(text=content))
    salt = body.get("created_at")
    blocks.extend(
        tool_use_of(call, position, salt=salt if isinstance(salt, str) else "")
        for position, call in enumerate(calls)
    )
    reason = body.get("done_reason")
    return ModelResponse(
        content=tuple(blocks),
        stop_reason=done_reason_to_stop(
            reason if isinstance(reason, str) else None, has_tool_calls=bool(calls)
        ),
        usage=decode_usage(body),
        thinking=thinking or None,
        model=optional_str(body.get("model")),
    )


def decode_models(body: JSONValue) -> list[ModelInfo]:
    """``GET /api/tags`` as :class:`~kova.providers.ModelInfo` values.

    Raises:
        InvalidResponse: no ``models`` list.
    """
    models = body.get("models") if isinstance(body, dict) else None
    if not isinstance(models, list):
        raise InvalidResponse("the model list has no models array", provider=PROVIDER)
    found: list[ModelInfo] = []
    for item in models:
        if not isinstance(item, dict):
            continue
        name = item.get("name") or item.get("model")
        if isinstance(name, str) and name:
            found.append(ModelInfo(id=name, owned_by="ollama"))
    return found
