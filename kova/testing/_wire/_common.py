"""What the fake servers' request decoders share (test scaffolding): a media part read back
into the kova block its media type stands for, and a tool's definition."""

from __future__ import annotations

from collections.abc import Mapping

from ..._messages import AUDIO_FORMATS, DOCUMENT_MEDIA_TYPES, Audio, Document, Image
from ..._requests import ToolDefinition

__all__ = ["audio_format", "media_block", "tool_definition"]

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


def tool_definition(name: object, description: object, schema: object) -> ToolDefinition:
    """A tool as a request defines it (a schema that is not an object: no arguments)."""
    return ToolDefinition(
        name=str(name),
        description=str(description or ""),
        parameters=dict(schema)
        if isinstance(schema, Mapping)
        else {"type": "object", "properties": {}},
    )
