"""The offline token estimate (:func:`heuristic_count_tokens`): pure, on the data model
only, so the turn core and the context policies use it without loading a provider (or httpx2).
``kova.providers`` re-exports it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._messages import (
    Audio,
    Document,
    File,
    Image,
    RedactedThinking,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._messages import Message
    from ._requests import ToolDefinition

__all__ = ["heuristic_count_tokens"]

_CHARS_PER_TOKEN = 4
_MESSAGE_OVERHEAD = 4
_IMAGE_TOKENS = 1_600  # a typical image costs ~1.5k tokens on the major providers
_DOCUMENT_TOKENS = 3_000  # about a page of PDF read as text plus its page image
_AUDIO_TOKENS = 1_000  # about half a minute of speech


def _block_chars(block: object) -> tuple[int, int]:
    """(characters, extra tokens) of one content block."""
    match block:
        case Text(text=text):
            return len(text), 0
        case Image():
            return 0, _IMAGE_TOKENS
        case Document(data=data):
            # A page of PDF costs ~1.5-3k tokens; base64 of a page is ~50-100 kB, so one
            # token per 32 bytes of base64 stays on the safe side without parsing the file.
            return 0, _DOCUMENT_TOKENS if data is None else max(_DOCUMENT_TOKENS, len(data) // 32)
        case Audio(data=data):
            # ~32 tokens a second of speech; 16 kB/s of wav is ~21 kB/s of base64.
            return 0, _AUDIO_TOKENS if data is None else max(_AUDIO_TOKENS, len(data) // 640)
        case File():
            return 0, _DOCUMENT_TOKENS
        case ToolUse(name=name, input=arguments):
            return len(name) + len(repr(arguments)), 0
        case ToolResult(content=content):
            if isinstance(content, str):
                return len(content), 0
            chars = extra = 0
            for part in content:
                part_chars, part_extra = _block_chars(part)
                chars += part_chars
                extra += part_extra
            return chars, extra
        case Thinking(text=text):
            return len(text), 0
        case RedactedThinking(data=data):
            return len(data), 0
    return 0, 0


def heuristic_count_tokens(
    messages: Sequence[Message], tools: Sequence[ToolDefinition] = ()
) -> int:
    """A cheap offline estimate: about 4 characters a token, plus a per-message overhead.

    Conservative enough to guard against runaway prompts; not exact. Tool definitions count
    by the size of their name, description and schema.
    """
    chars = 0
    tokens = 0
    for message in messages:
        tokens += _MESSAGE_OVERHEAD
        for block in message.content:
            block_chars, extra = _block_chars(block)
            chars += block_chars
            tokens += extra
    for tool in tools:
        chars += len(tool.name) + len(tool.description) + len(repr(tool.parameters))
    return tokens + (chars + _CHARS_PER_TOKEN - 1) // _CHARS_PER_TOKEN
