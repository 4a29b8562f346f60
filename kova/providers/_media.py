"""What the provider encoders share about documents, audio and files: how to name a block in
an error, how to refuse one a provider cannot take, and the per-provider size check.

A media block a provider cannot carry is never dropped: the encoder raises
:class:`~kova.InvalidRequest` naming the provider and the block's kind before anything is
sent (the table in ``docs/agent.md``, "Documents, audio and files"). Size limits are checked
the same way, on the decoded size of inline data, so a 40 MB PDF fails at once with the limit
in the message instead of after an upload the server then rejects.

The one exception is media in an *assistant* turn (audio or an image a model answered with):
it is the model's own output, and an encoder whose wire has no place for it in an assistant
turn leaves it out, as it leaves out another provider's unsigned thinking; the text beside it
(a spoken answer's transcript) still goes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import InvalidRequest
from .._messages import (
    Audio,
    Document,
    File,
    Image,
    Text,
    ToolResult,
    ToolUse,
    base64_size,
    decode_base64,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .._messages import Message

__all__ = [
    "MB",
    "MediaBlock",
    "check_inline_total",
    "check_size",
    "describe",
    "document_text",
    "refuse",
]

MediaBlock = Image | Document | Audio | File

MB = 1024 * 1024


def describe(block: MediaBlock) -> str:
    """A block's kind and form for an error message: ``Document (application/pdf, by url)``."""
    match block:
        case Document():
            source = "data" if block.data is not None else "url" if block.url else "file_id"
            return f"Document ({block.media_type}, by {source})"
        case Audio():
            return f"Audio ({block.format}, by {'data' if block.data is not None else 'url'})"
        case File():
            return f"File ({block.media_type or 'no media_type'})"
        case Image():
            return f"Image (by {'data' if block.data is not None else 'url'})"


def refuse(provider: str, block: MediaBlock, reason: str) -> InvalidRequest:
    """The error for a block ``provider`` cannot take (raise it): names both and says why."""
    return InvalidRequest(f"cannot take {describe(block)}: {reason}", provider=provider)


def _megabytes(size: int) -> str:
    return f"{size / MB:.1f} MB"


def check_size(provider: str, block: Document | Audio | Image, limit: int, what: str) -> None:
    """Raise :class:`~kova.InvalidRequest` when ``block``'s inline data decodes to more than
    ``limit`` bytes; ``what`` names the limit (``"per document"``)."""
    if block.data is None:
        return
    size = base64_size(block.data)
    if size > limit:
        raise InvalidRequest(
            f"{describe(block)} of {_megabytes(size)} is over {provider}'s limit of "
            f"{_megabytes(limit)} {what}; upload it to the provider's file store and send a "
            "File (or a url) instead",
            provider=provider,
        )


def check_inline_total(provider: str, messages: Iterable[Message], limit: int, what: str) -> None:
    """Raise :class:`~kova.InvalidRequest` when the inline documents and audio in
    ``messages`` (a tool result's parts included) decode to more than ``limit`` bytes
    together."""
    total = _inline_bytes(messages)
    if total > limit:
        raise InvalidRequest(
            f"{_megabytes(total)} of inline documents and audio is over {provider}'s limit of "
            f"{_megabytes(limit)} {what}; upload the larger files to the provider's file store "
            "and send File blocks (or urls) instead",
            provider=provider,
        )


def _inline_bytes(messages: Iterable[Message]) -> int:
    # Runs over the whole history on every call: a plain loop over the blocks, which are
    # almost never media (a generator over every block cost ~4 us a call on a short turn).
    total = 0
    for message in messages:
        for block in message.content:
            if block.__class__ is Text or block.__class__ is ToolUse:
                continue  # most blocks, never media: no isinstance walk for them
            if isinstance(block, _SIZED):
                if block.data is not None:
                    total += base64_size(block.data)
            elif isinstance(block, ToolResult) and type(block.content) is tuple:
                for part in block.content:
                    if isinstance(part, _SIZED) and part.data is not None:
                        total += base64_size(part.data)
    return total


_SIZED = (Document, Audio)
"""The blocks whose inline data counts towards a provider's per-request total."""


def document_text(provider: str, document: Document) -> str:
    """The text of an inline text document (its base64 ``data`` decoded as UTF-8)."""
    assert document.data is not None
    try:
        return decode_base64(document.data, "Document.data").decode("utf-8")
    except ValueError as exc:  # not base64, or not UTF-8
        raise refuse(provider, document, f"its data is not base64 of UTF-8 text ({exc})") from exc
