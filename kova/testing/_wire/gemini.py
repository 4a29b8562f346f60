"""The server side of the Gemini ``generateContent`` wire format, for kova's fake server:
reading a request body back into kova values, and writing kova values as response JSON.

Test scaffolding, kept out of the production codec (which holds only what a client needs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..._errors import InvalidResponse
from ..._models import (
    Audio,
    ChatRequest,
    Document,
    Image,
    InferenceConfig,
    JSONValue,
    Message,
    ModelResponse,
    ResponseFormat,
    StopKind,
    StopReason,
    Text,
    Thinking,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from ...providers.gemini._convert import (
    function_call_part,
    signature_metadata,
    text_part,
    thought_part,
    tool_use_of,
)
from ._common import media_block, tool_definition

__all__ = [
    "camel_keys",
    "decode_request",
    "function_call_part",
    "response_json",
    "status_name",
    "stop_to_finish_reason",
    "text_part",
    "thought_part",
    "usage_json",
]


_STANDARD = str.maketrans("-_", "+/")


def _image(part: Mapping[str, JSONValue]) -> Image | Document | Audio | None:
    inline = part.get("inlineData")
    if isinstance(inline, Mapping):
        # google-genai (and kova) write URL-safe base64; kova's blocks hold the standard one.
        data = str(inline.get("data")).translate(_STANDARD)
        return media_block(str(inline.get("mimeType") or ""), data=data)
    file_data = part.get("fileData")
    if isinstance(file_data, Mapping):
        mime = file_data.get("mimeType")
        return media_block(
            mime if isinstance(mime, str) else None, url=str(file_data.get("fileUri"))
        )
    return None


def _decode_content(content: Mapping[str, JSONValue], calls: dict[str, str]) -> list[Message]:
    role = content.get("role")
    parts = content.get("parts")
    if not isinstance(parts, Sequence):
        raise ValueError("a content has no parts")
    if role == "model":
        blocks: list[Text | Image | ToolUse | Thinking] = []
        number = 0
        for part in parts:
            if not isinstance(part, Mapping):
                continue
            metadata = signature_metadata(part)
            if part.get("thought") is True:
                # A signed thought part came back (as Gemini asks); an unsigned one is ignored.
                if metadata is not None:
                    blocks.append(
                        Thinking(text=str(part.get("text", "")), provider_metadata=metadata)
                    )
                continue
            if "functionCall" in part:
                try:
                    use = tool_use_of(part, number)  # the id the client's decoder gave it
                except InvalidResponse as exc:
                    raise ValueError(str(exc)) from None
                number += 1
                calls[use.name] = use.id
                blocks.append(use)
            elif isinstance(part.get("text"), str):
                blocks.append(Text(text=str(part["text"]), provider_metadata=metadata))
        return [Message.assistant(blocks)] if blocks else []
    if role not in ("user", None):
        raise ValueError(f"unknown content role {role!r}")
    results: list[ToolResult] = []
    user: list[Text | Image | Document | Audio] = []
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        response = part.get("functionResponse")
        if isinstance(response, Mapping):
            name = str(response.get("name") or "")
            if not name:
                raise ValueError("functionResponse.name is required")
            identifier = response.get("id")
            payload = response.get("response")
            if not isinstance(payload, Mapping):
                raise ValueError("functionResponse.response must be an object")
            is_error = "error" in payload and "output" not in payload
            value = payload.get("error" if is_error else "output", "")
            text = value if isinstance(value, str) else str(value)
            results.append(
                ToolResult(
                    tool_use_id=identifier
                    if isinstance(identifier, str)
                    else calls.get(name, name),
                    content=text,
                    is_error=is_error,
                )
            )
            continue
        image = _image(part)
        if image is not None:
            user.append(image)
        elif isinstance(part.get("text"), str):
            user.append(Text(text=str(part["text"])))
    messages: list[Message] = []
    if results:
        messages.append(Message.tool_results(results))
    if user:
        messages.append(Message.user(user))
    return messages


_OPAQUE = frozenset(
    {
        "args",
        "response",
        "parametersJsonSchema",
        "parameters",
        "responseSchema",
        "responseJsonSchema",
    }
)
"""Fields whose values are user data (schemas, arguments): their keys are kept as sent."""


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def camel_keys(value: JSONValue) -> JSONValue:
    """``value`` with snake_case field names in camelCase, as Google's JSON parser reads them
    (google-genai sends a few nested fields in snake_case); user data is left alone."""
    if isinstance(value, Mapping):
        out: dict[str, JSONValue] = {}
        for key, item in value.items():
            name = _camel(key)
            out[name] = item if name in _OPAQUE else camel_keys(item)
        return out
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [camel_keys(item) for item in value]
    return value


def decode_request(body: JSONValue) -> ChatRequest:
    """A request body as kova values (snake_case field names accepted, as the API does).

    Raises:
        ValueError: the body is not a ``generateContent`` request (no ``contents`` list, an
            unknown role, a function response without a name, ...).
    """
    body = camel_keys(body)
    if not isinstance(body, Mapping):
        raise ValueError("the body must be a JSON object")
    contents = body.get("contents")
    if not isinstance(contents, Sequence) or isinstance(contents, str):
        raise ValueError("'contents' must be a list")
    messages: list[Message] = []
    system = body.get("systemInstruction")
    if isinstance(system, Mapping):
        parts = system.get("parts")
        if isinstance(parts, Sequence):
            text = "".join(str(part.get("text", "")) for part in parts if isinstance(part, Mapping))
            messages.append(Message.system(text))
    calls: dict[str, str] = {}
    for content in contents:
        if not isinstance(content, Mapping):
            raise ValueError("a content must be an object")
        messages.extend(_decode_content(content, calls))
    tools: list[ToolDefinition] = []
    raw_tools = body.get("tools")
    if isinstance(raw_tools, Sequence):
        for tool in raw_tools:
            declarations = tool.get("functionDeclarations") if isinstance(tool, Mapping) else None
            if not isinstance(declarations, Sequence):
                continue
            for declaration in declarations:
                if not isinstance(declaration, Mapping):
                    continue
                if "parameters" in declaration and "parametersJsonSchema" in declaration:
                    raise ValueError("parameters and parametersJsonSchema are exclusive")
                schema = declaration.get("parametersJsonSchema", declaration.get("parameters"))
                name, description = declaration.get("name"), declaration.get("description")
                tools.append(tool_definition(name, description, schema))
    generation = body.get("generationConfig")
    generation = generation if isinstance(generation, Mapping) else {}
    schema = generation.get("responseSchema", generation.get("responseJsonSchema"))
    stops = generation.get("stopSequences")
    max_tokens = generation.get("maxOutputTokens")
    temperature = generation.get("temperature")
    top_p = generation.get("topP")
    config = InferenceConfig(
        max_tokens=max_tokens if isinstance(max_tokens, int) else None,
        temperature=float(temperature) if isinstance(temperature, int | float) else None,
        top_p=float(top_p) if isinstance(top_p, int | float) else None,
        stop_sequences=[str(s) for s in stops] if isinstance(stops, Sequence) else None,
        response_format=ResponseFormat(name="response", schema=dict(schema))
        if isinstance(schema, Mapping)
        else None,
    )
    return ChatRequest(messages=messages, tools=tools, config=config)


def stop_to_finish_reason(stop_reason: StopReason) -> str:
    """The ``finishReason`` Gemini sends for a stop reason (``STOP`` for tool use too)."""
    match stop_reason.kind:
        case StopKind.MAX_TOKENS:
            return "MAX_TOKENS"
        case StopKind.UNKNOWN:
            return stop_reason.raw or "OTHER"
        case _:
            return "STOP"


def usage_json(usage: Usage) -> dict[str, JSONValue]:
    """``usageMetadata`` of a usage (output minus reasoning is ``candidatesTokenCount``)."""
    body: dict[str, JSONValue] = {
        "promptTokenCount": usage.input_tokens,
        "candidatesTokenCount": max(0, usage.output_tokens - usage.reasoning_tokens),
        "totalTokenCount": usage.total_tokens,
    }
    if usage.reasoning_tokens:
        body["thoughtsTokenCount"] = usage.reasoning_tokens
    if usage.cache_read_tokens:
        body["cachedContentTokenCount"] = usage.cache_read_tokens
    return body


def media_part(block: Image | Audio) -> dict[str, JSONValue]:
    """An answer's picture or recording as an ``inlineData`` part; a speech model answers in
    raw 16-bit PCM, with its rate in the type."""
    media_type = block.media_type
    if isinstance(block, Audio) and block.format == "pcm16":
        media_type = "audio/L16;codec=pcm;rate=24000"
    return {"inlineData": {"mimeType": media_type, "data": block.data}}


def response_json(
    response: ModelResponse, model: str, *, response_id: str = "kova-fake"
) -> dict[str, JSONValue]:
    """A whole ``GenerateContentResponse`` for ``response``: its ``Thinking`` blocks as thought
    parts in their place (``response.thinking`` up front when it has none)."""
    parts: list[JSONValue] = []
    if response.thinking and not any(isinstance(b, Thinking) for b in response.content):
        parts.append(thought_part(response.thinking, None))
    for block in response.content:
        if isinstance(block, Text):
            part = text_part(block.text, block.provider_metadata)
            if part is not None:
                parts.append(part)
        elif isinstance(block, ToolUse):
            parts.append(function_call_part(block))
        elif isinstance(block, Thinking):
            parts.append(thought_part(block.text, block.provider_metadata))
        elif isinstance(block, Image | Audio) and block.data is not None:
            parts.append(media_part(block))
    body: dict[str, JSONValue] = {
        "candidates": [
            {
                "content": {"role": "model", "parts": parts},
                "finishReason": stop_to_finish_reason(response.stop_reason),
                "index": 0,
            }
        ],
        "modelVersion": model,
        "responseId": response_id,
    }
    if response.usage is not None:
        body["usageMetadata"] = usage_json(response.usage)
    return body


_STATUS_NAMES: Mapping[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def status_name(status: int) -> str:
    """The ``google.rpc.Code`` name Google sends with an HTTP status."""
    return _STATUS_NAMES.get(status, "UNKNOWN" if status >= 500 else "FAILED_PRECONDITION")
