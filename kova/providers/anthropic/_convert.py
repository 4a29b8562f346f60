"""Pure translation between kova's data model and Anthropic's Messages API JSON.

No I/O and no clock: every function here takes plain values and returns plain values, so the
wire format is tested byte for byte against documented payloads without a network.

Reference: ``shared/wire/anthropic.md`` and, where newer, the official ``anthropic`` package's
request types (``MessageCreateParams``, ``OutputConfigParam``, ``ThinkingConfigParam``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, assert_never

from ..._errors import InvalidResponse
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
from ..._secret import SecretHeaders
from ..._tool_index import SEARCH_TOOLS
from .._codec import MESSAGES_STOP_REASONS, json_object, known_stop, split_thinking
from .._media import MB, check_inline_total, document_text, refuse

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..._requests import ProviderCompaction
    from ._config import AnthropicConfig

__all__ = [
    "PROVIDER",
    "SERVER_BLOCKS_KEY",
    "TOOL_SEARCH_TOOL",
    "decode_content_block",
    "decode_count_tokens",
    "decode_model_page",
    "decode_response",
    "decode_stop_reason",
    "decode_usage",
    "encode_count_tokens_request",
    "encode_deferred_tools",
    "encode_messages",
    "encode_request",
    "encode_tools",
    "is_tool_search",
    "request_headers",
]

PROVIDER = "anthropic"


def _invalid(message: str) -> InvalidResponse:
    return InvalidResponse(message, provider=PROVIDER)


# ---------------------------------------------------------------------------------------------
# Requests


def request_headers(settings: AnthropicConfig) -> SecretHeaders:
    """The headers of every call (credentials come from the auth flow): version, JSON, then
    the user's extras, which win (and stay masked unless listed as public)."""
    extras = settings.extra_headers
    lowered = SecretHeaders(
        {name.lower(): value for name, value in extras.items()}, public=extras.public
    )
    return lowered.merged(
        {"anthropic-version": settings.api_version, "accept": "application/json"},
        replace=False,
    )


def _image(image: Image) -> dict[str, JSONValue]:
    if image.url is not None:
        return {"type": "image", "source": {"type": "url", "url": image.url}}
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": image.media_type, "data": image.data},
    }


MAX_REQUEST_BYTES = 32 * MB
"""The Messages API's request size limit (inline documents count toward it)."""


def _document(document: Document) -> dict[str, JSONValue]:
    """A ``document`` block as the SDK's ``DocumentBlockParam``: a PDF as base64, by URL or by
    file id; text as a plain-text source (the API's text source is ``text/plain``; CSV,
    Markdown and HTML are text too)."""
    source: dict[str, JSONValue]
    is_text = document.media_type.startswith("text/")
    if document.file_id is not None:
        source = {"type": "file", "file_id": document.file_id}
    elif is_text:
        if document.data is None:
            raise refuse(PROVIDER, document, "a text document goes by data or file_id, not url")
        source = {
            "type": "text",
            "media_type": "text/plain",
            "data": document_text(PROVIDER, document),
        }
    elif document.media_type != "application/pdf":
        raise refuse(
            PROVIDER,
            document,
            "Anthropic reads PDF and text documents (convert it, or upload it for a "
            "code-execution tool)",
        )
    elif document.url is not None:
        source = {"type": "url", "url": document.url}
    else:
        source = {"type": "base64", "media_type": "application/pdf", "data": document.data}
    block: dict[str, JSONValue] = {"type": "document", "source": source}
    if document.title is not None:
        block["title"] = document.title
    if document.citations:
        block["citations"] = {"enabled": True}
    return block


def _file(file: File) -> dict[str, JSONValue]:
    """A hosted file: an ``image`` block for an image type, else a ``document`` block."""
    kind = "image" if (file.media_type or "").startswith("image/") else "document"
    return {"type": kind, "source": {"type": "file", "file_id": file.file_id}}


def _tool_result(result: ToolResult) -> dict[str, JSONValue]:
    block: dict[str, JSONValue] = {"type": "tool_result", "tool_use_id": result.tool_use_id}
    if isinstance(result.content, str):
        if result.content:
            block["content"] = result.content
    else:
        parts: list[JSONValue] = []
        for part in result.content:
            if isinstance(part, Image):
                parts.append(_image(part))
            elif isinstance(part, Document):
                parts.append(_document(part))
            elif part.text:
                parts.append({"type": "text", "text": part.text})
        if parts:
            block["content"] = parts
    if result.is_error:
        block["is_error"] = True
    return block


COMPACTION_KEY = "anthropic_compaction"  # one of kova._requests.COMPACTION_KEYS
"""``provider_metadata`` key of a ``compaction`` block the server answered with (its
``context_management`` compaction): kept on an empty :class:`~kova.Text` and sent back as it
came, in its place (other providers' encoders skip an empty text)."""


def compaction_text(block: Mapping[str, JSONValue]) -> Text:
    """A ``compaction`` block as kova keeps it (its ``null`` fields left out)."""
    kept: dict[str, JSONValue] = {k: v for k, v in block.items() if v is not None}
    kept["type"] = "compaction"
    return Text(text="", provider_metadata={COMPACTION_KEY: kept})


def compaction_block(block: Text) -> dict[str, JSONValue] | None:
    """The ``compaction`` block an empty :class:`~kova.Text` carries, if it carries one."""
    metadata = block.provider_metadata
    kept = metadata.get(COMPACTION_KEY) if metadata is not None else None
    return dict(kept) if isinstance(kept, dict) and kept.get("type") == "compaction" else None


def _block(block: ContentBlock, role: Role) -> dict[str, JSONValue] | None:
    """One kova block as an Anthropic block, or ``None`` when it has no place on the wire."""
    match block:
        case Text(text=text):
            if not text and block.provider_metadata is not None and role is Role.ASSISTANT:
                return compaction_block(block)
            # The API rejects empty text blocks.
            return {"type": "text", "text": text} if text else None
        case ToolUse(id=id_, name=name, input=arguments):
            return {"type": "tool_use", "id": id_, "name": name, "input": arguments}
        case ToolResult():
            return _tool_result(block)
        case Image():
            if role is Role.ASSISTANT:
                # A picture another provider's model answered with: the Messages API takes
                # no images in assistant turns (see kova.providers._media).
                return None
            return _image(block)
        case Document():
            return _document(block)
        case File():
            return _file(block)
        case Audio():
            if role is Role.ASSISTANT:
                return None  # the model's own spoken answer elsewhere (see kova.providers._media)
            raise refuse(PROVIDER, block, "the Messages API takes no audio input")
        case Thinking(text=text, signature=signature):
            # Only Anthropic's own signed blocks go back, and only in assistant turns; unsigned
            # thinking (another provider's reasoning) is display text and is dropped.
            if signature is None or role is not Role.ASSISTANT:
                return None
            return {"type": "thinking", "thinking": text, "signature": signature}
        case RedactedThinking(data=data):
            if role is not Role.ASSISTANT:
                return None
            return {"type": "redacted_thinking", "data": data}
        case _:
            assert_never(block)


def encode_messages(
    messages: Sequence[Message],
) -> tuple[str | None, list[JSONValue]]:
    """Split kova messages into Anthropic's top-level ``system`` and its ``messages`` list.

    System messages are concatenated (blank line between) into ``system``. Tool messages
    become ``tool_result`` blocks in a *user* turn. Consecutive turns of the same wire role are
    merged so roles alternate, with ``tool_result`` blocks first in a user turn as the API
    requires. Messages left without content are omitted.
    """
    check_inline_total(PROVIDER, messages, MAX_REQUEST_BYTES, "per request")
    system_parts: list[str] = []
    turns: list[tuple[str, list[dict[str, JSONValue]]]] = []
    for message in messages:
        role = message.role
        if role is Role.SYSTEM:
            text = message.text
            if text:
                system_parts.append(text)
            continue
        wire_role = "assistant" if role is Role.ASSISTANT else "user"
        blocks: list[dict[str, JSONValue]] = []
        for block in message.content:
            encoded = _block(block, role)
            if encoded is not None:
                blocks.append(encoded)
            if block.__class__ is Text and block.provider_metadata and role is Role.ASSISTANT:
                blocks.extend(_server_blocks(block))
        if not blocks:
            continue
        if turns and turns[-1][0] == wire_role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((wire_role, blocks))
    wire: list[JSONValue] = []
    for wire_role, blocks in turns:
        if wire_role == "user" and len(blocks) > 1:
            results = [b for b in blocks if b["type"] == "tool_result"]
            if results and len(results) < len(blocks):
                blocks = results + [b for b in blocks if b["type"] != "tool_result"]
        wire.append({"role": wire_role, "content": blocks})
    return ("\n\n".join(system_parts) if system_parts else None), wire


SERVER_BLOCKS_KEY = "anthropic_server_blocks"
"""``Text.provider_metadata`` key of the server tool blocks of the provider's own tool search
(``server_tool_use`` and ``tool_search_tool_result``, as received): kept in an empty text in
their place in the answer, so they go back in the same place in later requests (the tools
they loaded stay loaded). Other providers' encoders never read it."""

TOOL_SEARCH_TOOL: dict[str, JSONValue] = {
    "type": "tool_search_tool_bm25_20251119",
    "name": "tool_search_tool_bm25",
}
"""The provider's tool search tool (its BM25 variant, natural-language queries)."""

_SERVER_BLOCK_TYPES = frozenset({"server_tool_use", "tool_search_tool_result"})


def _server_blocks(block: Text) -> list[dict[str, JSONValue]]:
    metadata = block.provider_metadata
    kept = None if metadata is None else metadata.get(SERVER_BLOCKS_KEY)
    if not isinstance(kept, list):
        return []
    return [item for item in kept if isinstance(item, dict)]


def encode_deferred_tools(deferred: Sequence[ToolDefinition]) -> list[JSONValue]:
    """The provider's tool search tool and the tools it searches, marked ``defer_loading``
    (``ChatRequest.deferred_tools``): they follow the tools offered up front."""
    encoded: list[JSONValue] = [dict(TOOL_SEARCH_TOOL)]
    for tool in deferred:
        definition: dict[str, JSONValue] = {"name": tool.name}
        if tool.description:
            definition["description"] = tool.description
        definition["input_schema"] = tool.parameters
        definition["defer_loading"] = True
        encoded.append(definition)
    return encoded


def encode_tools(tools: Sequence[ToolDefinition], *, cache: bool = False) -> list[JSONValue]:
    """Tool definitions (``name``, ``description``, ``input_schema``).

    With ``cache``, kova's ``search_tools`` carries a cache breakpoint (from the first call
    on, so the entry exists when it is needed): the tools a search finds are added after it
    during a turn, which changes everything after it in the prompt, so the automatic
    breakpoint at the end of the prompt misses on the call after a search; this one still
    hits for the tools up to the search, which stay the same for the whole turn.
    """
    encoded: list[JSONValue] = []
    for tool in tools:
        definition: dict[str, JSONValue] = {"name": tool.name}
        if tool.description:
            definition["description"] = tool.description
        definition["input_schema"] = tool.parameters
        if cache and tool.name == SEARCH_TOOLS:
            definition["cache_control"] = {"type": "ephemeral"}
        encoded.append(definition)
    return encoded


def _thinking(settings: AnthropicConfig) -> dict[str, JSONValue] | None:
    thinking: dict[str, JSONValue]
    if settings.thinking_budget is not None:
        thinking = {"type": "enabled", "budget_tokens": settings.thinking_budget}
    elif settings.adaptive_thinking:
        thinking = {"type": "adaptive"}
    else:
        # Thinking off: the field is omitted, as the official SDK omits it (the API's
        # default is no thinking), on messages and count_tokens alike.
        return None
    if settings.thinking_display is not None:
        thinking["display"] = settings.thinking_display
    return thinking


def _output_config(settings: AnthropicConfig, config: InferenceConfig) -> dict[str, JSONValue]:
    output: dict[str, JSONValue] = {}
    if settings.effort is not None:
        output["effort"] = settings.effort
    if config.response_format is not None:
        output["format"] = {"type": "json_schema", "schema": config.response_format.schema}
    return output


def _prompt(
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    config: InferenceConfig,
    settings: AnthropicConfig,
) -> dict[str, JSONValue]:
    """The fields ``/v1/messages`` and ``/v1/messages/count_tokens`` share."""
    system, wire_messages = encode_messages(messages)
    body: dict[str, JSONValue] = {
        "model": config.model or settings.model,
        "messages": wire_messages,
    }
    if system is not None:
        body["system"] = system
    if tools:
        body["tools"] = encode_tools(tools, cache=settings.cache)
    thinking = _thinking(settings)
    if thinking is not None:
        body["thinking"] = thinking
    output = _output_config(settings, config)
    if output:
        body["output_config"] = output
    if settings.cache:
        body["cache_control"] = {"type": "ephemeral"}
    return body


def encode_request(
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    config: InferenceConfig,
    settings: AnthropicConfig,
    *,
    stream: bool,
) -> dict[str, JSONValue]:
    """The JSON body of ``POST /v1/messages``.

    ``config`` (the call's :class:`~kova.InferenceConfig`) overrides ``settings`` for the model
    and ``max_tokens``. Sampling fields (``temperature``, ``top_p``) are sent only when set:
    the current API version dropped them from ``messages.create``, but older models and pinned
    versions still take them.
    """
    body = _prompt(messages, tools, config, settings)
    body["max_tokens"] = config.max_tokens or settings.max_tokens
    if config.temperature is not None:
        body["temperature"] = config.temperature
    if config.top_p is not None:
        body["top_p"] = config.top_p
    if config.stop_sequences:
        body["stop_sequences"] = list(config.stop_sequences)
    if stream:
        body["stream"] = True
    return body


CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
"""The beta ``clear_tool_uses_20250919`` needs (the ``anthropic-beta`` header)."""
COMPACT_BETA = "compact-2026-01-12"
"""The beta ``compact_20260112`` needs."""


def context_management(compaction: ProviderCompaction) -> tuple[dict[str, JSONValue], list[str]]:
    """The ``context_management`` body field for ``compaction`` (its ``trigger`` set) and the
    betas it needs: ``clear_tool_uses_20250919`` (the newest ``keep_last`` tool uses kept,
    ``keep_tools`` never cleared) and ``compact_20260112`` (with its ``instructions``)."""
    trigger: dict[str, JSONValue] = {"type": "input_tokens", "value": compaction.trigger}
    edits: list[JSONValue] = []
    betas: list[str] = []
    if compaction.clear_tool_results:
        clear: dict[str, JSONValue] = {
            "type": "clear_tool_uses_20250919",
            "trigger": trigger,
            "keep": {"type": "tool_uses", "value": compaction.keep_last},
        }
        if compaction.keep_tools:
            clear["exclude_tools"] = list(compaction.keep_tools)
        edits.append(clear)
        betas.append(CONTEXT_MANAGEMENT_BETA)
    if compaction.summarize:
        compact: dict[str, JSONValue] = {"type": "compact_20260112", "trigger": dict(trigger)}
        if compaction.instructions is not None:
            compact["instructions"] = compaction.instructions
        edits.append(compact)
        betas.append(COMPACT_BETA)
    return {"edits": edits}, betas


def beta_headers(headers: SecretHeaders, betas: Sequence[str]) -> SecretHeaders:
    """``headers`` with ``betas`` added to ``anthropic-beta`` (after any the user set)."""
    present = headers.get("anthropic-beta")
    names = [name.strip() for name in present.split(",") if name.strip()] if present else []
    names += [beta for beta in betas if beta not in names]
    return headers.merged({"anthropic-beta": ",".join(names)})


def encode_count_tokens_request(
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    config: InferenceConfig,
    settings: AnthropicConfig,
) -> dict[str, JSONValue]:
    """The JSON body of ``POST /v1/messages/count_tokens``: the same prompt as
    :func:`encode_request` (system, tools, messages, thinking, output config, cache marker)
    without the generation-only fields, which that endpoint rejects."""
    return _prompt(messages, tools, config, settings)


# ---------------------------------------------------------------------------------------------
# Responses


def decode_stop_reason(raw: str | None) -> StopReason:
    """Anthropic's ``stop_reason`` as a kova :class:`~kova.StopReason`.

    ``pause_turn``, ``refusal`` and any value kova does not know become ``UNKNOWN`` with the
    raw value kept, so the agent loop stops and the host can see why.
    """
    return known_stop(raw, MESSAGES_STOP_REASONS)


def decode_usage(usage: Mapping[str, object]) -> Usage:
    """Anthropic's ``usage`` object as kova :class:`~kova.Usage` (a count that is not an
    integer is 0).

    Anthropic reports uncached input, cache reads and cache writes separately; their sum is the
    prompt size, which is what kova's ``input_tokens`` means.
    """
    uncached = usage.get("input_tokens")
    cache_read = usage.get("cache_read_input_tokens")
    cache_creation = usage.get("cache_creation_input_tokens")
    output = usage.get("output_tokens")
    details = usage.get("output_tokens_details")
    reasoning = details.get("thinking_tokens") if isinstance(details, dict) else 0
    uncached = uncached if isinstance(uncached, int) else 0
    cache_read = cache_read if isinstance(cache_read, int) else 0
    cache_creation = cache_creation if isinstance(cache_creation, int) else 0
    return Usage(
        input_tokens=uncached + cache_read + cache_creation,
        output_tokens=output if isinstance(output, int) else 0,
        cache_read_tokens=cache_read,
        cache_creation_tokens=cache_creation,
        reasoning_tokens=reasoning if isinstance(reasoning, int) else 0,
    )


def _str_field(data: Mapping[str, object], key: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise _invalid(f"{where}: field {key!r} must be a string, got {value!r}")
    return value


def decode_content_block(block: object) -> ContentBlock | None:
    """One response content block; ``None`` for block types kova does not model (server tool
    blocks, future types), which are skipped."""
    if not isinstance(block, dict):
        raise _invalid(f"a content block must be a JSON object, got {block!r}")
    match block.get("type"):
        case "text":
            return Text(text=_str_field(block, "text", "text block"))
        case "tool_use":
            arguments = block.get("input")
            if arguments is None:
                arguments = {}
            if not isinstance(arguments, dict):
                raise _invalid(f"tool_use input must be a JSON object, got {arguments!r}")
            try:
                return ToolUse(
                    id=_str_field(block, "id", "tool_use block"),
                    name=_str_field(block, "name", "tool_use block"),
                    input=arguments,
                )
            except ValueError as exc:
                raise _invalid(f"invalid tool_use block: {exc}") from exc
        case "thinking":
            signature = block.get("signature")
            return Thinking(
                text=_str_field(block, "thinking", "thinking block"),
                signature=signature if isinstance(signature, str) and signature else None,
            )
        case "redacted_thinking":
            return RedactedThinking(data=_str_field(block, "data", "redacted_thinking block"))
        case "server_tool_use" | "tool_search_tool_result" if is_tool_search(block):
            # The provider's own tool search: kept whole for the next request.
            return Text(text="", provider_metadata={SERVER_BLOCKS_KEY: [json_object(block)]})
        case "compaction":
            return compaction_text(block)
    return None


def is_tool_search(block: Mapping[str, object]) -> bool:
    if block.get("type") == "tool_search_tool_result":
        return True
    name = block.get("name")
    return isinstance(name, str) and name.startswith("tool_search_tool")


def decode_response(data: object) -> ModelResponse:
    """A non-streaming ``/v1/messages`` response body (parsed JSON) as a
    :class:`~kova.providers.ModelResponse`.

    Raises:
        InvalidResponse: the body is not a Messages API response.
    """
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise _invalid("the response is not a Messages API message (no content list)")
    content, thinking = split_thinking(data["content"], decode_content_block)
    usage = data.get("usage")
    stop = data.get("stop_reason")
    model, answer_id = data.get("model"), data.get("id")
    return ModelResponse(
        content=content,
        stop_reason=known_stop(stop if isinstance(stop, str) else None, MESSAGES_STOP_REASONS),
        usage=decode_usage(usage) if isinstance(usage, dict) else None,
        thinking=thinking,
        model=model if isinstance(model, str) and model else None,
        id=answer_id if isinstance(answer_id, str) and answer_id else None,
    )


def decode_count_tokens(data: object) -> int:
    """The ``input_tokens`` of a ``/v1/messages/count_tokens`` response."""
    if isinstance(data, dict):
        tokens = data.get("input_tokens")
        if isinstance(tokens, int) and not isinstance(tokens, bool):
            return tokens
    raise _invalid(f"count_tokens answered without input_tokens: {data!r}")


def _timestamp(value: object) -> int | None:
    if not isinstance(value, str):
        return None
    from datetime import datetime

    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None


def decode_model_page(data: object) -> tuple[list[ModelInfo], str | None]:
    """One page of ``GET /v1/models``: the models and the ``after_id`` of the next page
    (``None`` on the last page)."""
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise _invalid("the models list has no data array")
    models: list[ModelInfo] = []
    for item in data["data"]:
        if not isinstance(item, dict):
            raise _invalid(f"a model entry must be a JSON object, got {item!r}")
        display_name = item.get("display_name")
        models.append(
            ModelInfo(
                id=_str_field(item, "id", "model"),
                created=_timestamp(item.get("created_at")),
                owned_by="anthropic",
                display_name=display_name if isinstance(display_name, str) else None,
            )
        )
    last_id = data.get("last_id")
    if data.get("has_more") is True and isinstance(last_id, str) and last_id:
        return models, last_id
    return models, None
