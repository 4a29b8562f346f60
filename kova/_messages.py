"""Content blocks and messages, and a history as plain JSON.

History belongs to the host. Every :class:`Message` converts to plain JSON with
:meth:`Message.to_dict` and back with :meth:`Message.from_dict` without loss, so a host can
store it anywhere (a database row, a file, a queue) and hand it back to a later turn, even one
that runs on another provider.
"""

from __future__ import annotations

import base64
import binascii
import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeAlias, assert_never

from ._errors import SerializationError
from ._json import MAX_JSON_DEPTH, JsonNestingError, check_depth, depth_exceeds, dumps, loads
from ._record import Record, set_field

if TYPE_CHECKING:
    from typing import Self

__all__ = [
    "AUDIO_FORMATS",
    "DOCUMENT_MEDIA_TYPES",
    "Audio",
    "ContentBlock",
    "Document",
    "File",
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


DOCUMENT_MEDIA_TYPES: frozenset[str] = frozenset(
    {
        "application/pdf",
        "text/plain",
        "text/csv",
        "text/html",
        "text/markdown",
        "application/msword",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.ms-excel",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    }
)
"""The media types a :class:`Document` may have: PDF and plain text everywhere documents go,
the rest where a provider takes them (the table in ``docs/agent.md``)."""

AUDIO_FORMATS: Mapping[str, str] = {
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
    "flac": "audio/flac",
    "aac": "audio/aac",
    "ogg": "audio/ogg",
    "aiff": "audio/aiff",
    "m4a": "audio/mp4",
    "webm": "audio/webm",
    "opus": "audio/opus",
    "pcm16": "audio/pcm",
}
"""An :class:`Audio` block's ``format`` and the media type it stands for."""


def _base64_data(kind: str, data: object) -> str | None:
    """``data`` as base64 text: ``bytes`` are encoded, a ``str`` is taken as base64 already."""
    if data is None:
        return None
    if isinstance(data, bytes | bytearray | memoryview):
        if not data:
            raise ValueError(f"{kind}.data must not be empty")
        return base64.b64encode(data).decode("ascii")
    if not isinstance(data, str):
        raise TypeError(f"{kind}.data must be bytes or base64 str, got {type(data).__name__}")
    if not data:
        raise ValueError(f"{kind}.data must not be empty")
    return data


def _one_source(kind: str, **sources: object) -> None:
    given = [name for name, value in sources.items() if value is not None]
    if len(given) != 1:
        names = ", ".join(sources)
        found = ", ".join(given) or "none"
        raise ValueError(f"{kind} needs exactly one of {names} (got {found})")
    for name, value in sources.items():
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"{kind}.{name} must be a non-empty str")


def base64_size(data: str) -> int:
    """How many bytes base64 ``data`` decodes to (without decoding it)."""
    padding = len(data) - len(data.rstrip("="))
    return len(data) * 3 // 4 - padding


def decode_base64(data: str, what: str) -> bytes:
    """The bytes of base64 ``data``; ``ValueError`` naming ``what`` if it is not base64."""
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"{what} is not valid base64: {exc}") from exc


class Document(Record):
    """A document for the model to read: a PDF or a text file, given by its bytes (``data``),
    a ``url`` the provider fetches, or the ``file_id`` of a file uploaded to the provider.

    ``Document(data=pdf_bytes)`` takes the raw bytes (stored as base64, like :class:`Image`),
    or base64 text; :meth:`from_text` makes a plain-text document from a ``str``. Exactly one
    of ``data``, ``url`` and ``file_id`` is set. Which providers take which form is the table
    in ``docs/agent.md`` ("Documents, audio and files"); a form a provider cannot take fails
    with :class:`~kova.InvalidRequest` before anything is sent.
    """

    data: str | None
    """The document's bytes, base64-encoded (no ``data:`` prefix)."""
    url: str | None
    """A URL the provider fetches itself."""
    file_id: str | None
    """The id (or URI) of a file already uploaded to the provider's file store."""
    media_type: str
    """One of :data:`DOCUMENT_MEDIA_TYPES`; ``application/pdf`` by default."""
    title: str | None
    """A title shown to the model (and used as the file name where the wire wants one)."""
    citations: bool
    """Ask the provider to cite passages of this document (Anthropic, Bedrock)."""

    def __init__(
        self,
        data: bytes | str | None = None,
        url: str | None = None,
        file_id: str | None = None,
        media_type: str = "application/pdf",
        title: str | None = None,
        citations: bool = False,
    ) -> None:
        encoded = _base64_data("Document", data)
        _one_source("Document", data=encoded, url=url, file_id=file_id)
        if media_type not in DOCUMENT_MEDIA_TYPES:
            raise ValueError(
                f"Document.media_type {media_type!r} is not a document type kova sends; "
                f"use one of {sorted(DOCUMENT_MEDIA_TYPES)}"
            )
        if title is not None and (not isinstance(title, str) or not title):
            raise ValueError("Document.title must be a non-empty str or None")
        if not isinstance(citations, bool):
            raise TypeError(f"Document.citations must be a bool, got {type(citations).__name__}")
        set_field(self, "data", encoded)
        set_field(self, "url", url)
        set_field(self, "file_id", file_id)
        set_field(self, "media_type", media_type)
        set_field(self, "title", title)
        set_field(self, "citations", citations)

    @classmethod
    def from_text(
        cls,
        text: str,
        *,
        media_type: str = "text/plain",
        title: str | None = None,
        citations: bool = False,
    ) -> Self:
        """A text document (``text/plain`` by default) from a ``str``."""
        if not media_type.startswith("text/"):
            raise ValueError(f"Document.from_text needs a text/* media type, not {media_type!r}")
        return cls(
            data=text.encode("utf-8", "surrogatepass"),
            media_type=media_type,
            title=title,
            citations=citations,
        )

    @property
    def size(self) -> int | None:
        """The size in bytes of inline ``data`` (``None`` for a URL or file id)."""
        return None if self.data is None else base64_size(self.data)


class Audio(Record):
    """A sound recording for the model to hear: its bytes (``data``) or a ``url``, in one of
    the :data:`AUDIO_FORMATS` (``wav`` by default). Providers that speak answer with these
    blocks too."""

    data: str | None
    """The audio's bytes, base64-encoded (no ``data:`` prefix)."""
    url: str | None
    """A URL the provider fetches itself."""
    format: str
    """``wav``, ``mp3``, ``flac``, ... (a key of :data:`AUDIO_FORMATS`)."""

    def __init__(
        self,
        data: bytes | str | None = None,
        url: str | None = None,
        format: str = "wav",  # the public name the issue fixes
    ) -> None:
        encoded = _base64_data("Audio", data)
        _one_source("Audio", data=encoded, url=url)
        if format not in AUDIO_FORMATS:
            raise ValueError(f"Audio.format {format!r} is not one of {sorted(AUDIO_FORMATS)}")
        set_field(self, "data", encoded)
        set_field(self, "url", url)
        set_field(self, "format", format)

    @property
    def media_type(self) -> str:
        """The MIME type of :attr:`format` (``audio/wav`` ...)."""
        return AUDIO_FORMATS[self.format]

    @property
    def size(self) -> int | None:
        """The size in bytes of inline ``data`` (``None`` for a URL)."""
        return None if self.data is None else base64_size(self.data)


class File(Record):
    """A file already uploaded to the provider (OpenAI's ``file-...`` ids, Anthropic's Files
    API, a Gemini file URI), referred to by its ``file_id``. ``media_type`` says what it is
    where the wire needs it (Gemini always; Anthropic to choose an image or document block)."""

    file_id: str
    media_type: str | None

    def __init__(self, file_id: str, media_type: str | None = None) -> None:
        if not isinstance(file_id, str) or not file_id:
            raise ValueError("File.file_id must be a non-empty str")
        if media_type is not None and (
            not isinstance(media_type, str) or media_type.count("/") != 1
        ):
            raise ValueError(
                f"File.media_type must be a MIME type such as 'application/pdf', got {media_type!r}"
            )
        set_field(self, "file_id", file_id)
        set_field(self, "media_type", media_type)


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
        if not id or not name:
            raise ValueError(f"{'name' if id else 'id'} must not be empty")
        set_field(self, "id", id)
        set_field(self, "name", name)
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

    content: str | tuple[Text | Image | Document, ...] = ""
    """The result text, or text, image and document parts (a tool that reads a PDF returns
    it as a :class:`Document`; providers whose tool results take no documents send it in a
    user message right after, as they do images, or refuse it)."""
    is_error: bool = False
    tool_use_id: str = ""
    structured: JSONValue | None = None
    """A machine-readable form of the result, for the host (MCP's ``structuredContent``).

    Providers send the model ``content`` only; a tool that returns structured data also puts
    its text form (usually the JSON) into ``content``."""

    @property
    def text(self) -> str:
        """The text of the result (image and document parts omitted)."""
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


ContentBlock: TypeAlias = (
    Text | Image | Document | Audio | File | ToolUse | ToolResult | Thinking | RedactedThinking
)


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
        case Document():
            return {
                "type": "document",
                "media_type": block.media_type,
                "data": block.data,
                "url": block.url,
                "file_id": block.file_id,
                "title": block.title,
                "citations": block.citations,
            }
        case Audio(data=data, url=url, format=audio_format):
            return {"type": "audio", "format": audio_format, "data": data, "url": url}
        case File(file_id=file_id, media_type=media_type):
            return {"type": "file", "file_id": file_id, "media_type": media_type}
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


def _metadata(data: Mapping[str, object]) -> JSONObject | None:
    metadata = data.get("provider_metadata")
    return None if metadata is None else _object(metadata, "provider_metadata")


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
                return Text(text=_str(data, "text"), provider_metadata=_metadata(data))
            case "image":
                return Image(
                    media_type=_opt_str(data, "media_type"),
                    data=_opt_str(data, "data"),
                    url=_opt_str(data, "url"),
                )
            case "document":
                citations = data.get("citations", False)
                if not isinstance(citations, bool):
                    raise _serialization_error("block field 'citations' must be a boolean")
                return Document(
                    data=_opt_str(data, "data"),
                    url=_opt_str(data, "url"),
                    file_id=_opt_str(data, "file_id"),
                    media_type=_opt_str(data, "media_type") or "application/pdf",
                    title=_opt_str(data, "title"),
                    citations=citations,
                )
            case "audio":
                return Audio(
                    data=_opt_str(data, "data"),
                    url=_opt_str(data, "url"),
                    format=_opt_str(data, "format") or "wav",
                )
            case "file":
                return File(_str(data, "file_id"), media_type=_opt_str(data, "media_type"))
            case "tool_use":
                return ToolUse(
                    id=_str(data, "id"),
                    name=_str(data, "name"),
                    input=_object(data.get("input", {}), "input"),
                    provider_metadata=_metadata(data),
                    raw_arguments=_opt_str(data, "raw_arguments"),
                )
            case "tool_result":
                raw = data.get("content")
                content: str | tuple[Text | Image | Document, ...]
                if isinstance(raw, str):
                    content = raw
                elif isinstance(raw, list):
                    parts = []
                    for item in raw:
                        part = block_from_dict(item)
                        if not isinstance(part, Text | Image | Document):
                            raise _serialization_error(
                                "tool_result parts must be text, image or document"
                            )
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
                return Thinking(
                    text=_str(data, "text"),
                    signature=_opt_str(data, "signature"),
                    provider_metadata=_metadata(data),
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
