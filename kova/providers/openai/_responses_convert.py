"""Pure translation between kova values and the OpenAI Responses API (``/v1/responses``).

No I/O and no clock. The request is a list of typed ``input`` items, the answer a list of
``output`` items (see ``wire/openai-responses.md``).

**Reasoning items.** A reasoning model's answer holds ``reasoning`` items (an encrypted blob,
``encrypted_content``, and an optional summary) ahead of the message or function call they led
to. With ``store: false`` the next call of a tool loop must carry them back unchanged, with
their ids, right before those items. kova keeps them in the ``provider_metadata`` of the
block that followed them (the :class:`~kova.ToolUse` of a ``function_call``, the
:class:`~kova.Text` of a ``message``) under :data:`ITEM_KEY`, with that item's own id and the
endpoint and model that produced them. So they travel with their follower (dropping one drops
both, as the API requires), other providers' encoders never see them (they read only their
own keys), and this encoder sends them back only to the endpoint and model that made them:
elsewhere it drops them and strips the paired item ids (``call_id`` still pairs calls with
their outputs). The summary text is the response's ``thinking``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, assert_never

from ..._errors import InvalidRequest, ProviderError
from ..._models import (
    Audio,
    Document,
    File,
    Image,
    InferenceConfig,
    JSONObject,
    JSONValue,
    Message,
    ModelResponse,
    ResponseFormat,
    Role,
    StopReason,
    Text,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from .._codec import optional_str
from .._media import check_inline_total, refuse
from ._convert import (
    MAX_FILE_BYTES,
    UserBlock,
    arguments_text,
    decode_arguments,
    encode_arguments,
    error_object,
    file_data,
    filename,
    image_url,
    usage_of,
)
from ._responses_models import reasons

if TYPE_CHECKING:
    from ._responses_config import OpenAiResponsesConfig

__all__ = [
    "ITEM_KEY",
    "PROVIDER",
    "Origin",
    "decode_response",
    "decode_usage",
    "encode_count_request",
    "encode_deferred_tools",
    "encode_input",
    "encode_request",
    "encode_usage",
    "is_strict_schema",
    "item_metadata",
    "compaction_item",
    "searched_item",
    "stop_reason_of",
    "wants_encrypted_reasoning",
]

PROVIDER = "openai-responses"

_invalid = partial(ProviderError.invalid_response, provider=PROVIDER)
"""An :class:`~kova.InvalidResponse` of this provider: the answer is not what the API sends."""

ITEM_KEY = "openai_responses"
"""``provider_metadata`` key of what a Responses output item needs echoed back: ``id``
(the item's id), ``reasoning`` (the reasoning items before it, as received), ``phase``,
``refusal``, and ``endpoint`` / ``model`` (where they came from)."""


class Origin:
    """Where a response came from: the endpoint (base URL) and the model that answered."""

    __slots__ = ("endpoint", "model")

    def __init__(self, endpoint: str, model: str | None) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.model = model


# ---------------------------------------------------------------------------------------------
# Requests


def is_strict_schema(schema: JSONValue) -> bool:
    """Whether ``schema`` already keeps OpenAI's strict-mode rules: every object closes with
    ``additionalProperties: false`` and requires all of its properties, and no keyword
    strict mode rejects is used. Sending such a schema as ``strict: true`` changes nothing
    about what it accepts; any other schema goes as ``strict: false`` (the API would otherwise
    make its optional properties required)."""
    if isinstance(schema, Sequence) and not isinstance(schema, str):
        return all(is_strict_schema(item) for item in schema)
    if not isinstance(schema, Mapping):
        return True
    if any(key in _NOT_STRICT for key in schema):
        return False
    kind = schema.get("type")
    is_object = kind == "object" or (
        isinstance(kind, Sequence) and not isinstance(kind, str) and "object" in kind
    )
    if is_object or "properties" in schema:
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False or not isinstance(properties, Mapping):
            return False
        required = schema.get("required", [])
        if not isinstance(required, Sequence) or set(required) != set(properties):
            return False
    for key in ("properties", "$defs", "definitions"):
        children = schema.get(key)
        if isinstance(children, Mapping) and not all(
            is_strict_schema(child) for child in children.values()
        ):
            return False
    return all(is_strict_schema(schema[key]) for key in ("items", "anyOf") if key in schema)


_NOT_STRICT = frozenset(
    {"allOf", "oneOf", "not", "if", "then", "else", "patternProperties", "dependentRequired",
     "dependentSchemas", "unevaluatedProperties", "propertyNames", "minProperties",
     "maxProperties"}
)  # fmt: skip


def encode_tools(tools: Sequence[ToolDefinition], *, strict: bool | None = None) -> list[JSONValue]:
    """Function tools in the Responses shape: flat (``name`` at the top), ``strict`` always
    sent (see :func:`is_strict_schema` for ``strict=None``)."""
    encoded: list[JSONValue] = []
    for tool in tools:
        function: dict[str, JSONValue] = {"type": "function", "name": tool.name}
        if tool.description:
            function["description"] = tool.description
        function["parameters"] = tool.parameters
        function["strict"] = is_strict_schema(tool.parameters) if strict is None else strict
        encoded.append(function)
    return encoded


def encode_deferred_tools(
    deferred: Sequence[ToolDefinition], *, strict: bool | None = None
) -> list[JSONValue]:
    """The hosted ``tool_search`` tool and the function tools it searches, marked
    ``defer_loading`` (``ChatRequest.deferred_tools``): they follow the tools offered up
    front."""
    encoded: list[JSONValue] = [{"type": "tool_search"}]
    for function in encode_tools(deferred, strict=strict):
        assert isinstance(function, dict)
        function["defer_loading"] = True
        encoded.append(function)
    return encoded


def searched_item(item: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """A ``tool_search_call`` or ``tool_search_output`` item as it goes back (null fields
    dropped): kept, like reasoning, with the item that follows it."""
    return _compact(item)


def compaction_item(item: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """A ``compaction`` output item (the server's ``context_management`` compaction) as it
    goes back, in the input item form (``type``, ``id``, ``encrypted_content``): kept, like
    reasoning, with the item that follows it, so the server finds it in its place."""
    return {
        key: item[key] for key in ("type", "id", "encrypted_content") if item.get(key) is not None
    }


_SEARCH_ITEMS = frozenset({"tool_search_call", "tool_search_output"})
"""The hosted tool search's output items: they go back before the item that followed them
(the tools they loaded stay loaded)."""


def _image_part(image: Image) -> dict[str, JSONValue]:
    return {"type": "input_image", "image_url": image_url(image), "detail": "auto"}


def _file_part(block: Document | File) -> dict[str, JSONValue]:
    """An ``input_file`` part (the SDK's ``ResponseInputFileParam``); a hosted image goes
    as an ``input_image`` by ``file_id``."""
    if isinstance(block, File):
        if (block.media_type or "").startswith("image/"):
            return {"type": "input_image", "file_id": block.file_id, "detail": "auto"}
        return {"type": "input_file", "file_id": block.file_id}
    if block.file_id is not None:
        return {"type": "input_file", "file_id": block.file_id}
    if block.url is not None:
        return {"type": "input_file", "file_url": block.url}
    return {"type": "input_file", "filename": filename(block), "file_data": file_data(block)}


def _input_parts(blocks: Sequence[UserBlock]) -> list[JSONValue]:
    parts: list[JSONValue] = []
    for block in blocks:
        match block:
            case Text():
                parts.append({"type": "input_text", "text": block.text})
            case Image():
                parts.append(_image_part(block))
            case Document() | File():
                parts.append(_file_part(block))
            case Audio():
                raise refuse(
                    PROVIDER,
                    block,
                    "the Responses API takes no audio in messages (use OpenAiProvider, Chat "
                    "Completions, with an audio model)",
                )
            case _:
                assert_never(block)
    return parts


def _tool_output(result: ToolResult) -> dict[str, JSONValue]:
    output: JSONValue = result.text
    if not isinstance(result.content, str) and any(
        isinstance(part, Image | Document) for part in result.content
    ):
        output = _input_parts(result.content)
    return {"type": "function_call_output", "call_id": result.tool_use_id, "output": output}


_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}")


def _same_model(stored: JSONValue, target: str, *, azure: bool) -> bool:
    """Whether reasoning made by ``stored`` (the model id the API answered with) may go to
    ``target``: the same id, or an alias and its dated snapshot (OpenAI answers ``gpt-5.4``
    with ``gpt-5.4-2026-03-05``). Another model of a family is another model: gpt-5-mini's
    reasoning does not go to gpt-5, nor o3-mini's to o3. Azure's ``model`` is a deployment
    name that says nothing about the model, so there only the endpoint counts."""
    if azure or not isinstance(stored, str):
        return True
    if stored == target:
        return True
    shorter, longer = sorted((stored, target), key=len)
    return longer.startswith(shorter) and _SNAPSHOT.fullmatch(longer[len(shorter) :]) is not None


class _Replay:
    """What the items of earlier answers may carry back to this request."""

    __slots__ = ("azure", "endpoint", "model")

    def __init__(self, endpoint: str, model: str, *, azure: bool) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.model = model
        self.azure = azure

    def keeps(self, meta: Mapping[str, JSONValue]) -> bool:
        return meta.get("endpoint") == self.endpoint and _same_model(
            meta.get("model"), self.model, azure=self.azure
        )


def _item_meta(metadata: JSONObject | None) -> Mapping[str, JSONValue] | None:
    if not metadata:
        return None
    meta = metadata.get(ITEM_KEY)
    return meta if isinstance(meta, Mapping) else None


def _replayed(
    meta: Mapping[str, JSONValue] | None, replay: _Replay, out: list[JSONValue]
) -> str | None:
    """Append the reasoning items that came before a block and return the block's item id,
    if they may go back to this endpoint and model; else nothing and ``None``."""
    if meta is None or not replay.keeps(meta):
        return None
    reasoning = meta.get("reasoning")
    if isinstance(reasoning, Sequence) and not isinstance(reasoning, str):
        out.extend(reasoning)
    item_id = meta.get("id")
    return item_id if isinstance(item_id, str) and item_id else None


def _assistant_items(message: Message, replay: _Replay, out: list[JSONValue]) -> None:
    for block in message.content:
        if isinstance(block, ToolUse):
            meta = _item_meta(block.provider_metadata)
            call: dict[str, JSONValue] = {"type": "function_call"}
            item_id = _replayed(meta, replay, out)
            if item_id is not None:
                call["id"] = item_id
            call["call_id"] = block.id
            call["name"] = block.name
            call["arguments"] = encode_arguments(block)
            out.append(call)
        elif isinstance(block, Text):
            meta = _item_meta(block.provider_metadata)
            item_id = _replayed(meta, replay, out)
            if item_id is None:
                if block.text:
                    out.append({"type": "message", "role": "assistant", "content": block.text})
                continue
            assert meta is not None
            part: dict[str, JSONValue] = (
                {"type": "refusal", "refusal": block.text}
                if meta.get("refusal") is True
                else {"type": "output_text", "text": block.text, "annotations": []}
            )
            item: dict[str, JSONValue] = {
                "type": "message",
                "role": "assistant",
                "id": item_id,
                "status": "completed",
                "content": [part],
            }
            phase = meta.get("phase")
            if isinstance(phase, str):
                item["phase"] = phase
            out.append(item)
        # Thinking / RedactedThinking (other providers' reasoning) and images: not sent.


def encode_input(
    messages: Sequence[Message], replay: _Replay
) -> tuple[str | None, list[JSONValue]]:
    """``(instructions, input)``: the leading system messages become ``instructions``, the
    rest of the history ``input`` items (tool results as ``function_call_output``)."""
    check_inline_total(PROVIDER, messages, MAX_FILE_BYTES, "per request")
    start = 0
    system: list[str] = []
    while start < len(messages) and messages[start].role is Role.SYSTEM:
        system.append(messages[start].text)
        start += 1
    items: list[JSONValue] = []
    for message in messages[start:]:
        for block in message.content:
            if isinstance(block, ToolResult):
                items.append(_tool_output(block))
        match message.role:
            case Role.SYSTEM:
                items.append({"type": "message", "role": "system", "content": message.text})
            case Role.USER:
                parts = [b for b in message.content if isinstance(b, UserBlock)]
                if parts:
                    items.append(
                        {"type": "message", "role": "user", "content": _input_parts(parts)}
                    )
            case Role.ASSISTANT:
                _assistant_items(message, replay, items)
            case Role.TOOL:
                pass  # its ToolResult blocks went above
            case _:
                assert_never(message.role)
    return ("\n\n".join(system) if system else None), items


def _text_format(response_format: ResponseFormat) -> dict[str, JSONValue]:
    fmt: dict[str, JSONValue] = {"type": "json_schema", "name": response_format.name}
    if response_format.description:
        fmt["description"] = response_format.description
    fmt["schema"] = response_format.schema
    fmt["strict"] = response_format.strict
    return {"format": fmt}


def _reasoning(config: OpenAiResponsesConfig) -> dict[str, JSONValue] | None:
    reasoning: dict[str, JSONValue] = {}
    if config.reasoning_effort is not None:
        reasoning["effort"] = config.reasoning_effort
    if config.reasoning_summary is not None:
        reasoning["summary"] = config.reasoning_summary
    return reasoning or None


def _shared_fields(
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    inference: InferenceConfig,
    config: OpenAiResponsesConfig,
) -> dict[str, JSONValue]:
    """The fields ``/responses`` and ``/responses/input_tokens`` both take."""
    model = inference.model or config.model
    replay = _Replay(config.base_url, model, azure=config.uses_api_key_header)
    instructions, items = encode_input(messages, replay)
    body: dict[str, JSONValue] = {"model": model}
    if instructions is not None:
        body["instructions"] = instructions
    body["input"] = items
    if tools:
        body["tools"] = encode_tools(tools, strict=config.strict_tools)
        if config.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = config.parallel_tool_calls
    reasoning = _reasoning(config)
    if reasoning is not None:
        body["reasoning"] = reasoning
    if inference.response_format is not None:
        body["text"] = _text_format(inference.response_format)
    return body


def encode_request(
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    inference: InferenceConfig,
    config: OpenAiResponsesConfig,
    *,
    stream: bool,
    refused: Collection[str] = (),
) -> dict[str, JSONValue]:
    """The JSON body of one ``POST /v1/responses``.

    ``inference`` wins over ``config`` for ``model``, ``max_tokens`` and ``temperature``.
    ``refused``: the models that refused ``reasoning.encrypted_content`` (see
    :func:`wants_encrypted_reasoning`).

    Raises:
        InvalidRequest: stop sequences were asked for (the Responses API has none).
    """
    if inference.stop_sequences:
        raise InvalidRequest(
            "the OpenAI Responses API takes no stop sequences (InferenceConfig.stop_sequences); "
            "use the Chat Completions provider (OpenAiCompatibleProvider) for them",
            provider=PROVIDER,
        )
    body = _shared_fields(messages, tools, inference, config)
    max_tokens = (
        inference.max_tokens if inference.max_tokens is not None else config.max_output_tokens
    )
    if max_tokens is not None:
        body["max_output_tokens"] = max_tokens
    temperature = inference.temperature if inference.temperature is not None else config.temperature
    if temperature is not None:
        body["temperature"] = temperature
    if inference.top_p is not None:
        body["top_p"] = inference.top_p
    if config.prompt_cache_key is not None:
        body["prompt_cache_key"] = config.prompt_cache_key
    body["store"] = config.store
    if wants_encrypted_reasoning(config, inference.model or config.model, refused):
        body["include"] = ["reasoning.encrypted_content"]
    if stream:
        body["stream"] = True
    return body


def wants_encrypted_reasoning(
    config: OpenAiResponsesConfig, model: str, refused: Collection[str] = ()
) -> bool:
    """Whether a request to ``model`` asks for ``reasoning.encrypted_content``: only without
    ``store``; then as ``config.encrypted_reasoning`` says, else not for a model that
    refused it before (``refused``), nor for one that does not reason by
    :func:`~kova.providers.openai._responses_models.reasons` (a model it does not know is
    asked)."""
    if config.store:
        return False
    if config.encrypted_reasoning is not None:
        return config.encrypted_reasoning
    if model in refused:
        return False
    return reasons(model) is not False


def encode_count_request(
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    inference: InferenceConfig,
    config: OpenAiResponsesConfig,
) -> dict[str, JSONValue]:
    """The body of ``POST /v1/responses/input_tokens``: the create fields it takes."""
    return _shared_fields(messages, tools, inference, config)


# ---------------------------------------------------------------------------------------------
# Responses


_USAGE_KEYS = ("input_tokens", "output_tokens", "input_tokens_details", "output_tokens_details")


def decode_usage(usage: object) -> Usage | None:
    """``usage`` with cached input tokens and reasoning tokens; ``None`` if absent."""
    return usage_of(usage, _USAGE_KEYS)


def encode_usage(usage: Usage) -> dict[str, JSONValue]:
    """``usage`` as a server sends it (kova's OpenAI-compatible routes, the fake server)."""
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
    }


def stop_reason_of(
    status: object, incomplete_details: object, *, has_calls: bool, refused: bool
) -> StopReason:
    """The stop reason of a finished response (``failed`` is an error, not a stop)."""
    if status == "incomplete":
        reason = (
            incomplete_details.get("reason") if isinstance(incomplete_details, Mapping) else None
        )
        if reason == "max_output_tokens":
            return StopReason.MAX_TOKENS
        return StopReason.unknown(reason if isinstance(reason, str) and reason else "incomplete")
    if has_calls:
        return StopReason.TOOL_USE
    if refused:
        return StopReason.unknown("refusal")
    return StopReason.END_TURN


response_error = partial(error_object, provider=PROVIDER)
"""An ``error`` object (a failed response's, or an ``error`` event's), classified: see
:func:`~kova.providers.openai._convert.error_object`."""


def _compact(value: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """An item without its ``null`` fields (the API rejects some of them on input)."""
    return {key: item for key, item in value.items() if item is not None}


def item_metadata(
    item: Mapping[str, JSONValue],
    reasoning: list[JSONValue],
    origin: Origin,
    extra: JSONObject | None = None,
    *,
    refusal: bool = False,
) -> JSONObject | None:
    """The ``provider_metadata`` of a block decoded from ``item``: its id, phase, the
    reasoning items before it and the origin (see the module docstring), plus ``extra``
    (the exact argument text of a call). ``None`` for an item a compatible server sent
    without an id and with no reasoning before it."""
    item_id = item.get("id")
    meta: dict[str, JSONValue] = {}
    if isinstance(item_id, str) and item_id:
        meta["id"] = item_id
    if reasoning:
        meta["reasoning"] = list(reasoning)
    metadata: dict[str, JSONValue] = dict(extra) if extra else {}
    if meta:
        phase = item.get("phase")
        if isinstance(phase, str):
            meta["phase"] = phase
        if refusal:
            meta["refusal"] = True
        meta["endpoint"] = origin.endpoint
        if origin.model is not None:
            meta["model"] = origin.model
        metadata[ITEM_KEY] = meta
    return metadata or None


def summary_text(item: Mapping[str, JSONValue]) -> str:
    """A reasoning item's display text: its summary paragraphs, else (compatible servers)
    its ``reasoning_text`` content."""
    for key, kind in (("summary", "summary_text"), ("content", "reasoning_text")):
        parts = item.get(key)
        if isinstance(parts, Sequence) and not isinstance(parts, str):
            texts = [
                text
                for part in parts
                if isinstance(part, Mapping)
                and part.get("type", kind) == kind
                and isinstance(text := part.get("text"), str)
            ]
            if texts:
                return "\n\n".join(texts)
    return ""


def reasoning_item(item: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """A reasoning output item as it goes back: null fields dropped, ``summary`` present."""
    kept = _compact(item)
    kept.setdefault("summary", [])
    return kept


def message_text(item: Mapping[str, JSONValue]) -> tuple[str, bool]:
    """``(text, refused)`` of an output message: its ``output_text`` parts, or its refusal."""
    content = item.get("content")
    if not isinstance(content, Sequence) or isinstance(content, str):
        if content is None:
            return "", False
        raise _invalid("a message item's content should be a list")
    texts: list[str] = []
    refusals: list[str] = []
    for part in content:
        if not isinstance(part, Mapping):
            raise _invalid("a message content part should be a JSON object")
        kind = part.get("type")
        if kind == "output_text":
            text = part.get("text")
            if not isinstance(text, str):
                raise _invalid("an output_text part's text should be a string")
            texts.append(text)
        elif kind == "refusal":
            refusal = part.get("refusal")
            if isinstance(refusal, str):
                refusals.append(refusal)
    if texts:
        return "".join(texts), False
    return "".join(refusals), bool(refusals)


def _str_field(item: Mapping[str, JSONValue], key: str, what: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise _invalid(f"a {what} item's {key} should be a string, got {type(value).__name__}")
    return value


def function_call(
    item: Mapping[str, JSONValue], reasoning: list[JSONValue], origin: Origin
) -> ToolUse:
    """A ``function_call`` output item as a :class:`ToolUse` (``id`` is its ``call_id``)."""
    parsed, raw, kept = decode_arguments(arguments_text(item.get("arguments")))
    call_id = _str_field(item, "call_id", "function_call")
    name = _str_field(item, "name", "function_call")
    return ToolUse(
        id=call_id or "call_0",
        name=name or "unknown",
        input=parsed,
        raw_arguments=raw,
        provider_metadata=item_metadata(item, reasoning, origin, kept),
    )


def decode_response(body: JSONValue, *, endpoint: str) -> ModelResponse:
    """A non-streamed ``response`` object as a :class:`ModelResponse`.

    Raises:
        ProviderError: the response ``failed`` (classified by its error code), or the body is
            not a response (:class:`~kova.InvalidResponse`).
    """
    if not isinstance(body, Mapping):
        raise _invalid("the response is not a JSON object")
    status = body.get("status")
    error = body.get("error")
    if status == "failed" or (error is not None and status is None):
        raise response_error(error)
    output = body.get("output")
    if not isinstance(output, Sequence) or isinstance(output, str):
        raise _invalid("the response has no output list")
    model = body.get("model")
    origin = Origin(endpoint, model if isinstance(model, str) else None)
    content: list[Text | ToolUse] = []
    thinking: list[str] = []
    reasoning: list[JSONValue] = []
    refused = False
    saw_text = False
    for item in output:
        if not isinstance(item, Mapping):
            raise _invalid("an output item should be a JSON object")
        kind = item.get("type")
        if kind == "reasoning":
            text = summary_text(item)
            if text:
                thinking.append(text)
            reasoning.append(reasoning_item(item))
        elif kind == "message":
            text, was_refusal = message_text(item)
            refused = refused or was_refusal
            saw_text = saw_text or (bool(text) and not was_refusal)
            metadata = item_metadata(item, reasoning, origin, refusal=was_refusal)
            content.append(Text(text=text, provider_metadata=metadata))
            reasoning = []
        elif kind == "function_call":
            content.append(function_call(item, reasoning, origin))
            reasoning = []
        elif kind in _SEARCH_ITEMS:
            reasoning.append(searched_item(item))
        elif kind == "compaction":
            reasoning.append(compaction_item(item))
        # Other item types (hosted tools) are not kova's; reasoning before them is dropped
        # with them, as a reasoning item must not go back without its follower.
    has_calls = any(isinstance(block, ToolUse) for block in content)
    return ModelResponse(
        content=[b for b in content if not isinstance(b, Text) or b.text or b.provider_metadata],
        stop_reason=stop_reason_of(
            status,
            body.get("incomplete_details"),
            has_calls=has_calls,
            refused=refused and not saw_text,
        ),
        usage=decode_usage(body.get("usage")),
        thinking="\n\n".join(thinking) or None,
        model=optional_str(body.get("model")),
        id=optional_str(body.get("id")),
    )


def decode_input_tokens(body: JSONValue) -> int:
    """``{"object": "response.input_tokens", "input_tokens": n}`` -> ``n``."""
    count = body.get("input_tokens") if isinstance(body, Mapping) else None
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise _invalid("the input token count has no input_tokens number")
    return count
