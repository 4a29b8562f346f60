"""Content blocks and messages, and a history as plain JSON.

History belongs to the host. Every :class:`Message` converts to plain JSON with
:meth:`Message.to_dict` and back with :meth:`Message.from_dict` without loss, so a host can
store it anywhere (a database row, a file, a queue) and hand it back to a later turn, even one
that runs on another provider.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeAlias, assert_never

from ._errors import SerializationError
from ._json import MAX_JSON_DEPTH, JsonNestingError, check_depth, depth_exceeds, dumps, loads
from ._record import Record, set_field

if TYPE_CHECKING:
    from typing import Self

__all__ = [
    "ContentBlock",
    "Image",
    "JSONObject",
    "JSONValue",
    "Message",
    "RedactedThinking",
    "Role",
    "Text",
    "Thinking",
    "ToolResult",
    "ToolUse",
    "block_from_dict",
    "block_to_dict",
    "messages_from_dicts",
    "messages_from_json",
    "messages_to_dicts",
    "messages_to_json",
]

JSONValue: TypeAlias = (
    "bool | int | float | str | Sequence[JSONValue] | Mapping[str, JSONValue] | None"
)
"""Any value that plain JSON can carry (a recursive alias; ``json.loads`` returns one)."""

JSONObject: TypeAlias = "Mapping[str, JSONValue]"
"""A JSON object."""


def _serialization_error(message: str) -> Exception:
    return SerializationError(message)


class Role(enum.StrEnum):
    """Who said a message."""

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


def _non_empty(name: str, value: str) -> str:
    if not value:
        raise ValueError(f"{name} must not be empty")
    return value


# ---------------------------------------------------------------------------------------------
# Content blocks


class Text(Record):
    """Plain text."""

    text: str
    provider_metadata: JSONObject | None = None
    """Opaque data a provider needs echoed back on this text (e.g. Gemini's
    ``thoughtSignature``); only that provider's encoder reads it, the others ignore it."""


class Image(Record):
    """An image, either inline (base64 ``data`` with its ``media_type``) or by ``url``."""

    media_type: str | None = None
    """MIME type such as ``image/png``; required with ``data``."""
    data: str | None = None
    """Base64-encoded bytes (no ``data:`` prefix)."""
    url: str | None = None
    """A URL the provider fetches itself (not every provider supports this)."""

    def __post_init__(self) -> None:
        if (self.data is None) == (self.url is None):
            raise ValueError("Image needs exactly one of data (base64) or url")
        if self.data is not None and not self.media_type:
            raise ValueError("Image with inline data needs a media_type such as 'image/png'")


class ToolUse(Record):
    """The model asks for a tool call."""

    id: str
    name: str
    input: JSONObject
    """The parsed arguments (always a JSON object, nested at most
    :data:`~kova._json.MAX_JSON_DEPTH` deep: deeper is a ``ValueError``)."""
    provider_metadata: JSONObject | None
    """Opaque data a provider needs echoed back (e.g. Gemini's ``thoughtSignature``)."""
    raw_arguments: str | None
    """Set only when the model's arguments were not a JSON object: the raw text it sent
    (``input`` is then empty). The agent answers such a call with an in-band error result."""

    def __init__(
        self,
        *,
        id: str,  # the field's name
        name: str,
        input: JSONObject | None = None,  # the field's name
        provider_metadata: JSONObject | None = None,
        raw_arguments: str | None = None,
    ) -> None:
        set_field(self, "id", _non_empty("id", id))
        set_field(self, "name", _non_empty("name", name))
        arguments = {} if input is None else input
        if arguments and depth_exceeds(arguments):
            raise JsonNestingError(
                f"ToolUse.input is nested more than {MAX_JSON_DEPTH} levels deep"
            )
        set_field(self, "input", arguments)
        set_field(self, "provider_metadata", provider_metadata)
        set_field(self, "raw_arguments", raw_arguments)


class ToolResult(Record):
    """The outcome of a tool call.

    A tool returns one without ``tool_use_id``; the agent loop stamps the id of the call it
    answers before the result enters history.
    """

    content: str | tuple[Text | Image, ...] = ""
    """The result text, or text and image parts."""
    is_error: bool = False
    tool_use_id: str = ""
    structured: JSONValue | None = None
    """A machine-readable form of the result, for the host (MCP's ``structuredContent``).

    Providers send the model ``content`` only; a tool that returns structured data also puts
    its text form (usually the JSON) into ``content``."""

    @property
    def text(self) -> str:
        """The text of the result (image parts omitted)."""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content if isinstance(part, Text))

    @classmethod
    def error(cls, message: str, *, tool_use_id: str = "") -> Self:
        """An error result the model sees and can recover from."""
        return cls(content=message, is_error=True, tool_use_id=tool_use_id)


class Thinking(Record):
    """Reasoning text. ``signature`` is set when the provider signed it (Anthropic, Bedrock
    Claude): such a block must be sent back unchanged on the next request of a tool loop."""

    text: str
    signature: str | None = None
    provider_metadata: JSONObject | None = None
    """Opaque data one provider needs echoed back with this block (Gemini's
    ``thoughtSignature`` on a thought part); only that provider's encoder reads it, and the
    others treat the block by its ``signature`` (unsigned: dropped)."""


class RedactedThinking(Record):
    """Reasoning the provider encrypted; echoed back unchanged like a signed ``Thinking``."""

    data: str


ContentBlock: TypeAlias = Text | Image | ToolUse | ToolResult | Thinking | RedactedThinking


def _to_blocks(content: str | Iterable[ContentBlock]) -> tuple[ContentBlock, ...]:
    if isinstance(content, str):
        return (Text(text=content),)
    if not isinstance(content, Iterable):
        raise TypeError(
            f"message content must be a str or content blocks, got {type(content).__name__}"
        )
    return tuple(content)


class HasContent:
    """``text`` and ``tool_uses`` of a value with ``content`` blocks (a message, a response)."""

    __slots__ = ()

    content: tuple[ContentBlock, ...]

    @property
    def text(self) -> str:
        """The concatenated text blocks."""
        return "".join(block.text for block in self.content if isinstance(block, Text))

    @property
    def tool_uses(self) -> tuple[ToolUse, ...]:
        """The tool calls among the blocks, in order."""
        return tuple(block for block in self.content if isinstance(block, ToolUse))


class Message(Record, HasContent):
    """One message of a conversation."""

    role: Role
    content: tuple[ContentBlock, ...]

    def __init__(self, *, role: Role | str, content: Iterable[ContentBlock]) -> None:
        set_field(self, "role", role if role.__class__ is Role else Role(role))
        set_field(self, "content", content if content.__class__ is tuple else tuple(content))

    @classmethod
    def user(cls, content: str | Iterable[ContentBlock]) -> Self:
        return cls(role=Role.USER, content=_to_blocks(content))

    @classmethod
    def assistant(cls, content: str | Iterable[ContentBlock]) -> Self:
        return cls(role=Role.ASSISTANT, content=_to_blocks(content))

    @classmethod
    def system(cls, text: str) -> Self:
        return cls(role=Role.SYSTEM, content=(Text(text=text),))

    @classmethod
    def tool_results(cls, results: Iterable[ToolResult]) -> Self:
        """A ``tool`` message answering the tool calls of the previous assistant message."""
        blocks = tuple(results)
        for block in blocks:
            if not block.tool_use_id:
                raise ValueError("a ToolResult in history needs the tool_use_id it answers")
        return cls(role=Role.TOOL, content=blocks)

    def to_dict(self) -> dict[str, JSONValue]:
        """Plain JSON for storage; :meth:`from_dict` restores an equal message."""
        return {"role": self.role.value, "content": [block_to_dict(b) for b in self.content]}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Self:
        """Rebuild a message from :meth:`to_dict` output.

        Raises:
            SerializationError: the data is not a stored message.
        """
        role = data.get("role")
        content = data.get("content")
        if not isinstance(role, str) or role not in Role.__members__.values():
            raise _serialization_error(f"message role must be one of {list(Role)}, got {role!r}")
        if not isinstance(content, list):
            raise _serialization_error("message content must be a list of blocks")
        return cls(role=Role(role), content=tuple(block_from_dict(b) for b in content))


def block_to_dict(block: ContentBlock) -> dict[str, JSONValue]:
    """One content block as plain JSON, tagged with ``type``."""
    match block:
        case Text(text=text, provider_metadata=None):
            return {"type": "text", "text": text}
        case Text(text=text, provider_metadata=metadata):
            return {"type": "text", "text": text, "provider_metadata": metadata}
        case Image(media_type=media_type, data=data, url=url):
            return {"type": "image", "media_type": media_type, "data": data, "url": url}
        case ToolUse(id=id_, name=name, input=input_, provider_metadata=metadata):
            stored_use: dict[str, JSONValue] = {
                "type": "tool_use",
                "id": id_,
                "name": name,
                "input": input_,
                "provider_metadata": metadata,
            }
            if block.raw_arguments is not None:
                stored_use["raw_arguments"] = block.raw_arguments
            return stored_use
        case ToolResult(content=content, is_error=is_error, tool_use_id=tool_use_id):
            stored: JSONValue
            if isinstance(content, str):
                stored = content
            else:
                stored = [block_to_dict(part) for part in content]
            result: dict[str, JSONValue] = {
                "type": "tool_result",
                "tool_use_id": tool_use_id,
                "content": stored,
                "is_error": is_error,
            }
            if block.structured is not None:
                result["structured"] = block.structured
            return result
        case Thinking(text=text, signature=signature, provider_metadata=None):
            return {"type": "thinking", "text": text, "signature": signature}
        case Thinking(text=text, signature=signature, provider_metadata=metadata):
            return {
                "type": "thinking",
                "text": text,
                "signature": signature,
                "provider_metadata": metadata,
            }
        case RedactedThinking(data=data):
            return {"type": "redacted_thinking", "data": data}
        case _:
            assert_never(block)


def _str(data: Mapping[str, object], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise _serialization_error(f"block field {key!r} must be a string, got {value!r}")
    return value


def _opt_str(data: Mapping[str, object], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise _serialization_error(f"block field {key!r} must be a string or null")
    return value


def _object(value: object, key: str) -> JSONObject:
    if not isinstance(value, dict):
        raise _serialization_error(f"block field {key!r} must be a JSON object")
    return value


def _json_value(value: object) -> JSONValue:
    """``value`` checked to be plain JSON (what ``json.loads`` returns)."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list):
        return [_json_value(item) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: _json_value(item) for key, item in value.items()}
    raise _serialization_error(f"not a JSON value: {value!r}")


def block_from_dict(data: object) -> ContentBlock:
    """Rebuild a content block from :func:`block_to_dict` output."""
    if not isinstance(data, Mapping):
        raise _serialization_error(f"a content block must be a JSON object, got {data!r}")
    kind = data.get("type")
    try:
        match kind:
            case "text":
                metadata = data.get("provider_metadata")
                return Text(
                    text=_str(data, "text"),
                    provider_metadata=None
                    if metadata is None
                    else _object(metadata, "provider_metadata"),
                )
            case "image":
                return Image(
                    media_type=_opt_str(data, "media_type"),
                    data=_opt_str(data, "data"),
                    url=_opt_str(data, "url"),
                )
            case "tool_use":
                metadata = data.get("provider_metadata")
                return ToolUse(
                    id=_str(data, "id"),
                    name=_str(data, "name"),
                    input=_object(data.get("input", {}), "input"),
                    provider_metadata=None
                    if metadata is None
                    else _object(metadata, "provider_metadata"),
                    raw_arguments=_opt_str(data, "raw_arguments"),
                )
            case "tool_result":
                raw = data.get("content")
                content: str | tuple[Text | Image, ...]
                if isinstance(raw, str):
                    content = raw
                elif isinstance(raw, list):
                    parts = []
                    for item in raw:
                        part = block_from_dict(item)
                        if not isinstance(part, Text | Image):
                            raise _serialization_error("tool_result parts must be text or image")
                        parts.append(part)
                    content = tuple(parts)
                else:
                    raise _serialization_error("tool_result content must be a string or a list")
                structured = data.get("structured")
                check_depth(structured, "tool_result structured")
                return ToolResult(
                    tool_use_id=_str(data, "tool_use_id"),
                    content=content,
                    is_error=bool(data.get("is_error", False)),
                    structured=_json_value(structured),
                )
            case "thinking":
                metadata = data.get("provider_metadata")
                return Thinking(
                    text=_str(data, "text"),
                    signature=_opt_str(data, "signature"),
                    provider_metadata=None
                    if metadata is None
                    else _object(metadata, "provider_metadata"),
                )
            case "redacted_thinking":
                return RedactedThinking(data=_str(data, "data"))
            case _:
                raise _serialization_error(f"unknown content block type {kind!r}")
    except ValueError as exc:  # a field's validation rejected the stored value
        raise _serialization_error(f"invalid {kind} block: {exc}") from exc


def messages_to_dicts(messages: Iterable[Message]) -> list[dict[str, JSONValue]]:
    """A whole history as a list of JSON-ready dicts (for embedding in your own documents).

    Args:
        messages: the history.

    Returns:
        One dict per message; :func:`messages_from_dicts` reads it back.
    """
    return [message.to_dict() for message in messages]


def messages_from_dicts(data: Iterable[Mapping[str, object]]) -> list[Message]:
    """A history stored with :func:`messages_to_dicts`.

    Args:
        data: one mapping per message.

    Raises:
        SerializationError: an item is not a stored message.
    """
    messages = []
    for item in data:
        if not isinstance(item, Mapping):
            raise _serialization_error(f"a stored message must be an object, not {item!r:.60}")
        messages.append(Message.from_dict(item))
    return messages


def messages_to_json(messages: Iterable[Message], *, indent: int | None = None) -> str:
    """A whole history as a JSON string: ``path.write_text(kova.messages_to_json(history))``.

    Args:
        messages: the history.
        indent: pretty-print with this indent (compact by default).

    Returns:
        A JSON array; :func:`messages_from_json` reads it back. It can always be written as
        UTF-8: a lone surrogate (half an emoji a provider sent as ``"\\ud83d"``) is written
        as that JSON escape, and reads back as the same text.
    """
    return dumps(messages_to_dicts(messages), indent=indent)


def messages_from_json(data: str | bytes) -> list[Message]:
    """A history stored with :func:`messages_to_json`: ``messages_from_json(path.read_text())``.

    Args:
        data: the JSON text (``str``, or UTF-8 ``bytes``).

    Raises:
        TypeError: ``data`` is not text (use :func:`messages_from_dicts` for a parsed list).
        SerializationError: the text is not JSON (or nests too deeply to read), or not a
            stored history.
    """
    if not isinstance(data, str | bytes | bytearray):
        raise TypeError(
            f"messages_from_json takes the JSON text (str or bytes), not {type(data).__name__}; "
            "use messages_from_dicts for an already parsed list"
        )
    try:
        parsed = loads(data)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, JsonNestingError
        raise _serialization_error(f"stored history is not JSON: {exc}") from exc
    if not isinstance(parsed, list):
        raise _serialization_error(
            f"stored history must be a JSON array, not {type(parsed).__name__}"
        )
    return messages_from_dicts(parsed)
