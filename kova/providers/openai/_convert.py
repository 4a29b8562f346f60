"""Pure translation between kova values and the OpenAI Chat Completions wire format.

No I/O and no clock: every function here maps values to values, so wire fidelity is tested
against the payloads in ``wire/openai.md`` without a network. The streaming decoder lives in
:mod:`._stream`, the codec in :mod:`._codec` (the HTTP side is the shared
:class:`~kova.providers.HttpProvider`).
"""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Mapping
from typing import TYPE_CHECKING, assert_never

from ..._errors import ProviderError
from ..._json import JsonNestingError, compact, loads
from ..._models import (
    Audio,
    Document,
    File,
    Image,
    InferenceConfig,
    JSONObject,
    JSONValue,
    Message,
    ModelInfo,
    ModelResponse,
    ResponseFormat,
    Role,
    StopReason,
    Text,
    Thinking,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from .._classify import ERROR_TYPES, provider_error
from .._codec import function_tools
from .._media import MB, check_inline_total, refuse

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._config import OpenAiConfig

__all__ = [
    "ARGUMENTS_KEY",
    "PROVIDER",
    "arguments_text",
    "decode_models",
    "decode_response",
    "decode_usage",
    "canonical_arguments",
    "decode_arguments",
    "encode_arguments",
    "encode_messages",
    "encode_request",
    "encode_usage",
    "error_object",
    "finish_reason_to_stop",
    "image_url",
    "parse_arguments",
    "reasoning_of",
    "usage_of",
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


# ---------------------------------------------------------------------------------------------
# Requests


ARGUMENTS_KEY = "openai_arguments"
"""``ToolUse.provider_metadata`` key of the model's exact argument text (when it differs
from the compact encoding of ``input``)."""


def canonical_arguments(raw: str) -> JSONObject | None:
    """Provider metadata keeping ``raw`` (the model's argument text) when re-encoding the
    parsed arguments would not give the same bytes (``\u00e9`` escapes, spacing), so the
    call is echoed back exactly as the model sent it, as the official SDK does."""
    if not raw:
        return None
    try:
        parsed = loads(raw)
    except ValueError:
        return None  # kept as ToolUse.raw_arguments instead
    if not isinstance(parsed, dict) or compact(parsed) == raw:
        return None
    return {ARGUMENTS_KEY: raw}


def encode_arguments(tool_use: ToolUse) -> str:
    """A tool call's ``arguments`` string: the model's own text when it was not valid JSON or
    when it was kept verbatim (:func:`canonical_arguments`) and still matches ``input``;
    otherwise compact JSON (what OpenAI models emit)."""
    if tool_use.raw_arguments is not None:
        return tool_use.raw_arguments
    metadata = tool_use.provider_metadata
    if metadata:
        raw = metadata.get(ARGUMENTS_KEY)
        if isinstance(raw, str):
            try:
                if loads(raw) == tool_use.input:
                    return raw
            except ValueError:
                pass
    return compact(tool_use.input)


def image_url(image: Image) -> str:
    """An image as the URL both OpenAI APIs take: its own URL, or a base64 ``data:`` URL."""
    return image.url if image.url is not None else f"data:{image.media_type};base64,{image.data}"


def _image_part(image: Image) -> dict[str, JSONValue]:
    return {"type": "image_url", "image_url": {"url": image_url(image)}}


MAX_FILE_BYTES = 50 * MB
"""OpenAI's limit on the files (and audio) inline in one request; larger ones go through the
Files API (``File("file-...")``)."""

AUDIO_INPUT_FORMATS = frozenset({"wav", "mp3"})
"""The ``input_audio`` formats the API takes."""


def file_data(document: Document) -> str:
    """An inline document as the ``data:`` URL both OpenAI APIs take in ``file_data``."""
    return f"data:{document.media_type};base64,{document.data}"


def filename(document: Document) -> str:
    """The ``filename`` sent with inline data (the API wants one): the title, with the media
    type's extension when it has none, else ``document`` and the extension."""
    extension = mimetypes.guess_extension(document.media_type) or ""
    if document.media_type == "text/markdown":
        extension = ".md"  # not in every platform's mimetypes table
    name = document.title or "document"
    if extension and not name.lower().endswith(extension):
        name += extension
    return name


def _file_part(block: Document | File, provider: str) -> dict[str, JSONValue]:
    """A ``file`` content part (the SDK's ``File``/``FileFile``)."""
    if isinstance(block, File):
        return {"type": "file", "file": {"file_id": block.file_id}}
    if block.file_id is not None:
        return {"type": "file", "file": {"file_id": block.file_id}}
    if block.data is None:
        raise refuse(
            provider,
            block,
            "Chat Completions takes files as data or a file id, not a URL (download it, or "
            "use the Responses API, whose input_file takes file_url)",
        )
    return {"type": "file", "file": {"filename": filename(block), "file_data": file_data(block)}}


def _audio_part(audio: Audio, provider: str) -> dict[str, JSONValue]:
    if audio.data is None:
        raise refuse(provider, audio, "input_audio takes base64 data, not a URL")
    if audio.format not in AUDIO_INPUT_FORMATS:
        raise refuse(
            provider, audio, f"input_audio takes {sorted(AUDIO_INPUT_FORMATS)}, convert it"
        )
    return {"type": "input_audio", "input_audio": {"data": audio.data, "format": audio.format}}


UserBlock = Text | Image | Document | Audio | File


def _user_content(blocks: Sequence[UserBlock], provider: str) -> JSONValue:
    # One text block is a plain string; several blocks are separate content parts (never
    # concatenated: "Here is the file:" and "print(1)" stay two parts, as the SDK sends them).
    if len(blocks) == 1 and isinstance(blocks[0], Text):
        return blocks[0].text
    parts: list[JSONValue] = []
    for block in blocks:
        match block:
            case Text():
                parts.append({"type": "text", "text": block.text})
            case Image():
                parts.append(_image_part(block))
            case Document() | File():
                parts.append(_file_part(block, provider))
            case Audio():
                parts.append(_audio_part(block, provider))
            case _:
                assert_never(block)
    return parts


def _tool_messages(results: Sequence[ToolResult]) -> list[dict[str, JSONValue]]:
    """One ``tool`` message per result, in order. Chat Completions tool messages carry text
    only, so images and documents a tool returned follow in one ``user`` message after
    them."""
    messages: list[dict[str, JSONValue]] = []
    images: list[JSONValue] = []
    for result in results:
        content: JSONValue = result.text
        if not isinstance(result.content, str):
            texts = [part.text for part in result.content if isinstance(part, Text)]
            if len(texts) > 1:
                # Several text parts go as a parts array (tool messages take text parts).
                content = [{"type": "text", "text": text} for text in texts]
        messages.append({"role": "tool", "tool_call_id": result.tool_use_id, "content": content})
        if not isinstance(result.content, str):
            for part in result.content:
                if isinstance(part, Image):
                    images.append(_image_part(part))
                elif isinstance(part, Document):
                    images.append(_file_part(part, PROVIDER))
    if images:
        messages.append({"role": "user", "content": images})
    return messages


def _assistant_message(
    message: Message, results: list[ToolResult], *, echo_reasoning: bool
) -> dict[str, JSONValue] | None:
    """An assistant turn (its tool results, if any, go to ``results``)."""
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[JSONValue] = []
    for block in message.content:
        if isinstance(block, Text):
            texts.append(block.text)
        elif isinstance(block, ToolUse):
            function = {"name": block.name, "arguments": encode_arguments(block)}
            calls.append({"id": block.id, "type": "function", "function": function})
        elif isinstance(block, ToolResult):
            results.append(block)
        elif echo_reasoning and isinstance(block, Thinking):
            reasoning.append(block.text)
    text = "".join(texts)
    if not calls and not text:
        # Only thinking (dropped) or nothing: an empty assistant turn helps no server.
        return None
    encoded: dict[str, JSONValue] = {"role": "assistant", "content": text or None}
    if reasoning and (joined := "".join(reasoning)):
        encoded["reasoning_content"] = joined
    if calls:
        encoded["tool_calls"] = calls
    return encoded


def encode_messages(
    messages: Sequence[Message], *, echo_reasoning: bool = False, provider: str = PROVIDER
) -> list[dict[str, JSONValue]]:
    """kova history as Chat Completions ``messages``.

    Thinking and redacted thinking blocks (from other providers) are dropped, unless
    ``echo_reasoning`` sends an assistant turn's thinking text back as its
    ``reasoning_content`` (DeepSeek thinking mode). Tool results, whatever message holds
    them, become one ``tool`` message each, in order, before the rest of their message.
    """
    check_inline_total(provider, messages, MAX_FILE_BYTES, "per request")
    encoded: list[dict[str, JSONValue]] = []
    for message in messages:
        results: list[ToolResult] = []
        wire: dict[str, JSONValue] | None = None
        match message.role:
            case Role.USER:
                parts: list[UserBlock] = []
                for block in message.content:
                    if isinstance(block, ToolResult):
                        results.append(block)
                    elif isinstance(block, UserBlock):
                        parts.append(block)
                if parts:
                    wire = {"role": "user", "content": _user_content(parts, provider)}
            case Role.ASSISTANT:
                wire = _assistant_message(message, results, echo_reasoning=echo_reasoning)
            case Role.TOOL:  # only its ToolResult blocks mean anything
                results = [block for block in message.content if isinstance(block, ToolResult)]
            case Role.SYSTEM:
                results = [block for block in message.content if isinstance(block, ToolResult)]
                wire = {"role": "system", "content": message.text}
            case _:
                assert_never(message.role)
        if results:
            encoded.extend(_tool_messages(results))
        if wire is not None:
            encoded.append(wire)
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
        body["tools"] = function_tools(tools)
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
    if config.audio_voice is not None:
        body["modalities"] = ["text", "audio"]
        body["audio"] = {"voice": config.audio_voice, "format": config.audio_format}
    if inference.response_format is not None:
        body["response_format"] = _response_format(inference.response_format)
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


# ---------------------------------------------------------------------------------------------
# Responses


def usage_of(usage: object, keys: tuple[str, str, str, str]) -> Usage | None:
    """An OpenAI ``usage`` object with cached input tokens and reasoning tokens; ``None`` if
    absent. Both APIs send the same shape under other names: ``keys`` are the input count,
    the output count and their two details objects (:func:`decode_usage`'s, the Responses
    API's ``input_tokens``, ``output_tokens``, ...). A count that is not an integer is 0
    (JSON's integers are exactly ``int``, never a ``bool``)."""
    if not isinstance(usage, dict):
        return None
    input_key, output_key, input_details_key, output_details_key = keys
    inputs = usage.get(input_key)
    inputs = inputs if type(inputs) is int else 0
    outputs = usage.get(output_key)
    outputs = outputs if type(outputs) is int else 0
    total = usage.get("total_tokens")
    total = total if type(total) is int else 0 if isinstance(total, int) else inputs + outputs
    cached = input_audio = reasoning = output_audio = 0
    details = usage.get(input_details_key)
    if isinstance(details, dict):
        count = details.get("cached_tokens")
        cached = count if type(count) is int else 0
        count = details.get("audio_tokens")
        input_audio = count if type(count) is int else 0
    details = usage.get(output_details_key)
    if isinstance(details, dict):
        count = details.get("reasoning_tokens")
        reasoning = count if type(count) is int else 0
        count = details.get("audio_tokens")
        output_audio = count if type(count) is int else 0
    return Usage(
        input_tokens=inputs,
        output_tokens=outputs,
        total_tokens=total,
        cache_read_tokens=cached,
        reasoning_tokens=reasoning,
        input_audio_tokens=input_audio,
        output_audio_tokens=output_audio,
    )


_USAGE_KEYS = (
    "prompt_tokens",
    "completion_tokens",
    "prompt_tokens_details",
    "completion_tokens_details",
)


def decode_usage(usage: JSONValue) -> Usage | None:
    """``usage`` with cached prompt tokens and reasoning tokens; ``None`` if absent."""
    return usage_of(usage, _USAGE_KEYS)


def encode_usage(usage: Usage) -> dict[str, JSONValue]:
    """``usage`` as a server sends it (kova's OpenAI-compatible routes, the fake server)."""
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def arguments_text(arguments: object) -> str:
    """A call's ``arguments`` as text: the string itself, an object (a few compatible servers
    send one) as JSON, anything else empty."""
    if isinstance(arguments, dict):
        return json.dumps(arguments)
    return arguments if isinstance(arguments, str) else ""


def parse_arguments(arguments: str) -> tuple[JSONObject, str | None]:
    """``(input, raw_arguments)`` of an ``arguments`` string: raw text is kept only when it is
    not a JSON object (the agent answers such a call with an error the model can fix)."""
    parsed, raw, _ = decode_arguments(arguments, canonical=False)
    return parsed, raw


def decode_arguments(
    text: str, *, canonical: bool = True
) -> tuple[JSONObject, str | None, JSONObject | None]:
    """:func:`parse_arguments` and (unless not ``canonical``) :func:`canonical_arguments` of
    one ``arguments`` text, which is parsed once: ``(input, raw_arguments,
    provider_metadata)``."""
    if not text or text.isspace():
        return {}, None, None
    try:
        parsed = loads(text)
    except JsonNestingError:
        raise  # too deep to read: an invalid response, not arguments to answer
    except ValueError:
        return {}, text, None
    if not isinstance(parsed, dict):
        return {}, text, None
    if not canonical or compact(parsed) == text:
        return parsed, None, None
    return parsed, None, {ARGUMENTS_KEY: text}


def error_object(
    error: object, *, provider: str = PROVIDER, mid_stream: bool = False
) -> ProviderError:
    """An ``error`` object (a stream's error chunk or event, a failed response's), classified
    like the same error as an HTTP status: the ``code`` when kova knows it, else the ``type``."""
    if not isinstance(error, Mapping):
        return provider_error(
            str(error) if error is not None else "the response failed",
            provider=provider,
            mid_stream=mid_stream,
        )
    message = error.get("message")
    code, kind = error.get("code"), error.get("type")
    error_type = code if isinstance(code, str) and code in ERROR_TYPES else kind or code
    return provider_error(
        str(message) if message is not None else json.dumps(error),
        provider=provider,
        error_type=str(error_type) if error_type is not None else None,
        mid_stream=mid_stream,
    )


def reasoning_of(source: Mapping[str, JSONValue]) -> str | None:
    value = source.get("reasoning_content")
    if not isinstance(value, str) or not value:
        value = source.get("reasoning")
    return value if isinstance(value, str) and value else None


def _spoken(message: Mapping[str, object], audio_format: str) -> list[Text | Audio]:
    """A spoken answer's ``audio`` (``{id, data, transcript, expires_at}``): the transcript as
    text (the message's ``content`` is empty then), the speech as an :class:`~kova.Audio`."""
    audio = message.get("audio")
    if not isinstance(audio, dict):
        return []
    blocks: list[Text | Audio] = []
    transcript = audio.get("transcript")
    if isinstance(transcript, str) and transcript and not message.get("content"):
        blocks.append(Text(text=transcript))
    data = audio.get("data")
    if isinstance(data, str) and data:
        blocks.append(Audio(data=data, format=audio_format))
    return blocks


def decode_response(
    body: JSONValue, *, keep_reasoning: bool = False, audio_format: str = "wav"
) -> ModelResponse:
    """A non-streaming ``chat.completion`` as a :class:`ModelResponse`.

    The reasoning text is ``thinking``; with ``keep_reasoning`` it is also the first content
    block (an unsigned :class:`~kova.Thinking`), so it enters history (DeepSeek's echo).

    Raises:
        ProviderError: the body is an ``error`` object, or has no usable choice
            (:class:`~kova.InvalidResponse`).
    """
    if not isinstance(body, dict):
        raise ProviderError.invalid_response("the response is not a JSON object", provider=PROVIDER)
    if body.get("error") is not None:
        raise error_object(body["error"])
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ProviderError.invalid_response("the response has no choices", provider=PROVIDER)
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise ProviderError.invalid_response("the choice has no message", provider=PROVIDER)
    content: list[Text | ToolUse | Thinking | Audio] = []
    reasoning = reasoning_of(message)
    if keep_reasoning and reasoning:
        content.append(Thinking(text=reasoning))
    text = message.get("content")
    refused = False
    if isinstance(text, str) and text:
        content.append(Text(text=text))
    else:
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal:
            content.append(Text(text=refusal))
            refused = True
    if "audio" in message:
        content.extend(_spoken(message, audio_format))
    calls = message.get("tool_calls")
    has_calls = False
    if isinstance(calls, list):
        for number, call in enumerate(calls):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                continue
            parsed, raw, metadata = decode_arguments(arguments_text(function.get("arguments")))
            call_id = call.get("id")
            content.append(
                ToolUse(
                    id=call_id if isinstance(call_id, str) and call_id else f"call_{number}",
                    name=str(function.get("name") or "unknown"),
                    input=parsed,
                    raw_arguments=raw,
                    provider_metadata=metadata,
                )
            )
            has_calls = True
    finish = choice.get("finish_reason")
    if refused:
        stop = StopReason.unknown("refusal")
    else:
        stop = finish_reason_to_stop(
            finish if isinstance(finish, str) else None, has_tool_calls=has_calls
        )
    model, answer_id = body.get("model"), body.get("id")
    return ModelResponse(
        content=content,
        stop_reason=stop,
        usage=usage_of(body.get("usage"), _USAGE_KEYS),
        thinking=reasoning,
        model=model if isinstance(model, str) and model else None,
        id=answer_id if isinstance(answer_id, str) and answer_id else None,
    )


def decode_models(body: JSONValue) -> list[ModelInfo]:
    """``GET /v1/models`` as :class:`ModelInfo` values.

    Raises:
        InvalidResponse: the body has no ``data`` list.
    """
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise ProviderError.invalid_response("the model list has no data", provider=PROVIDER)
    models: list[ModelInfo] = []
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
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
