"""Pure translation between kova's data model and Bedrock's Converse API JSON.

No I/O and no clock: every function takes plain values and returns plain values, so the wire
format is tested against documented payloads and boto3's own serializer without a network.

Reference: ``shared/wire/bedrock.md`` and, where newer, botocore's service model
(``botocore/data/bedrock-runtime/2023-09-30/service-2.json``, ``bedrock/2023-04-20``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, assert_never
from urllib.parse import quote

import attrs

from ..._errors import InvalidRequest, InvalidResponse
from ..._json import depth_exceeds, loads
from ..._messages import AUDIO_FORMATS
from ..._models import (
    Audio,
    ContentBlock,
    Document,
    File,
    Image,
    InferenceConfig,
    JSONValue,
    Message,
    ModelInfo,
    ModelResponse,
    RedactedThinking,
    Role,
    StopReason,
    Text,
    Thinking,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from .._codec import MESSAGES_STOP_REASONS, count_of, json_object, known_stop, split_thinking
from .._http import ErrorDetails
from .._media import MB, check_size, refuse

if TYPE_CHECKING:
    from ._config import BedrockConfig

__all__ = [
    "PROVIDER",
    "decode_content_block",
    "decode_count_tokens",
    "decode_error_details",
    "decode_foundation_models",
    "decode_inference_profiles",
    "decode_response",
    "decode_stop_reason",
    "decode_usage",
    "encode_count_tokens_request",
    "encode_messages",
    "encode_request",
    "encode_tool_config",
    "model_path",
]

PROVIDER = "bedrock"

_IMAGE_FORMATS = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}

_DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}


def _invalid(message: str) -> InvalidResponse:
    return InvalidResponse(message, provider=PROVIDER)


def _refuse(message: str) -> InvalidRequest:
    return InvalidRequest(message, provider=PROVIDER)


# ---------------------------------------------------------------------------------------------
# Requests


def model_path(model_id: str, operation: str) -> str:
    """``/model/{modelId}/{operation}`` with the id percent-encoded as one path segment, the
    way botocore renders it (only ``-_.~`` stay as they are: ``:`` is ``%3A``, the ``/`` of
    an ARN ``%2F``)."""
    return f"/model/{quote(model_id, safe='-_.~')}/{operation}"


class _Documents:
    """Names documents ``document-1``, ``document-2``, ... in request order (Bedrock needs a
    name per document block; kova's content blocks carry none)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def next_name(self) -> str:
        self.count += 1
        return f"document-{self.count}"


def _media(image: Image, documents: _Documents) -> dict[str, JSONValue]:
    """An inline :class:`~kova.Image` as an ``image`` block, or, for a document type
    (``application/pdf``, ``text/csv``, ...), a ``document`` block."""
    if image.url is not None:
        if image.url.startswith("s3://"):
            return {
                "image": {
                    "format": _image_format(image),
                    "source": {"s3Location": {"uri": image.url}},
                }
            }
        raise _refuse(
            f"Bedrock takes images inline (base64) or from s3://, not by URL: {image.url[:100]}"
        )
    media_type = (image.media_type or "").lower()
    document_format = _DOCUMENT_FORMATS.get(media_type)
    if document_format is not None:
        return {
            "document": {
                "format": document_format,
                "name": documents.next_name(),
                "source": {"bytes": image.data},
            }
        }
    return {"image": {"format": _image_format(image), "source": {"bytes": image.data}}}


MAX_DOCUMENT_BYTES = 4_718_592
"""Converse's limit on one document (4.5 MB)."""
MAX_DOCUMENTS = 5
"""Converse takes at most five documents in a request."""
MAX_AUDIO_BYTES = 25 * MB
"""Converse's limit on inline audio (larger recordings go by ``s3://``)."""

_AUDIO_FORMATS = {
    # kova's Audio.format -> Converse's AudioFormat (botocore's enum); aiff has no counterpart.
    "wav": "wav",
    "mp3": "mp3",
    "flac": "flac",
    "aac": "aac",
    "ogg": "ogg",
    "m4a": "m4a",
    "webm": "webm",
    "opus": "opus",
    "pcm16": "pcm",
}
_VIDEO_FORMATS = {
    "video/x-matroska": "mkv",
    "video/quicktime": "mov",
    "video/mp4": "mp4",
    "video/webm": "webm",
    "video/x-flv": "flv",
    "video/mpeg": "mpeg",
    "video/x-ms-wmv": "wmv",
    "video/3gpp": "three_gp",
}


def _document_name(title: str | None, documents: _Documents) -> str:
    """A document's ``name``: its title with what Converse rejects in a name (anything but
    letters, digits, single spaces, hyphens, parentheses and square brackets) made a hyphen,
    or ``document-N``."""
    if title:
        cleaned = "".join(c if c.isalnum() or c in " -()[]" else "-" for c in title)
        cleaned = " ".join(cleaned.split())
        if cleaned:
            documents.count += 1
            return cleaned
    return documents.next_name()


def _s3(block: Document | Audio | File, uri: str | None, what: str) -> JSONValue:
    if uri is not None and uri.startswith("s3://"):
        return {"s3Location": {"uri": uri}}
    raise refuse(
        PROVIDER, block, f"Converse takes {what} inline (data) or from s3://, not {uri!r:.100}"
    )


def _document(document: Document, documents: _Documents) -> dict[str, JSONValue]:
    document_format = _DOCUMENT_FORMATS[document.media_type]  # every Document type has one
    if document.data is not None:
        check_size(PROVIDER, document, MAX_DOCUMENT_BYTES, "per document")
        source: JSONValue = {"bytes": document.data}
    else:
        source = _s3(document, document.url or document.file_id, "documents")
    block: dict[str, JSONValue] = {
        "format": document_format,
        "name": _document_name(document.title, documents),
        "source": source,
    }
    if document.citations:
        block["citations"] = {"enabled": True}
    if documents.count > MAX_DOCUMENTS:
        raise refuse(
            PROVIDER, document, f"Converse takes at most {MAX_DOCUMENTS} documents a request"
        )
    return {"document": block}


def _audio(audio: Audio) -> dict[str, JSONValue]:
    audio_format = _AUDIO_FORMATS.get(audio.format)
    if audio_format is None:
        raise refuse(PROVIDER, audio, f"Converse takes audio as one of {sorted(_AUDIO_FORMATS)}")
    if audio.data is not None:
        check_size(PROVIDER, audio, MAX_AUDIO_BYTES, "per inline recording")
        source: JSONValue = {"bytes": audio.data}
    else:
        source = _s3(audio, audio.url, "audio")
    return {"audio": {"format": audio_format, "source": source}}


def _file(file: File, documents: _Documents) -> dict[str, JSONValue]:
    """A file in S3 (``s3://`` id) as the block its media type calls for."""
    source = _s3(file, file.file_id, "files")
    media_type = (file.media_type or "").lower()
    if media_type in _IMAGE_FORMATS:
        return {"image": {"format": _IMAGE_FORMATS[media_type], "source": source}}
    if media_type in _VIDEO_FORMATS:
        return {"video": {"format": _VIDEO_FORMATS[media_type], "source": source}}
    if media_type.startswith("audio/"):
        name = next((k for k, v in AUDIO_FORMATS.items() if v == media_type), None)
        if name in _AUDIO_FORMATS:
            return {"audio": {"format": _AUDIO_FORMATS[name], "source": source}}
    if media_type in _DOCUMENT_FORMATS:
        block: dict[str, JSONValue] = {
            "format": _DOCUMENT_FORMATS[media_type],
            "name": documents.next_name(),
            "source": source,
        }
        return {"document": block}
    raise refuse(
        PROVIDER,
        file,
        "Converse needs the media type of an s3:// file to pick the block "
        "(an image, document, audio or video type it takes)",
    )


def _image_format(image: Image) -> str:
    media_type = (image.media_type or "").lower()
    if not media_type and image.url is not None:
        media_type = "image/" + image.url.rsplit(".", 1)[-1].lower()
    image_format = _IMAGE_FORMATS.get(media_type)
    if image_format is None:
        supported = ", ".join(sorted({*_IMAGE_FORMATS, *_DOCUMENT_FORMATS}))
        raise _refuse(f"Bedrock cannot take media of type {media_type!r} (it takes {supported})")
    return image_format


def _tool_result(
    result: ToolResult, settings: BedrockConfig, documents: _Documents
) -> dict[str, JSONValue]:
    content: list[JSONValue] = []
    if isinstance(result.content, str):
        if result.content:
            content.append(_result_text(result.content, settings))
    else:
        for part in result.content:
            if isinstance(part, Image):
                content.append(_media(part, documents))
            elif isinstance(part, Document):
                content.append(_document(part, documents))
            elif part.text:
                content.append({"text": part.text})
    block: dict[str, JSONValue] = {"toolUseId": result.tool_use_id, "content": content}
    if result.is_error:
        # Only some models take ``status`` (Claude); it is sent only where it says something.
        block["status"] = "error"
    return {"toolResult": block}


def _result_text(text: str, settings: BedrockConfig) -> dict[str, JSONValue]:
    if settings.json_tool_results and text.lstrip().startswith("{"):
        try:
            parsed = loads(text)
        except ValueError:  # not JSON, or nested too deeply to read
            parsed = None
        if isinstance(parsed, dict) and not depth_exceeds(parsed):
            return {"json": parsed}
    return {"text": text}


def _block(
    block: ContentBlock, role: Role, settings: BedrockConfig, documents: _Documents
) -> dict[str, JSONValue] | None:
    """One kova block as a Converse content block, or ``None`` when it has no place there."""
    match block:
        case Text(text=text):
            return {"text": text} if text else None  # Bedrock rejects empty text blocks
        case Image():
            return _media(block, documents)
        case Document():
            return _document(block, documents)
        case Audio():
            if role is Role.ASSISTANT:
                return None  # the model's own spoken answer (see kova.providers._media)
            return _audio(block)
        case File():
            return _file(block, documents)
        case ToolUse(id=id_, name=name, input=arguments):
            return {"toolUse": {"toolUseId": id_, "name": name, "input": arguments}}
        case ToolResult():
            return _tool_result(block, settings, documents)
        case Thinking(text=text, signature=signature):
            # Signed reasoning (Claude) goes back unchanged in assistant turns; unsigned
            # reasoning is display text and never history.
            if signature is None or role is not Role.ASSISTANT:
                return None
            return {"reasoningContent": {"reasoningText": {"text": text, "signature": signature}}}
        case RedactedThinking(data=data):
            if role is not Role.ASSISTANT:
                return None
            return {"reasoningContent": {"redactedContent": data}}
        case _:
            assert_never(block)


def encode_messages(
    messages: Sequence[Message], settings: BedrockConfig
) -> tuple[list[JSONValue], list[JSONValue]]:
    """Split kova messages into Converse's top-level ``system`` blocks and ``messages``.

    Each non-empty system message is one ``{"text"}`` system block. Tool messages become
    ``toolResult`` blocks in a *user* turn. Consecutive turns of the same role are merged (the
    API wants roles to alternate), ``toolResult`` blocks first in a user turn. Messages left
    without content are omitted.
    """
    system: list[JSONValue] = []
    turns: list[tuple[str, list[dict[str, JSONValue]]]] = []
    documents = _Documents()
    for message in messages:
        role = message.role
        if role is Role.SYSTEM:
            text = message.text
            if text:
                system.append({"text": text})
            continue
        wire_role = "assistant" if role is Role.ASSISTANT else "user"
        blocks = [
            encoded
            for block in message.content
            if (encoded := _block(block, role, settings, documents)) is not None
        ]
        if not blocks:
            continue
        if turns and turns[-1][0] == wire_role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((wire_role, blocks))
    wire: list[JSONValue] = []
    for wire_role, blocks in turns:
        if wire_role == "user" and len(blocks) > 1 and any("toolResult" in b for b in blocks):
            blocks = [b for b in blocks if "toolResult" in b] + [
                b for b in blocks if "toolResult" not in b
            ]
        content: list[JSONValue] = list(blocks)
        wire.append({"role": wire_role, "content": content})
    return system, wire


def encode_tool_config(tools: Sequence[ToolDefinition]) -> dict[str, JSONValue] | None:
    """``toolConfig`` for the tools (``None`` without tools: the API has no "none" choice)."""
    if not tools:
        return None
    specs: list[JSONValue] = []
    for tool in tools:
        spec: dict[str, JSONValue] = {"name": tool.name}
        if tool.description:  # a NonEmptyString on the wire
            spec["description"] = tool.description
        spec["inputSchema"] = {"json": tool.parameters}
        specs.append({"toolSpec": spec})
    return {"tools": specs}


def _inference_config(config: InferenceConfig, settings: BedrockConfig) -> dict[str, JSONValue]:
    inference: dict[str, JSONValue] = {}
    max_tokens = config.max_tokens or settings.max_tokens
    if max_tokens is not None:
        inference["maxTokens"] = max_tokens
    if config.temperature is not None:
        inference["temperature"] = config.temperature
    if config.top_p is not None:
        inference["topP"] = config.top_p
    if config.stop_sequences:
        inference["stopSequences"] = list(config.stop_sequences)
    return inference


def _output_config(config: InferenceConfig) -> dict[str, JSONValue] | None:
    response_format = config.response_format
    if response_format is None:
        return None
    definition: dict[str, JSONValue] = {
        "name": response_format.name,
        # The schema travels as a JSON *string* (a String member in the service model).
        "schema": json.dumps(response_format.schema, separators=(",", ":")),
    }
    if response_format.description:
        definition["description"] = response_format.description
    return {"textFormat": {"type": "json_schema", "structure": {"jsonSchema": definition}}}


_CACHE_POINT: dict[str, JSONValue] = {"cachePoint": {"type": "default"}}


def _mark_cache_points(body: dict[str, JSONValue]) -> None:
    """Cache points after the system blocks, after the tools and after the last message's
    content: the API caches everything before each (at most four per request)."""
    system = body.get("system")
    if isinstance(system, list) and system:
        system.append(dict(_CACHE_POINT))
    tool_config = body.get("toolConfig")
    tools = tool_config.get("tools") if isinstance(tool_config, dict) else None
    if isinstance(tools, list) and tools:
        tools.append(dict(_CACHE_POINT))
    messages = body.get("messages")
    if isinstance(messages, list) and messages:
        last = messages[-1]
        content = last.get("content") if isinstance(last, dict) else None
        if isinstance(content, list) and content:
            content.append(dict(_CACHE_POINT))


def encode_request(
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    config: InferenceConfig,
    settings: BedrockConfig,
) -> dict[str, JSONValue]:
    """The JSON body of Converse and ConverseStream (the two take the same body; the model id
    is only in the path).

    ``config`` (the call's :class:`~kova.InferenceConfig`) overrides ``settings`` for
    ``max_tokens``. ``response_format`` becomes ``outputConfig.textFormat`` (JSON schema); a
    model that does not support it answers with a ``ValidationException``, which surfaces as
    :class:`~kova.InvalidRequest`.

    Raises:
        InvalidRequest: content Bedrock cannot carry (an image by http URL, an unknown
            media type).
    """
    system, wire_messages = encode_messages(messages, settings)
    body: dict[str, JSONValue] = {"messages": wire_messages}
    if system:
        body["system"] = system
    inference = _inference_config(config, settings)
    if inference:
        body["inferenceConfig"] = inference
    tool_config = encode_tool_config(tools)
    if tool_config is not None:
        body["toolConfig"] = tool_config
    if settings.additional_model_request_fields is not None:
        body["additionalModelRequestFields"] = settings.additional_model_request_fields
    output = _output_config(config)
    if output is not None:
        body["outputConfig"] = output
    if settings.cache_prompt:
        _mark_cache_points(body)
    return body


def encode_count_tokens_request(
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    settings: BedrockConfig,
) -> dict[str, JSONValue]:
    """The JSON body of CountTokens: the prompt of :func:`encode_request` (messages, system,
    tools, additional fields) as ``{"input": {"converse": {...}}}``: no inference settings
    and no cache points, which CountTokens does not take."""
    prompt_only = attrs.evolve(settings, max_tokens=None, cache_prompt=False)
    return {"input": {"converse": encode_request(messages, tools, InferenceConfig(), prompt_only)}}


# ---------------------------------------------------------------------------------------------
# Responses


def decode_stop_reason(raw: str | None) -> StopReason:
    """Bedrock's ``stopReason`` as a kova :class:`~kova.StopReason`.

    ``guardrail_intervened``, ``content_filtered``, ``malformed_model_output``,
    ``malformed_tool_use`` and values kova does not know become ``UNKNOWN`` with the raw value
    kept, so the agent loop stops and the host can see why.
    """
    return known_stop(raw, MESSAGES_STOP_REASONS)


def decode_usage(usage: Mapping[str, object]) -> Usage:
    """Bedrock's ``usage`` as kova :class:`~kova.Usage`.

    ``inputTokens`` excludes the prompt tokens read from or written to the cache
    (``cacheReadInputTokens``/``cacheWriteInputTokens``); kova's ``input_tokens`` is the whole
    prompt, so it is their sum.
    """
    uncached = count_of(usage.get("inputTokens"))
    cache_read = count_of(usage.get("cacheReadInputTokens"))
    cache_write = count_of(usage.get("cacheWriteInputTokens"))
    return Usage(
        input_tokens=uncached + cache_read + cache_write,
        output_tokens=count_of(usage.get("outputTokens")),
        cache_read_tokens=cache_read,
        cache_creation_tokens=cache_write,
    )


def _str_field(data: Mapping[str, object], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise _invalid(f"{where}: field {key!r} must be a string, got {value!r}")
    return value


def decode_content_block(block: object) -> ContentBlock | None:
    """One response content block; ``None`` for kinds kova does not model (server tool
    results, future kinds), which are skipped. Cited text (``citationsContent``) is text."""
    if not isinstance(block, Mapping):
        raise _invalid(f"a content block must be a JSON object, got {block!r}")
    if "text" in block:
        return Text(text=_str_field(block, "text", "text block"))
    tool_use = block.get("toolUse")
    if tool_use is not None:
        if not isinstance(tool_use, Mapping):
            raise _invalid(f"toolUse must be a JSON object, got {tool_use!r}")
        arguments = tool_use.get("input")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise _invalid(f"toolUse input must be a JSON object, got {arguments!r}")
        try:
            return ToolUse(
                id=_str_field(tool_use, "toolUseId", "toolUse block"),
                name=_str_field(tool_use, "name", "toolUse block"),
                input=json_object(arguments),
            )
        except ValueError as exc:
            raise _invalid(f"invalid toolUse block: {exc}") from exc
    reasoning = block.get("reasoningContent")
    if reasoning is not None:
        if not isinstance(reasoning, Mapping):
            raise _invalid(f"reasoningContent must be a JSON object, got {reasoning!r}")
        text_block = reasoning.get("reasoningText")
        if isinstance(text_block, Mapping):
            signature = text_block.get("signature")
            return Thinking(
                text=_str_field(text_block, "text", "reasoningText"),
                signature=signature if isinstance(signature, str) and signature else None,
            )
        if "redactedContent" in reasoning:
            return RedactedThinking(
                data=_str_field(reasoning, "redactedContent", "reasoningContent")
            )
        raise _invalid(f"reasoningContent without reasoningText or redactedContent: {block!r}")
    cited = block.get("citationsContent")
    if cited is not None:
        # With citations on (Document(citations=True)) the answer's text comes in these
        # blocks, beside the passages it cites: the text is the answer, kept as text.
        if not isinstance(cited, Mapping):
            raise _invalid(f"citationsContent must be a JSON object: {block!r}")
        content = cited.get("content")
        texts = [
            _str_field(part, "text", "citationsContent")
            for part in (content if isinstance(content, list) else ())
            if isinstance(part, Mapping) and "text" in part
        ]
        return Text(text="".join(texts)) if texts else None
    return None


def decode_response(data: object) -> ModelResponse:
    """A Converse response body (parsed JSON) as a :class:`~kova.providers.ModelResponse`.

    Raises:
        InvalidResponse: the body is not a Converse response.
    """
    if not isinstance(data, Mapping):
        raise _invalid("the response is not a Converse response (not a JSON object)")
    output = data.get("output")
    message = output.get("message") if isinstance(output, Mapping) else None
    content_list = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content_list, list):
        raise _invalid("the response is not a Converse response (no output.message.content)")
    content, thinking = split_thinking(content_list, decode_content_block)
    usage = data.get("usage")
    stop = data.get("stopReason")
    return ModelResponse(
        content=content,
        stop_reason=decode_stop_reason(stop if isinstance(stop, str) else None),
        usage=decode_usage(usage) if isinstance(usage, Mapping) else None,
        thinking=thinking,
    )


def decode_count_tokens(body: JSONValue) -> int:
    """The ``inputTokens`` of a CountTokens response."""
    if isinstance(body, Mapping):
        tokens = body.get("inputTokens")
        if isinstance(tokens, int) and not isinstance(tokens, bool):
            return tokens
    raise _invalid(f"CountTokens answered without inputTokens: {body!r}")


def decode_foundation_models(data: object) -> list[ModelInfo]:
    """The ``modelSummaries`` of ListFoundationModels."""
    if not isinstance(data, Mapping) or not isinstance(data.get("modelSummaries"), list):
        raise _invalid("ListFoundationModels answered without modelSummaries")
    models: list[ModelInfo] = []
    for item in data["modelSummaries"]:
        if not isinstance(item, Mapping):
            raise _invalid(f"a model summary must be a JSON object, got {item!r}")
        name = item.get("modelName")
        owner = item.get("providerName")
        models.append(
            ModelInfo(
                id=_str_field(item, "modelId", "model summary"),
                owned_by=owner if isinstance(owner, str) else None,
                display_name=name if isinstance(name, str) else None,
            )
        )
    return models


def decode_inference_profiles(data: object) -> tuple[list[ModelInfo], str | None]:
    """One page of ListInferenceProfiles: the profiles and the ``nextToken`` (``None`` last)."""
    if not isinstance(data, Mapping):
        raise _invalid("ListInferenceProfiles answered with something other than an object")
    summaries = data.get("inferenceProfileSummaries", [])
    if not isinstance(summaries, list):
        raise _invalid("inferenceProfileSummaries must be a JSON array")
    models: list[ModelInfo] = []
    for item in summaries:
        if not isinstance(item, Mapping):
            raise _invalid(f"an inference profile must be a JSON object, got {item!r}")
        name = item.get("inferenceProfileName")
        models.append(
            ModelInfo(
                id=_str_field(item, "inferenceProfileId", "inference profile"),
                object="inference_profile",
                display_name=name if isinstance(name, str) else None,
            )
        )
    token = data.get("nextToken")
    return models, token if isinstance(token, str) and token else None


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def decode_error_details(body: JSONValue) -> ErrorDetails:
    """What a Bedrock error body says: ``{"message"}`` (or ``Message``), the error name in
    ``__type``/``code`` as ``...#ValidationException`` (the ``x-amzn-ErrorType`` header, read
    by the transport, names it when the body does not). Never raises."""
    if not isinstance(body, Mapping):
        return ErrorDetails()
    message = _opt_str(body.get("message")) or _opt_str(body.get("Message"))
    raw_type = _opt_str(body.get("__type")) or _opt_str(body.get("code"))
    error_type = raw_type.rsplit("#", 1)[-1].split(":", 1)[0] if raw_type else None
    return ErrorDetails(message=message, error_type=error_type or None)
