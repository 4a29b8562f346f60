"""Pure translation between the ``mcp`` package's models and kova's values. No I/O.

Tool results keep what a model can use: text stays text, images stay images (inline
base64), an embedded text resource becomes its text, an embedded image blob becomes an
image, and anything else (audio, other binary blobs, resource links) becomes a short text
note saying what it was, so the model knows something was there. The server's ``isError``
is kept, and so is its ``structuredContent`` (as :attr:`~kova.ToolResult.structured`, for the
host; the model reads the text blocks, which servers fill with the same data).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, assert_never

import mcp_types as mt

from .._messages import DOCUMENT_MEDIA_TYPES
from .._models import (
    Document,
    Image,
    InferenceConfig,
    Message,
    ModelResponse,
    Role,
    StopKind,
    Text,
    ToolAnnotations,
    ToolDefinition,
    ToolResult,
)
from ._types import (
    ElicitationRequest,
    ElicitationResponse,
    McpPrompt,
    McpPromptArgument,
    McpPromptResult,
    McpResource,
    McpResourceContents,
    McpResourceTemplate,
)

if TYPE_CHECKING:
    from .._models import JSONObject, JSONValue

__all__ = [
    "elicitation_request",
    "elicitation_result",
    "prompt",
    "prompt_result",
    "resource",
    "resource_contents",
    "resource_template",
    "sampling_request",
    "sampling_result",
    "tool_definition",
    "tool_result",
]


def tool_definition(tool: mt.Tool) -> ToolDefinition:
    """An MCP tool as the definition a model sees, with its annotations and output schema
    for the host."""
    hints = tool.annotations
    annotations = None
    if hints is not None:
        annotations = ToolAnnotations(
            read_only=hints.read_only_hint,
            destructive=hints.destructive_hint,
            idempotent=hints.idempotent_hint,
            open_world=hints.open_world_hint,
            title=hints.title,
        )
    return ToolDefinition(
        name=tool.name,
        description=tool.description or tool.title or "",
        parameters=tool.input_schema,
        annotations=annotations,
        output_schema=tool.output_schema,
    )


def _embedded(
    resource: mt.TextResourceContents | mt.BlobResourceContents,
) -> Text | Image | Document:
    if isinstance(resource, mt.TextResourceContents):
        return Text(text=resource.text)
    mime_type = resource.mime_type or "application/octet-stream"
    if mime_type.startswith("image/"):
        return Image(media_type=mime_type, data=resource.blob)
    if mime_type in DOCUMENT_MEDIA_TYPES and resource.blob:
        # A PDF (or another document) the server returned: the model reads it as a document.
        name = str(resource.uri).rstrip("/").rsplit("/", 1)[-1] or None
        return Document(data=resource.blob, media_type=mime_type, title=name)
    return Text(text=f"[binary resource {resource.uri} ({mime_type}), not shown]")


def content_part(block: mt.ContentBlock) -> Text | Image | Document:
    """One MCP content block as a tool-result part."""
    match block:
        case mt.TextContent(text=text):
            return Text(text=text)
        case mt.ImageContent(data=data, mime_type=mime_type):
            return Image(media_type=mime_type, data=data)
        case mt.AudioContent(mime_type=mime_type):
            return Text(text=f"[audio ({mime_type}), not shown]")
        case mt.EmbeddedResource(resource=resource):
            return _embedded(resource)
        case mt.ResourceLink(uri=uri, name=name):
            return Text(text=f"[resource link: {name} <{uri}>]")
        case _:
            assert_never(block)


def tool_result(result: mt.CallToolResult) -> ToolResult:
    """A ``tools/call`` result as a :class:`~kova.ToolResult` (``isError`` kept)."""
    parts = tuple(content_part(block) for block in result.content)
    if not parts and result.structured_content is not None:
        # A server may answer with structured content only; the model reads it as JSON.
        parts = (Text(text=json.dumps(result.structured_content, ensure_ascii=False)),)
    content: str | tuple[Text | Image | Document, ...]
    if all(isinstance(part, Text) for part in parts):
        content = "\n".join(part.text for part in parts if isinstance(part, Text))
    else:
        content = parts
    structured: JSONValue | None = result.structured_content
    return ToolResult(content=content, is_error=result.is_error, structured=structured)


def resource(item: mt.Resource) -> McpResource:
    return McpResource(
        uri=item.uri,
        name=item.name,
        title=item.title,
        description=item.description,
        mime_type=item.mime_type,
        size=item.size,
    )


def resource_template(item: mt.ResourceTemplate) -> McpResourceTemplate:
    return McpResourceTemplate(
        uri_template=item.uri_template,
        name=item.name,
        title=item.title,
        description=item.description,
        mime_type=item.mime_type,
    )


def resource_contents(
    item: mt.TextResourceContents | mt.BlobResourceContents,
) -> McpResourceContents:
    if isinstance(item, mt.TextResourceContents):
        return McpResourceContents(uri=item.uri, mime_type=item.mime_type, text=item.text)
    return McpResourceContents(uri=item.uri, mime_type=item.mime_type, blob=item.blob)


def prompt(item: mt.Prompt) -> McpPrompt:
    return McpPrompt(
        name=item.name,
        title=item.title,
        description=item.description,
        arguments=tuple(
            McpPromptArgument(
                name=argument.name,
                description=argument.description,
                required=bool(argument.required),
            )
            for argument in item.arguments or ()
        ),
    )


def prompt_result(result: mt.GetPromptResult) -> McpPromptResult:
    return McpPromptResult(
        description=result.description,
        messages=tuple(
            Message(role=Role(message.role), content=(content_part(message.content),))
            for message in result.messages
        ),
    )


# ---------------------------------------------------------------------------------------------
# Sampling: the server asks the client to run a model call.


def _sampling_part(block: Any) -> Text | Image | Document:
    if isinstance(block, mt.TextContent | mt.ImageContent):
        return content_part(block)
    # Audio, tool use and tool results inside sampling are not routed to kova providers;
    # the model is told what it missed instead of silently losing it.
    return Text(text=f"[{getattr(block, 'type', 'unknown')} content, not shown]")


def sampling_request(
    params: mt.CreateMessageRequestParams,
) -> tuple[list[Message], InferenceConfig]:
    """A ``sampling/createMessage`` request as kova messages and an inference config."""
    messages: list[Message] = []
    if params.system_prompt:
        messages.append(Message.system(params.system_prompt))
    for item in params.messages:
        parts = [_sampling_part(block) for block in item.content_as_list]
        messages.append(Message(role=Role(item.role), content=tuple(parts)))
    config = InferenceConfig(
        max_tokens=params.max_tokens if params.max_tokens > 0 else None,
        temperature=params.temperature,
        stop_sequences=tuple(params.stop_sequences) if params.stop_sequences else None,
    )
    return messages, config


_STOP_REASONS = {
    StopKind.END_TURN: "endTurn",
    StopKind.MAX_TOKENS: "maxTokens",
    StopKind.STOP_SEQUENCE: "stopSequence",
    StopKind.TOOL_USE: "toolUse",
}


def sampling_result(response: ModelResponse, *, model: str) -> mt.CreateMessageResult:
    """A model's answer as the ``sampling/createMessage`` result (text only)."""
    kind = response.stop_reason.kind
    stop_reason = _STOP_REASONS.get(kind, response.stop_reason.raw or "endTurn")
    return mt.CreateMessageResult(
        role="assistant",
        content=mt.TextContent(type="text", text=response.text),
        model=model,
        stop_reason=stop_reason,
    )


# ---------------------------------------------------------------------------------------------
# Elicitation: the server asks the user a question.


def elicitation_request(params: mt.ElicitRequestParams) -> ElicitationRequest:
    if isinstance(params, mt.ElicitRequestURLParams):
        return ElicitationRequest(message=params.message, mode="url", url=params.url)
    schema: JSONObject = dict(params.requested_schema)
    return ElicitationRequest(message=params.message, mode="form", requested_schema=schema)


def elicitation_result(
    response: ElicitationResponse, request: ElicitationRequest
) -> mt.ElicitResult:
    """The host's answer as the ``elicitation/create`` result.

    On ``accept`` in form mode, a field the host left out but the schema gives a
    ``default`` for is filled with that default (SEP-1034: the form would have shown it
    pre-filled).
    """
    if response.action != "accept" or request.mode != "form":
        return mt.ElicitResult(action=response.action)
    content: dict[str, Any] = dict(response.content or {})
    schema = request.requested_schema or {}
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, field in properties.items():
            if name not in content and isinstance(field, Mapping) and "default" in field:
                content[name] = field["default"]
    return mt.ElicitResult(action="accept", content=content)
