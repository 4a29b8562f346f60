"""Pure translation between kova values and the OpenAI Chat Completions wire format.

No I/O and no clock: every function here maps values to values, so wire fidelity is tested
against the payloads in ``wire/openai.md`` without a network. The streaming decoder lives in
:mod:`._stream`; the HTTP calls in :mod:`._client`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, assert_never

import attrs

from ..._errors import ProviderError
from ..._models import (
    Image,
    InferenceConfig,
    JSONObject,
    JSONValue,
    Message,
    ModelInfo,
    ModelResponse,
    ResponseFormat,
    Role,
    StopKind,
    StopReason,
    Text,
    Thinking,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)

if TYPE_CHECKING:
    from ._config import OpenAiConfig

__all__ = [
    "PROVIDER",
    "DecodedRequest",
    "decode_models",
    "decode_request",
    "decode_response",
    "decode_usage",
    "encode_arguments",
    "encode_messages",
    "encode_request",
    "encode_tools",
    "finish_reason_to_stop",
    "parse_arguments",
    "stop_to_finish_reason",
]

PROVIDER = "openai"

_FINISH_REASONS: Mapping[str, StopReason] = {
    "stop": StopReason.END_TURN,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
    "length": StopReason.MAX_TOKENS,
}


def finish_reason_to_stop(finish_reason: str | None, *, has_tool_calls: bool) -> StopReason:
    """Map ``finish_reason``. Compatible servers sometimes say ``stop`` (or something
    unknown, like vLLM's ``abort``) although they produced tool calls: then it is a tool use.
    ``length`` and ``content_filter`` keep their meaning; unknown values keep the raw string."""
    if finish_reason is None:
        return StopReason.TOOL_USE if has_tool_calls else StopReason.END_TURN
    known = _FINISH_REASONS.get(finish_reason)
    if has_tool_calls and finish_reason not in ("length", "content_filter"):
        return StopReason.TOOL_USE
    return known if known is not None else StopReason.unknown(finish_reason)


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


# ---------------------------------------------------------------------------------------------
# Requests


def encode_arguments(tool_use: ToolUse) -> str:
    """A tool call's ``arguments`` string: the model's own text when it was not valid JSON,
    otherwise compact JSON (what OpenAI models emit)."""
    if tool_use.raw_arguments is not None:
        return tool_use.raw_arguments
    return json.dumps(tool_use.input, separators=(",", ":"), ensure_ascii=False)


def _image_part(image: Image) -> dict[str, JSONValue]:
    url = image.url if image.url is not None else f"data:{image.media_type};base64,{image.data}"
    return {"type": "image_url", "image_url": {"url": url}}


def _user_content(blocks: Sequence[Text | Image]) -> JSONValue:
    if all(isinstance(block, Text) for block in blocks):
        return "".join(block.text for block in blocks if isinstance(block, Text))
    parts: list[JSONValue] = []
    for block in blocks:
        if isinstance(block, Text):
            parts.append({"type": "text", "text": block.text})
        else:
            parts.append(_image_part(block))
    return parts


def _tool_messages(results: Sequence[ToolResult]) -> list[dict[str, JSONValue]]:
    """One ``tool`` message per result, in order. Chat Completions tool messages carry text
    only, so images a tool returned follow in one ``user`` message after them."""
    messages: list[dict[str, JSONValue]] = []
    images: list[JSONValue] = []
    for result in results:
        messages.append(
            {"role": "tool", "tool_call_id": result.tool_use_id, "content": result.text}
        )
        if not isinstance(result.content, str):
            for part in result.content:
                if isinstance(part, Image):
                    images.append(_image_part(part))
    if images:
        messages.append({"role": "user", "content": images})
    return messages


def _assistant_message(message: Message, *, echo_reasoning: bool) -> dict[str, JSONValue] | None:
    text = "".join(block.text for block in message.content if isinstance(block, Text))
    reasoning = (
        "".join(block.text for block in message.content if isinstance(block, Thinking))
        if echo_reasoning
        else ""
    )
    calls: list[JSONValue] = [
        {
            "id": block.id,
            "type": "function",
            "function": {"name": block.name, "arguments": encode_arguments(block)},
        }
        for block in message.content
        if isinstance(block, ToolUse)
    ]
    if not calls and not text:
        # Only thinking (dropped) or nothing: an empty assistant turn helps no server.
        return None
    encoded: dict[str, JSONValue] = {"role": "assistant", "content": text or None}
    if reasoning:
        encoded["reasoning_content"] = reasoning
    if calls:
        encoded["tool_calls"] = calls
    return encoded


def encode_messages(
    messages: Sequence[Message], *, echo_reasoning: bool = False
) -> list[dict[str, JSONValue]]:
    """kova history as Chat Completions ``messages``.

    Thinking and redacted thinking blocks (from other providers) are dropped, unless
    ``echo_reasoning`` sends an assistant turn's thinking text back as its
    ``reasoning_content`` (DeepSeek thinking mode). Tool results, whatever message holds
    them, become one ``tool`` message each, in order.
    """
    encoded: list[dict[str, JSONValue]] = []
    for message in messages:
        results = [block for block in message.content if isinstance(block, ToolResult)]
        if results:
            encoded.extend(_tool_messages(results))
        match message.role:
            case Role.SYSTEM:
                encoded.append({"role": "system", "content": message.text})
            case Role.USER:
                parts = [b for b in message.content if isinstance(b, Text | Image)]
                if parts:
                    encoded.append({"role": "user", "content": _user_content(parts)})
            case Role.ASSISTANT:
                assistant = _assistant_message(message, echo_reasoning=echo_reasoning)
                if assistant is not None:
                    encoded.append(assistant)
            case Role.TOOL:
                pass  # only ToolResult blocks mean anything here; encoded above
            case _:
                assert_never(message.role)
    return encoded


def encode_tools(tools: Sequence[ToolDefinition]) -> list[JSONValue]:
    """Tool definitions as ``function`` tools."""
    encoded: list[JSONValue] = []
    for tool in tools:
        function: dict[str, JSONValue] = {"name": tool.name}
        if tool.description:
            function["description"] = tool.description
        function["parameters"] = tool.parameters
        encoded.append({"type": "function", "function": function})
    return encoded


def _response_format(response_format: ResponseFormat) -> dict[str, JSONValue]:
    schema: dict[str, JSONValue] = {"name": response_format.name}
    if response_format.description:
        schema["description"] = response_format.description
    schema["strict"] = response_format.strict
    schema["schema"] = response_format.schema
    return {"type": "json_schema", "json_schema": schema}


def encode_request(
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    inference: InferenceConfig,
    config: OpenAiConfig,
    *,
    stream: bool,
) -> dict[str, JSONValue]:
    """The JSON body of one Chat Completions request.

    ``inference`` wins over ``config`` for ``model``, ``max_tokens`` and ``temperature``.
    """
    body: dict[str, JSONValue] = {
        "model": inference.model or config.model,
        "messages": encode_messages(messages, echo_reasoning=config.echo_reasoning),
    }
    if tools:
        body["tools"] = encode_tools(tools)
    temperature = inference.temperature if inference.temperature is not None else config.temperature
    if temperature is not None:
        body["temperature"] = temperature
    if inference.top_p is not None:
        body["top_p"] = inference.top_p
    if inference.stop_sequences:
        body["stop"] = list(inference.stop_sequences)
    max_tokens = inference.max_tokens if inference.max_tokens is not None else config.max_tokens
    if max_tokens is not None:
        body[config.max_tokens_field] = max_tokens
    if config.reasoning_effort is not None:
        body["reasoning_effort"] = config.reasoning_effort
    if inference.response_format is not None:
        body["response_format"] = _response_format(inference.response_format)
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


# ---------------------------------------------------------------------------------------------
# Responses


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def decode_usage(usage: JSONValue) -> Usage | None:
    """``usage`` with cached prompt tokens and reasoning tokens; ``None`` if absent."""
    if not isinstance(usage, Mapping):
        return None
    prompt = _int(usage.get("prompt_tokens"))
    completion = _int(usage.get("completion_tokens"))
    total = usage.get("total_tokens")
    prompt_details = usage.get("prompt_tokens_details")
    completion_details = usage.get("completion_tokens_details")
    return Usage(
        input_tokens=prompt,
        output_tokens=completion,
        total_tokens=_int(total) if isinstance(total, int) else prompt + completion,
        cache_read_tokens=_int(prompt_details.get("cached_tokens"))
        if isinstance(prompt_details, Mapping)
        else 0,
        reasoning_tokens=_int(completion_details.get("reasoning_tokens"))
        if isinstance(completion_details, Mapping)
        else 0,
    )


def parse_arguments(arguments: str) -> tuple[JSONObject, str | None]:
    """``(input, raw_arguments)`` of an ``arguments`` string: raw text is kept only when it is
    not a JSON object (the agent answers such a call with an error the model can fix)."""
    if not arguments.strip():
        return {}, None
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {}, arguments
    if not isinstance(parsed, dict):
        return {}, arguments
    return parsed, None


def _error_message(body: Mapping[str, JSONValue]) -> tuple[str, str | None]:
    error = body.get("error")
    if isinstance(error, Mapping):
        message = error.get("message")
        error_type = error.get("type") or error.get("code")
        return (
            str(message) if message is not None else json.dumps(error),
            str(error_type) if error_type is not None else None,
        )
    return str(error), None


def _reasoning(source: Mapping[str, JSONValue]) -> str | None:
    value = source.get("reasoning_content")
    if not isinstance(value, str) or not value:
        value = source.get("reasoning")
    return value if isinstance(value, str) and value else None


def decode_response(body: JSONValue, *, keep_reasoning: bool = False) -> ModelResponse:
    """A non-streaming ``chat.completion`` as a :class:`ModelResponse`.

    The reasoning text is ``thinking``; with ``keep_reasoning`` it is also the first content
    block (an unsigned :class:`~kova.Thinking`), so it enters history (DeepSeek's echo).

    Raises:
        ProviderError: the body is an ``error`` object, or has no usable choice
            (:class:`~kova.InvalidResponse`).
    """
    if not isinstance(body, Mapping):
        raise ProviderError.invalid_response("the response is not a JSON object", provider=PROVIDER)
    if body.get("error") is not None:
        error_message, error_type = _error_message(body)
        raise ProviderError(error_message, provider=PROVIDER, error_type=error_type)
    choices = body.get("choices")
    if not isinstance(choices, Sequence) or not choices or not isinstance(choices[0], Mapping):
        raise ProviderError.invalid_response("the response has no choices", provider=PROVIDER)
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, Mapping):
        raise ProviderError.invalid_response("the choice has no message", provider=PROVIDER)
    content: list[Text | ToolUse] = []
    text = message.get("content")
    refusal = message.get("refusal")
    if isinstance(text, str) and text:
        content.append(Text(text=text))
    elif isinstance(refusal, str) and refusal:
        content.append(Text(text=refusal))
    calls = message.get("tool_calls")
    if isinstance(calls, Sequence):
        for number, call in enumerate(calls):
            if not isinstance(call, Mapping):
                continue
            function = call.get("function")
            if not isinstance(function, Mapping):
                continue
            raw_value = function.get("arguments")
            if isinstance(raw_value, Mapping):  # a few servers send an object, not a string
                raw_value = json.dumps(raw_value)
            parsed, raw = parse_arguments(raw_value if isinstance(raw_value, str) else "")
            call_id = call.get("id")
            content.append(
                ToolUse(
                    id=call_id if isinstance(call_id, str) and call_id else f"call_{number}",
                    name=str(function.get("name") or "unknown"),
                    input=parsed,
                    raw_arguments=raw,
                )
            )
    finish = choice.get("finish_reason")
    has_calls = any(isinstance(block, ToolUse) for block in content)
    stop = finish_reason_to_stop(
        finish if isinstance(finish, str) else None, has_tool_calls=has_calls
    )
    if not (isinstance(text, str) and text) and isinstance(refusal, str) and refusal:
        stop = StopReason.unknown("refusal")
    reasoning = _reasoning(message)
    blocks: tuple[Text | ToolUse | Thinking, ...] = tuple(content)
    if keep_reasoning and reasoning:
        blocks = (Thinking(text=reasoning), *blocks)
    return ModelResponse(
        content=blocks,
        stop_reason=stop,
        usage=decode_usage(body.get("usage")),
        thinking=reasoning,
    )


def decode_models(body: JSONValue) -> list[ModelInfo]:
    """``GET /v1/models`` as :class:`ModelInfo` values.

    Raises:
        InvalidResponse: the body has no ``data`` list.
    """
    data = body.get("data") if isinstance(body, Mapping) else None
    if not isinstance(data, Sequence):
        raise ProviderError.invalid_response("the model list has no data", provider=PROVIDER)
    models: list[ModelInfo] = []
    for item in data:
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
            continue
        created = item.get("created")
        owned_by = item.get("owned_by")
        models.append(
            ModelInfo(
                id=str(item["id"]),
                object=str(item.get("object") or "model"),
                created=created if isinstance(created, int) else None,
                owned_by=owned_by if isinstance(owned_by, str) else None,
            )
        )
    return models


# ---------------------------------------------------------------------------------------------
# The other direction: what a server receives (kova.testing's fake server uses this)


@attrs.frozen(kw_only=True)
class DecodedRequest:
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


def _image_from_url(url: str) -> Image:
    if url.startswith("data:") and ";base64," in url:
        header, _, data = url.partition(";base64,")
        return Image(media_type=header[len("data:") :], data=data)
    return Image(url=url)


def _user_blocks(content: JSONValue) -> list[Text | Image]:
    if isinstance(content, str):
        return [Text(text=content)]
    blocks: list[Text | Image] = []
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
                    blocks.append(_image_from_url(url))
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
        reasoning = _reasoning(item)
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
                parsed, raw = parse_arguments(arguments if isinstance(arguments, str) else "")
                blocks.append(
                    ToolUse(
                        id=str(call.get("id") or "call"),
                        name=str(function.get("name") or "unknown"),
                        input=parsed,
                        raw_arguments=raw,
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
                parameters = function.get("parameters")
                tools.append(
                    ToolDefinition(
                        name=str(function["name"]),
                        description=str(function.get("description") or ""),
                        parameters=parameters
                        if isinstance(parameters, Mapping)
                        else {"type": "object", "properties": {}},
                    )
                )
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
