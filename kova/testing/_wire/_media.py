"""Reading a media part of a request back into the kova block it stands for, by its media
type: the fake servers' side of images, documents and audio (test scaffolding)."""

from __future__ import annotations

from ..._messages import AUDIO_FORMATS, DOCUMENT_MEDIA_TYPES, Audio, Document, Image

__all__ = ["audio_format", "media_block"]

_AUDIO_BY_TYPE = {media_type: name for name, media_type in AUDIO_FORMATS.items()}
_AUDIO_BY_TYPE.update({"audio/mp3": "mp3", "audio/x-wav": "wav", "audio/wave": "wav"})


def audio_format(media_type: str) -> str:
    """The :class:`~kova.Audio` format of an ``audio/...`` type (``wav`` when unknown)."""
    return _AUDIO_BY_TYPE.get(media_type, "wav")


def media_block(
    media_type: str | None, *, data: str | None = None, url: str | None = None
) -> Image | Document | Audio:
    """A part with ``media_type`` and inline base64 ``data`` or a ``url``, as kova's block."""
    if media_type and media_type.startswith("audio/"):
        return Audio(data=data, url=url, format=audio_format(media_type))
    if media_type in DOCUMENT_MEDIA_TYPES:
        assert media_type is not None
        return Document(data=data, url=url, media_type=media_type)
    return Image(media_type=media_type, data=data, url=url)
