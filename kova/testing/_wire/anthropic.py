"""The server side of the Anthropic Messages wire format, for kova's fake server: reading a
request body back into kova values, and writing kova values as response JSON.

Test scaffolding, kept out of the production codec (which holds only what a client needs).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..._models import (
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
    StopReason,
    Text,
    Thinking,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from ...providers._codec import MESSAGES_STOP_REASONS
from ...providers.anthropic._convert import compaction_block, decode_content_block
from ._common import tool_definition

__all__ = [
    "config_from_wire",
    "message_json",
    "messages_from_wire",
    "stop_to_wire",
    "tools_from_wire",
    "usage_json",
]

_ANSWER_BLOCKS = frozenset({"text", "thinking", "redacted_thinking", "compaction", "tool_use"})
"""The blocks of a request that an answer holds too (the compaction block: the server's own
summary, sent back)."""

_WIRE_STOP = {stop.kind: raw for raw, stop in MESSAGES_STOP_REASONS.items() if not stop.raw}


def stop_to_wire(stop: StopReason) -> str:
    """The ``stop_reason`` for ``stop`` (its raw value when it came from the wire); Bedrock's
    ``stopReason`` says the same."""
    if stop.raw:
        return stop.raw
    return _WIRE_STOP.get(stop.kind, "end_turn")


def usage_json(usage: Usage | None) -> dict[str, JSONValue]:
    """``usage`` as the API reports it (``input_tokens`` without the cached ones)."""
    usage = usage or Usage()
    cached = usage.cache_read_tokens + usage.cache_creation_tokens
    wire: dict[str, JSONValue] = {
        "input_tokens": max(0, usage.input_tokens - cached),
        "cache_creation_input_tokens": usage.cache_creation_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "output_tokens": usage.output_tokens,
    }
    if usage.reasoning_tokens:
        wire["output_tokens_details"] = {"thinking_tokens": usage.reasoning_tokens}
    return wire


def _document_from_wire(block: Mapping[str, object]) -> Document | File:
    source = block.get("source")
    if not isinstance(source, Mapping):
        raise ValueError(f"document block without a source: {block!r}")
    title = block.get("title")
    citations = block.get("citations")
    name = title if isinstance(title, str) else None
    cite = isinstance(citations, Mapping) and citations.get("enabled") is True
    match source.get("type"):
        case "base64":
            return Document(
                data=str(source.get("data")),
                media_type=str(source.get("media_type")),
                title=name,
                citations=cite,
            )
        case "url":
            return Document(url=str(source.get("url")), title=name, citations=cite)
        case "text":
            return Document.from_text(str(source.get("data")), title=name, citations=cite)
        case "file" if title is None and citations is None:
            return File(str(source.get("file_id")))
        case "file":
            return Document(file_id=str(source.get("file_id")), title=name, citations=cite)
    raise ValueError(f"document source of an unknown type: {source!r}")


def _image_from_wire(block: Mapping[str, object]) -> Image | File:
    source = block.get("source")
    if isinstance(source, Mapping) and source.get("type") == "file":
        return File(str(source.get("file_id")), media_type="image/*")
    if isinstance(source, Mapping) and source.get("type") == "url":
        return Image(url=str(source.get("url")))
    if isinstance(source, Mapping):
        return Image(media_type=str(source.get("media_type")), data=str(source.get("data")))
    raise ValueError(f"image block without a source: {block!r}")


def _parts_from_wire(content: object) -> str | tuple[Text | Image | Document, ...]:
    if content is None or isinstance(content, str):
        return content or ""
    parts: list[Text | Image | Document] = []
    for item in content if isinstance(content, list) else []:
        kind = item.get("type") if isinstance(item, Mapping) else None
        if kind == "text":
            parts.append(Text(text=str(item.get("text", ""))))
        elif kind in ("image", "document"):
            block = _image_from_wire(item) if kind == "image" else _document_from_wire(item)
            if not isinstance(block, File):  # a result holds no file by id: left out
                parts.append(block)
    return tuple(parts)


def messages_from_wire(body: Mapping[str, object]) -> list[Message]:
    """The request's ``system`` and ``messages`` as kova messages."""
    messages: list[Message] = []
    system = body.get("system")
    if isinstance(system, str) and system:
        messages.append(Message.system(system))
    elif isinstance(system, list):
        text = "".join(str(b.get("text", "")) for b in system if isinstance(b, Mapping))
        messages.append(Message.system(text))
    turns = body.get("messages")
    for turn in turns if isinstance(turns, list) else []:
        if not isinstance(turn, Mapping):
            continue
        role = turn.get("role")
        content = turn.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        results: list[ToolResult] = []
        blocks: list[ContentBlock] = []
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind in _ANSWER_BLOCKS:  # read as the client reads them in an answer
                decoded = decode_content_block(dict(block))
                if decoded is not None:
                    blocks.append(decoded)
            elif kind == "image":
                blocks.append(_image_from_wire(block))
            elif kind == "document":
                blocks.append(_document_from_wire(block))
            elif kind == "tool_result":
                results.append(
                    ToolResult(
                        tool_use_id=str(block.get("tool_use_id")),
                        content=_parts_from_wire(block.get("content")),
                        is_error=bool(block.get("is_error", False)),
                    )
                )
        if results:
            messages.append(Message.tool_results(results))
        if blocks:
            messages.append(Message(role=Role(str(role)), content=tuple(blocks)))
    return messages


def tools_from_wire(body: Mapping[str, object]) -> list[ToolDefinition]:
    """The request's ``tools`` as kova tool definitions."""
    tools = body.get("tools")
    definitions: list[ToolDefinition] = []
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, Mapping):
            name, description = tool.get("name"), tool.get("description")
            definitions.append(tool_definition(name, description, tool.get("input_schema")))
    return definitions


def config_from_wire(body: Mapping[str, object]) -> InferenceConfig:
    """The request's settings (model, limits, sampling, output format)."""
    output = body.get("output_config")
    response_format = None
    if isinstance(output, Mapping):
        wire_format = output.get("format")
        if isinstance(wire_format, Mapping) and isinstance(wire_format.get("schema"), dict):
            response_format = ResponseFormat(name="output", schema=wire_format["schema"])
    stop_sequences = body.get("stop_sequences")
    model = body.get("model")
    max_tokens = body.get("max_tokens")
    temperature = body.get("temperature")
    top_p = body.get("top_p")
    return InferenceConfig(
        model=model if isinstance(model, str) else None,
        max_tokens=max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else None,
        temperature=float(temperature) if isinstance(temperature, int | float) else None,
        top_p=float(top_p) if isinstance(top_p, int | float) else None,
        stop_sequences=[str(s) for s in stop_sequences]
        if isinstance(stop_sequences, list)
        else None,
        response_format=response_format,
    )


def _wire_block(block: object) -> dict[str, JSONValue] | None:
    match block:
        case Text(text=text, provider_metadata=metadata) if metadata is not None and (
            compacted := compaction_block(block)
        ):
            return compacted
        case Text(text=text):
            return {"type": "text", "text": text}
        case Thinking(text=text, signature=signature):
            return {"type": "thinking", "thinking": text, "signature": signature or ""}
        case RedactedThinking(data=data):
            return {"type": "redacted_thinking", "data": data}
        case ToolUse(id=id_, name=name, input=arguments):
            return {"type": "tool_use", "id": id_, "name": name, "input": arguments}
    return None


def message_json(response: ModelResponse, model: str, message_id: str) -> dict[str, JSONValue]:
    """A whole (non-streamed) ``message`` for ``response``."""
    content: list[JSONValue] = []
    has_thinking_block = any(isinstance(b, Thinking) for b in response.content)
    if response.thinking and not has_thinking_block:
        content.append({"type": "thinking", "thinking": response.thinking, "signature": ""})
    for block in response.content:
        wire = _wire_block(block)
        if wire is not None:
            content.append(wire)
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_to_wire(response.stop_reason),
        "stop_sequence": None,
        "usage": usage_json(response.usage),
    }
