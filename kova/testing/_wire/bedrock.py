"""The server side of Bedrock's wire format, for kova's fake Bedrock server: AWS event-stream
messages *written*, a Converse request body read back into kova values, a Converse response
built from one, and SigV4 signatures *verified* (with botocore's signer, independently of the
client's flow).

Test scaffolding, kept out of the production codec (which holds only what a client needs).
Imports botocore (the ``bedrock`` extra).
"""

from __future__ import annotations

import base64
import hmac
import json
import re
import struct
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import unquote
from zlib import crc32

from ..._json import dumps_bytes
from ..._models import (
    Audio,
    ChatRequest,
    ContentBlock,
    Document,
    File,
    Image,
    InferenceConfig,
    JSONValue,
    Message,
    ModelResponse,
    RedactedThinking,
    ResponseFormat,
    Role,
    Text,
    Thinking,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from ..._record import Record
from ...providers.bedrock._convert import decode_content_block
from ._common import tool_definition
from .anthropic import stop_to_wire

if TYPE_CHECKING:
    from .._http_server import RecordedRequest

__all__ = [
    "SignatureCheck",
    "decode_request",
    "encode_message",
    "error_message",
    "event_message",
    "exception_message",
    "model_id_of",
    "response_json",
    "stop_to_wire",
    "usage_to_wire",
    "verify_sigv4",
]

_FORMAT_TYPES = {
    "png": "image/png",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "pdf": "application/pdf",
    "csv": "text/csv",
    "doc": "application/msword",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xls": "application/vnd.ms-excel",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "html": "text/html",
    "txt": "text/plain",
    "md": "text/markdown",
}

# ---------------------------------------------------------------------------------------------
# AWS event-stream messages


def encode_message(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One event-stream message with string headers (type 7, the only type Bedrock sends),
    in the given order, with both CRCs. A lone surrogate in a value goes as its three bytes
    (what a hostile server can send: not UTF-8)."""
    header_bytes = bytearray()
    for name, value in headers.items():
        raw_name = name.encode()
        raw_value = value.encode("utf-8", "surrogatepass")
        header_bytes += struct.pack(">B", len(raw_name)) + raw_name
        header_bytes += struct.pack(">BH", 7, len(raw_value)) + raw_value
    total = 16 + len(header_bytes) + len(payload)
    prelude = struct.pack(">II", total, len(header_bytes))
    prelude += struct.pack(">I", crc32(prelude))
    message = prelude + bytes(header_bytes) + payload
    return message + struct.pack(">I", crc32(message))


def event_message(event_type: str, data: Mapping[str, JSONValue]) -> bytes:
    """A ConverseStream event (``:message-type: event``) with a JSON payload."""
    return encode_message(
        {
            ":event-type": event_type,
            ":content-type": "application/json",
            ":message-type": "event",
        },
        dumps_bytes(data),
    )


def exception_message(name: str, message: str) -> bytes:
    """An exception inside the stream: ``:exception-type`` is the union member name
    (``throttlingException``); a ``ThrottlingException`` shape name is converted."""
    member = name[:1].lower() + name[1:]
    return encode_message(
        {
            ":exception-type": member,
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        dumps_bytes({"message": message}),
    )


def error_message(code: str, message: str) -> bytes:
    """An ``:message-type: error`` message (code and message in headers, empty payload)."""
    return encode_message(
        {":error-code": code, ":error-message": message, ":message-type": "error"}, b""
    )


# ---------------------------------------------------------------------------------------------
# Converse request body -> kova values


def _source(kind: str, block: Mapping[str, object]) -> tuple[str | None, str | None]:
    """A media block's ``(s3 URI, None)`` or ``(None, base64 bytes)``."""
    source = block.get("source")
    if not isinstance(source, Mapping):
        raise ValueError(f"{kind} block without a source: {block!r}")
    location = source.get("s3Location")
    if isinstance(location, Mapping):
        return str(location.get("uri")), None
    data = source.get("bytes")
    if not isinstance(data, str):
        raise ValueError(f"{kind} block without bytes: {block!r}")
    base64.b64decode(data, validate=True)  # the API rejects a blob that is not base64
    return None, data


def _media(kind: str, block: Mapping[str, object]) -> Image:
    fmt = str(block.get("format", ""))
    uri, data = _source(kind, block)
    if uri is not None:
        return Image(url=uri, media_type=_FORMAT_TYPES.get(fmt))
    return Image(media_type=_FORMAT_TYPES.get(fmt, fmt), data=data)


def _document(block: Mapping[str, object]) -> Document | File:
    fmt = str(block.get("format", ""))
    media_type = _FORMAT_TYPES.get(fmt)
    if (
        media_type is None
        or not media_type.count("/")
        or not isinstance(block.get("source"), Mapping)
    ):
        raise ValueError(f"document block of format {fmt!r} or without a source: {block!r}")
    name = block.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("a document block needs a name")
    citations = block.get("citations")
    cite = isinstance(citations, Mapping) and citations.get("enabled") is True
    title = None if re.fullmatch(r"document-\d+", name) else name
    uri, data = _source("document", block)
    if uri is not None:
        return Document(file_id=uri, media_type=media_type, title=title, citations=cite)
    return Document(data=data, media_type=media_type, title=title, citations=cite)


def _audio_or_video(kind: str, block: Mapping[str, object]) -> Audio | File:
    fmt = str(block.get("format", ""))
    uri, data = _source(kind, block)
    if kind == "video":
        if uri is None:
            raise ValueError("the fake server takes video from s3:// only")
        return File(uri, media_type=f"video/{fmt}")
    return Audio(url=uri, data=data, format="pcm16" if fmt == "pcm" else fmt)


def _result_content(content: object) -> str | tuple[Text | Image | Document, ...]:
    parts: list[Text | Image | Document] = []
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, Mapping):
            continue
        if "text" in item:
            parts.append(Text(text=str(item["text"])))
        elif "json" in item:
            parts.append(Text(text=json.dumps(item["json"], separators=(",", ":"))))
        elif "image" in item and isinstance(item["image"], Mapping):
            parts.append(_media("image", item["image"]))
        elif "document" in item and isinstance(item["document"], Mapping):
            document = _document(item["document"])
            if isinstance(document, Document):
                parts.append(document)
    if all(isinstance(part, Text) for part in parts):
        return "".join(part.text for part in parts if isinstance(part, Text))
    return tuple(parts)


def _block(block: Mapping[str, object]) -> ContentBlock | None:
    if len(block) != 1:
        raise ValueError(f"a content block has exactly one member, got {sorted(block)}")
    ((kind, value),) = block.items()
    if kind == "text":
        if not isinstance(value, str) or not value:
            raise ValueError("text blocks must be non-empty strings")
        return Text(text=value)
    if not isinstance(value, Mapping):
        raise ValueError(f"{kind} must be an object")
    if kind == "image":
        return _media(kind, value)
    if kind == "document":
        return _document(value)
    if kind in ("audio", "video"):
        return _audio_or_video(kind, value)
    if kind in ("toolUse", "reasoningContent"):  # read as the client reads them in an answer
        return decode_content_block(block)
    if kind == "toolResult":
        return ToolResult(
            tool_use_id=str(value.get("toolUseId")),
            content=_result_content(value.get("content")),
            is_error=value.get("status") == "error",
        )
    return None  # cachePoint, guardContent, ...: nothing kova models


def _messages(body: Mapping[str, object]) -> list[Message]:
    messages: list[Message] = []
    system = body.get("system")
    for item in system if isinstance(system, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("text"), str):
            messages.append(Message.system(str(item["text"])))
    turns = body.get("messages")
    if not isinstance(turns, list):
        raise ValueError("messages must be a list")
    for turn in turns:
        if not isinstance(turn, Mapping) or turn.get("role") not in ("user", "assistant"):
            raise ValueError(f"a message needs role user or assistant: {turn!r}")
        content = turn.get("content")
        if not isinstance(content, list) or not content:
            raise ValueError("a message needs a non-empty content list")
        results: list[ToolResult] = []
        blocks: list[ContentBlock] = []
        for raw in content:
            if not isinstance(raw, Mapping):
                raise ValueError("content blocks must be objects")
            decoded = _block(raw)
            if isinstance(decoded, ToolResult):
                results.append(decoded)
            elif decoded is not None:
                blocks.append(decoded)
        if results:
            messages.append(Message.tool_results(results))
        if blocks:
            messages.append(Message(role=Role(str(turn["role"])), content=tuple(blocks)))
    return messages


def _tools(tool_config: object) -> list[ToolDefinition]:
    if tool_config is None:
        return []
    if not isinstance(tool_config, Mapping) or not isinstance(tool_config.get("tools"), list):
        raise ValueError("toolConfig needs a tools list")
    definitions: list[ToolDefinition] = []
    for tool in tool_config["tools"]:
        spec = tool.get("toolSpec") if isinstance(tool, Mapping) else None
        if not isinstance(spec, Mapping):
            continue
        schema = spec.get("inputSchema")
        parameters = schema.get("json") if isinstance(schema, Mapping) else None
        description = spec.get("description")
        if description == "":
            raise ValueError("toolSpec.description must not be empty")
        definitions.append(tool_definition(spec.get("name"), description, parameters))
    return definitions


def _config(body: Mapping[str, object], model: str | None) -> InferenceConfig:
    inference = body.get("inferenceConfig")
    inference = inference if isinstance(inference, Mapping) else {}
    response_format = None
    output = body.get("outputConfig")
    if isinstance(output, Mapping):
        text_format = output.get("textFormat")
        structure = text_format.get("structure") if isinstance(text_format, Mapping) else None
        schema = structure.get("jsonSchema") if isinstance(structure, Mapping) else None
        if isinstance(schema, Mapping):
            raw_schema = schema.get("schema")
            if not isinstance(raw_schema, str):
                raise ValueError("outputConfig...jsonSchema.schema must be a JSON string")
            description = schema.get("description")
            response_format = ResponseFormat(
                name=str(schema.get("name", "output")),
                schema=json.loads(raw_schema),
                description=description if isinstance(description, str) else None,
            )
    max_tokens = inference.get("maxTokens")
    temperature = inference.get("temperature")
    top_p = inference.get("topP")
    stop = inference.get("stopSequences")
    return InferenceConfig(
        model=model,
        max_tokens=max_tokens if isinstance(max_tokens, int) else None,
        temperature=float(temperature) if isinstance(temperature, int | float) else None,
        top_p=float(top_p) if isinstance(top_p, int | float) else None,
        stop_sequences=[str(s) for s in stop] if isinstance(stop, list) else None,
        response_format=response_format,
    )


def decode_request(body: JSONValue, *, model: str | None = None) -> ChatRequest:
    """A Converse/ConverseStream body (or the ``input.converse`` of a CountTokens body) as kova
    values. ``model`` is the id from the path.

    Raises:
        ValueError: the body breaks a rule the API enforces (empty text, a block with more
            than one member, a role other than user/assistant, a schema that is not a string).
    """
    if not isinstance(body, Mapping):
        raise ValueError("the body must be a JSON object")
    return ChatRequest(
        messages=_messages(body), tools=_tools(body.get("toolConfig")), config=_config(body, model)
    )


# ---------------------------------------------------------------------------------------------
# kova values -> Converse response


def usage_to_wire(usage: Usage | None) -> dict[str, JSONValue]:
    """Bedrock's ``usage`` (``inputTokens`` excludes cache reads and writes)."""
    usage = usage or Usage()
    cached = usage.cache_read_tokens + usage.cache_creation_tokens
    uncached = max(0, usage.input_tokens - cached)
    wire: dict[str, JSONValue] = {
        "inputTokens": uncached,
        "outputTokens": usage.output_tokens,
        "totalTokens": usage.input_tokens + usage.output_tokens,
    }
    if usage.cache_read_tokens:
        wire["cacheReadInputTokens"] = usage.cache_read_tokens
    if usage.cache_creation_tokens:
        wire["cacheWriteInputTokens"] = usage.cache_creation_tokens
    return wire


def _wire_block(block: ContentBlock) -> dict[str, JSONValue] | None:
    match block:
        case Text(text=text):
            return {"text": text}
        case Thinking(text=text, signature=signature):
            reasoning: dict[str, JSONValue] = {"text": text}
            if signature:
                reasoning["signature"] = signature
            return {"reasoningContent": {"reasoningText": reasoning}}
        case RedactedThinking(data=data):
            return {"reasoningContent": {"redactedContent": data}}
        case ToolUse(id=id_, name=name, input=arguments):
            return {"toolUse": {"toolUseId": id_, "name": name, "input": arguments}}
    return None


def response_json(response: ModelResponse) -> dict[str, JSONValue]:
    """A Converse response body for ``response``."""
    content: list[JSONValue] = []
    if response.thinking and not any(isinstance(b, Thinking) for b in response.content):
        content.append({"reasoningContent": {"reasoningText": {"text": response.thinking}}})
    for block in response.content:
        wire = _wire_block(block)
        if wire is not None:
            content.append(wire)
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop_to_wire(response.stop_reason),
        "usage": usage_to_wire(response.usage),
        "metrics": {"latencyMs": 1},
    }


# ---------------------------------------------------------------------------------------------
# SigV4, verified


_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request, ?SignedHeaders=(?P<signed>[a-z0-9;-]+), ?"
    r"Signature=(?P<signature>[0-9a-f]{64})$"
)


class SignatureCheck(Record):
    """The outcome of :func:`verify_sigv4`: ``error`` is ``None`` when the signature holds."""

    error: str | None = None
    error_type: str = "InvalidSignatureException"
    access_key_id: str | None = None
    signed_headers: tuple[str, ...] = ()


def verify_sigv4(
    request: RecordedRequest,
    secrets: Mapping[str, str],
    *,
    region: str,
    service: str = "bedrock",
    session_tokens: Mapping[str, str] | None = None,
) -> SignatureCheck:
    """Recompute a request's SigV4 signature with botocore's signer, as AWS would.

    Args:
        request: the request as received (path still percent-encoded once).
        secrets: secret access key by access key id.
        region: the region the server is in.
        service: the signing name it expects.
        session_tokens: the session token each temporary access key id must carry.
    """
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import ReadOnlyCredentials

    header = request.headers.get("authorization", "")
    match = _AUTHORIZATION.match(header)
    if match is None:
        return SignatureCheck(
            error="missing or malformed SigV4 Authorization header",
            error_type="MissingAuthenticationTokenException",
        )
    key = match["key"]
    secret = secrets.get(key)
    if secret is None:
        return SignatureCheck(
            error="The security token included in the request is invalid.",
            error_type="UnrecognizedClientException",
        )
    timestamp = request.headers.get("x-amz-date", "")
    signed = tuple(match["signed"].split(";"))
    if "host" not in signed or "x-amz-date" not in signed:
        return SignatureCheck(error="host and x-amz-date must be signed")
    if not timestamp.startswith(match["date"]):
        return SignatureCheck(error="x-amz-date does not match the credential scope date")
    if match["region"] != region or match["service"] != service:
        return SignatureCheck(
            error=f"credential scope should be {region}/{service}, got "
            f"{match['region']}/{match['service']}"
        )
    expected_token = (session_tokens or {}).get(key)
    token = request.headers.get("x-amz-security-token")
    if expected_token is not None and token != expected_token:
        return SignatureCheck(
            error="The security token included in the request is invalid.",
            error_type="UnrecognizedClientException",
        )
    if token is not None and "x-amz-security-token" not in signed:
        return SignatureCheck(error="x-amz-security-token must be signed")
    missing = [name for name in signed if name not in request.headers]
    if missing:
        return SignatureCheck(error=f"signed headers missing from the request: {missing}")
    aws_request = AWSRequest(
        method=request.method,
        url=f"http://{request.headers['host']}{request.path}",
        headers={name: request.headers[name] for name in signed},
        data=request.body,
        params=list(request.query.items()),
    )
    aws_request.context["timestamp"] = timestamp
    signer = SigV4Auth(ReadOnlyCredentials(key, secret, token), service, region)
    canonical = signer.canonical_request(aws_request)
    expected = signer.signature(signer.string_to_sign(aws_request, canonical), aws_request)
    if not hmac.compare_digest(expected, match["signature"]):
        return SignatureCheck(
            error="The request signature we calculated does not match the signature you "
            "provided. Check your AWS Secret Access Key and signing method.",
            access_key_id=key,
            signed_headers=signed,
        )
    return SignatureCheck(access_key_id=key, signed_headers=signed)


def model_id_of(segment: str) -> str:
    """The model id of a ``/model/{modelId}/...`` path segment (percent-decoded)."""
    return unquote(segment)
