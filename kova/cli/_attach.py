"""``kova chat``'s ``/attach PATH``: a local file as the content block it is (a PDF or text
file a :class:`~kova.Document`, a picture an :class:`~kova.Image`, a recording an
:class:`~kova.Audio`), sent with the next message."""

from __future__ import annotations

import base64
import mimetypes
from typing import TYPE_CHECKING

import trio

from .._messages import AUDIO_FORMATS, DOCUMENT_MEDIA_TYPES, Audio, Document, Image

if TYPE_CHECKING:
    from .._messages import ContentBlock

__all__ = ["AttachError", "attachment", "describe_attachment"]

MAX_ATTACHMENT_BYTES = 100 * 1024 * 1024
"""Larger than any provider takes inline: a bigger file is refused before it is read."""

_EXTENSIONS = {".md": "text/markdown", ".markdown": "text/markdown", ".csv": "text/csv"}
_AUDIO_TYPES = {media_type: name for name, media_type in AUDIO_FORMATS.items()}
_AUDIO_TYPES.update({"audio/x-wav": "wav", "audio/wave": "wav", "audio/mp3": "mp3"})


class AttachError(Exception):
    """A file ``/attach`` cannot send: the message says why (shown to the user)."""


def _media_type(path: trio.Path) -> str | None:
    suffix = path.suffix.lower()
    if suffix in _EXTENSIONS:
        return _EXTENSIONS[suffix]
    return mimetypes.guess_type(str(path))[0]


async def attachment(text: str) -> ContentBlock:
    """The block for the file at ``text`` (``~`` expanded).

    Raises:
        AttachError: no such file, too big, or of a kind no block carries.
    """
    path = await trio.Path(text.strip()).expanduser()
    try:
        size = (await path.stat()).st_size
        if size > MAX_ATTACHMENT_BYTES:
            raise AttachError(f"{path.name} is {size / 2**20:.0f} MB; /attach takes up to 100 MB")
        data = await path.read_bytes()
    except OSError as exc:
        raise AttachError(f"cannot read {text.strip()}: {exc.strerror or exc}") from exc
    if not data:
        raise AttachError(f"{path.name} is empty")
    media_type = _media_type(path)
    if media_type in DOCUMENT_MEDIA_TYPES:
        assert media_type is not None
        return Document(data=data, media_type=media_type, title=path.name)
    if media_type is not None and media_type.startswith("image/"):
        return Image(media_type=media_type, data=base64.b64encode(data).decode("ascii"))
    if media_type in _AUDIO_TYPES:
        return Audio(data=data, format=_AUDIO_TYPES[media_type])
    if (media_type is None or media_type.startswith("text/")) and b"\0" not in data[:8192]:
        # Source code, logs, config files: text the model reads as a plain-text document.
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return Document(data=data, media_type="text/plain", title=path.name)
    raise AttachError(
        f"{path.name} is {media_type or 'of an unknown type'}; /attach sends PDF, text, "
        "image and audio files"
    )


def describe_attachment(block: ContentBlock) -> str:
    """``invoice.pdf (application/pdf, 120 kB)`` for the chat's confirmation line."""
    match block:
        case Document(title=title, media_type=media_type):
            return f"{title} ({media_type}, {_kilobytes(block.size or 0)})"
        case Image(media_type=media_type, data=data):
            return f"image ({media_type}, {_kilobytes(len(data or '') * 3 // 4)})"
        case Audio(format=audio_format):
            return f"recording ({audio_format}, {_kilobytes(block.size or 0)})"
    return type(block).__name__


def _kilobytes(size: int) -> str:
    return f"{max(1, round(size / 1024))} kB"
