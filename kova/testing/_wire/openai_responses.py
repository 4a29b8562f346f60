"""The server side of the OpenAI Responses API, for kova's fake server: reading a request
body back into kova values, and checking the item rules the real API enforces (a stateless
reasoning item needs its ``encrypted_content``; every ``function_call`` needs exactly one
``function_call_output`` and the other way round; assistant messages take ``output_text``).

Test scaffolding, kept out of the production codec.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..._models import (
    ContentBlock,
    Document,
    File,
    Image,
    InferenceConfig,
    JSONValue,
    Message,
    ResponseFormat,
    Role,
    Text,
    Thinking,
    ToolDefinition,
    ToolResult,
    ToolUse,
)
from ..._record import Record
from ...providers.openai._convert import parse_arguments
from ...providers.openai._responses_convert import summary_text
from ._common import tool_definition
from .openai import file_block, image_from_url

__all__ = ["DecodedRequest", "RequestRejected", "decode_request"]


class RequestRejected(ValueError):
    """The request breaks a rule the real API enforces: answer with ``status``."""

    def __init__(self, message: str, *, status: int = 400, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class DecodedRequest(Record):
    """A ``/v1/responses`` request body read back into kova values, plus the raw items."""

    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...]
    config: InferenceConfig
    stream: bool
    items: tuple[Mapping[str, JSONValue], ...]


def _parts(content: JSONValue, *, role: str) -> list[Text | Image | Document | File]:
    if isinstance(content, str):
        return [Text(text=content)]
    blocks: list[Text | Image | Document | File] = []
    if not isinstance(content, Sequence):
        raise RequestRejected(f"Invalid type for 'input[].content': {type(content).__name__}")
    for part in content:
        if not isinstance(part, Mapping):
            raise RequestRejected("Invalid content part: expected an object")
        kind = part.get("type")
        if role == "assistant" and kind in ("input_text", "input_image"):
            raise RequestRejected(
                f"Invalid value: '{kind}'. Supported values are: 'output_text' and 'refusal'.",
                code="invalid_value",
            )
        if kind in ("input_text", "output_text"):
            blocks.append(Text(text=str(part.get("text", ""))))
        elif kind == "refusal":
            blocks.append(Text(text=str(part.get("refusal", ""))))
        elif kind == "input_image":
            url = part.get("image_url")
            if isinstance(url, str):
                blocks.append(image_from_url(url))
            elif isinstance(part.get("file_id"), str):
                blocks.append(File(str(part["file_id"]), media_type="image/*"))
        elif kind == "input_file":
            try:
                blocks.append(file_block(part))
            except ValueError as exc:
                raise RequestRejected(str(exc)) from exc
    return blocks


def _output(value: JSONValue) -> str | tuple[Text | Image | Document, ...]:
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence):
        parts = _parts(value, role="tool")
        return tuple(part for part in parts if isinstance(part, Text | Image | Document))
    raise RequestRejected("Invalid type for 'output': expected a string or a list of parts")


class _History:
    """Items grouped into kova messages: adjacent assistant output into one message,
    adjacent outputs into one tool message."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    def add(self, role: Role, blocks: Sequence[ContentBlock]) -> None:
        last = self.messages[-1] if self.messages else None
        if last is not None and last.role is role and role in (Role.ASSISTANT, Role.TOOL):
            self.messages[-1] = Message(role=role, content=(*last.content, *blocks))
        else:
            self.messages.append(Message(role=role, content=tuple(blocks)))


def _check_pairs(items: Sequence[Mapping[str, JSONValue]], *, store: bool) -> None:
    calls = [str(item.get("call_id")) for item in items if item.get("type") == "function_call"]
    outputs = [
        str(item.get("call_id")) for item in items if item.get("type") == "function_call_output"
    ]
    for call_id in calls:
        if outputs.count(call_id) != 1:
            raise RequestRejected(f"No tool output found for function call {call_id}.")
    for call_id in outputs:
        if call_id not in calls:
            raise RequestRejected(
                f"No tool call found for function call output with call_id {call_id}."
            )
    for item in items:
        if item.get("type") == "reasoning" and not store and not item.get("encrypted_content"):
            raise RequestRejected(
                f"Item with id '{item.get('id')}' not found. Items are not persisted when "
                "`store` is set to false. Try again with `store` set to true, or remove this "
                "item from your input.",
                status=404,
            )


def _tools(raw: JSONValue) -> list[ToolDefinition]:
    tools: list[ToolDefinition] = []
    if raw is None:
        return tools
    if not isinstance(raw, Sequence):
        raise RequestRejected("Invalid type for 'tools': expected an array")
    for number, tool in enumerate(raw):
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            continue
        if "function" in tool or not isinstance(tool.get("name"), str):
            raise RequestRejected(
                f"Missing required parameter: 'tools[{number}].name'.", code="missing_required"
            )
        name, description = tool["name"], tool.get("description")
        tools.append(tool_definition(name, description, tool.get("parameters")))
    return tools


def _response_format(text: JSONValue) -> ResponseFormat | None:
    fmt = text.get("format") if isinstance(text, Mapping) else None
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        return None
    if "json_schema" in fmt:
        raise RequestRejected("Missing required parameter: 'text.format.name'.")
    schema = fmt.get("schema")
    description = fmt.get("description")
    return ResponseFormat(
        name=str(fmt.get("name") or "response"),
        schema=schema if isinstance(schema, Mapping) else {},
        strict=bool(fmt.get("strict", False)),
        description=description if isinstance(description, str) else None,
    )


def decode_request(body: JSONValue) -> DecodedRequest:
    """Read a ``/v1/responses`` body back into kova values.

    Raises:
        RequestRejected: the body breaks a rule the real API enforces.
    """
    if not isinstance(body, Mapping):
        raise RequestRejected("the request body is not a JSON object")
    store = body.get("store", True) is not False
    raw_input = body.get("input")
    items: list[Mapping[str, JSONValue]]
    if isinstance(raw_input, str):
        items = [{"type": "message", "role": "user", "content": raw_input}]
    elif isinstance(raw_input, Sequence):
        items = []
        for item in raw_input:
            if not isinstance(item, Mapping):
                raise RequestRejected("Invalid type for 'input[]': expected an object")
            items.append(item)
    else:
        raise RequestRejected("Missing required parameter: 'input'.")
    _check_pairs(items, store=store)
    history = _History()
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        history.add(Role.SYSTEM, [Text(text=instructions)])
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            role = str(item.get("role"))
            blocks = _parts(item.get("content"), role=role)
            if role in ("system", "developer"):
                history.add(
                    Role.SYSTEM, [Text(text="".join(b.text for b in blocks if isinstance(b, Text)))]
                )
            elif role == "user":
                history.add(Role.USER, blocks)
            elif role == "assistant":
                history.add(Role.ASSISTANT, [b for b in blocks if isinstance(b, Text)])
            else:
                raise RequestRejected(f"Invalid value: '{role}' for 'input[].role'.")
        elif kind == "reasoning":
            history.add(Role.ASSISTANT, [Thinking(text=summary_text(item))])
        elif kind == "function_call":
            arguments = item.get("arguments")
            if not isinstance(arguments, str):
                raise RequestRejected("Invalid type for 'arguments': expected a string")
            parsed, raw = parse_arguments(arguments)
            history.add(
                Role.ASSISTANT,
                [
                    ToolUse(
                        id=str(item.get("call_id")),
                        name=str(item.get("name") or "unknown"),
                        input=parsed,
                        raw_arguments=raw,
                    )
                ],
            )
        elif kind == "function_call_output":
            history.add(
                Role.TOOL,
                [
                    ToolResult(
                        tool_use_id=str(item.get("call_id")), content=_output(item.get("output"))
                    )
                ],
            )
    max_tokens = body.get("max_output_tokens")
    if isinstance(max_tokens, int) and max_tokens < 16:
        raise RequestRejected(
            f"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, "
            f"but got {max_tokens} instead.",
            code="integer_below_min_value",
        )
    temperature = body.get("temperature")
    top_p = body.get("top_p")
    model = body.get("model")
    return DecodedRequest(
        messages=tuple(history.messages),
        tools=tuple(_tools(body.get("tools"))),
        config=InferenceConfig(
            model=model if isinstance(model, str) else None,
            max_tokens=max_tokens if isinstance(max_tokens, int) else None,
            temperature=float(temperature) if isinstance(temperature, int | float) else None,
            top_p=float(top_p) if isinstance(top_p, int | float) else None,
            response_format=_response_format(body.get("text")),
        ),
        stream=body.get("stream") is True,
        items=tuple(items),
    )
