"""Documents, audio and files as content blocks: validation where they are made, their JSON
forms in messages and turns, equality."""

from __future__ import annotations

import base64

import pytest

import kova
from kova import Audio, Document, File, Image, InferenceConfig, Message, Text
from kova._messages import block_from_dict, block_to_dict
from kova.agent import Turn
from kova.errors import SerializationError

PDF = b"%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
PDF64 = base64.b64encode(PDF).decode()


def test_document_takes_bytes_or_base64_and_both_are_equal() -> None:
    assert Document(data=PDF) == Document(data=PDF64)
    assert Document(PDF).data == PDF64
    assert Document(data=PDF).media_type == "application/pdf"
    assert Document(data=PDF).size == len(PDF)
    assert hash(Document(data=PDF)) == hash(Document(data=PDF64))
    assert Document(data=PDF, title="a") != Document(data=PDF, title="b")


def test_document_from_text_is_base64_of_the_utf8_text() -> None:
    document = Document.from_text("Grüße", title="note")
    assert document.media_type == "text/plain"
    assert document.data is not None
    assert base64.b64decode(document.data).decode() == "Grüße"
    with pytest.raises(ValueError, match="text/"):
        Document.from_text("x", media_type="application/pdf")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, r"exactly one of data, url, file_id \(got none\)"),
        ({"data": PDF, "url": "https://x/a.pdf"}, r"exactly one .*\(got data, url\)"),
        ({"url": "https://x/a.pdf", "file_id": "file-1"}, r"got url, file_id"),
        ({"data": b""}, "must not be empty"),
        ({"url": ""}, "non-empty"),
        ({"data": PDF, "media_type": "image/png"}, "not a document type"),
        ({"data": PDF, "media_type": "application/zip"}, "not a document type"),
        ({"data": PDF, "title": ""}, "title"),
    ],
)
def test_a_bad_document_is_a_value_error_naming_the_field(
    arguments: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Document(**arguments)  # type: ignore[arg-type]


def test_document_fields_of_the_wrong_type_are_type_errors() -> None:
    with pytest.raises(TypeError, match="citations must be a bool"):
        Document(data=PDF, citations="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bytes or base64 str"):
        Document(data=12)  # type: ignore[arg-type]


def test_audio_needs_one_source_and_a_known_format() -> None:
    assert Audio(data=b"RIFF").format == "wav"
    assert Audio(data=b"RIFF").media_type == "audio/wav"
    assert Audio(url="https://x/a.mp3", format="mp3").media_type == "audio/mpeg"
    with pytest.raises(ValueError, match="exactly one of data, url"):
        Audio()
    with pytest.raises(ValueError, match="exactly one of data, url"):
        Audio(data=b"x", url="https://x/a.wav")
    with pytest.raises(ValueError, match=r"Audio.format 'midi' is not one of"):
        Audio(data=b"x", format="midi")


def test_file_takes_its_id_positionally_and_checks_the_media_type() -> None:
    assert File("file-abc") == File(file_id="file-abc", media_type=None)
    assert File("file-abc", "application/pdf").media_type == "application/pdf"
    with pytest.raises(ValueError, match="file_id"):
        File("")
    with pytest.raises(ValueError, match="MIME type"):
        File("file-abc", media_type="pdf")


BLOCKS: list[Document | Audio | File] = [
    Document(data=PDF, title="Invoice 7", citations=True),
    Document(url="https://example.com/a.pdf"),
    Document(file_id="file-123", media_type="text/plain"),
    Document.from_text("plain words"),
    Audio(data=b"RIFF....WAVE", format="wav"),
    Audio(url="https://example.com/a.mp3", format="mp3"),
    File("file-xyz"),
    File("gs://bucket/clip.mp4", media_type="video/mp4"),
]


@pytest.mark.parametrize("block", BLOCKS, ids=repr)
def test_media_blocks_round_trip_through_message_json(block: kova.ContentBlock) -> None:
    message = Message.user([Text(text="look"), block])
    assert kova.messages_from_json(kova.messages_to_json([message])) == [message]
    assert block_from_dict(block_to_dict(block)) == block


def test_media_blocks_round_trip_through_a_turns_json() -> None:
    history = [Message.user([Text(text="read these"), *BLOCKS, Image(url="https://x/i.png")])]
    turn = Turn.start(history, tools=(), config=InferenceConfig())
    restored = Turn.from_json(turn.to_json())
    assert restored.to_dict() == turn.to_dict()
    assert "document" in turn.to_json()


@pytest.mark.parametrize(
    ("stored", "message"),
    [
        ({"type": "document", "url": "u", "data": "QQ=="}, "exactly one"),
        ({"type": "document", "data": "QQ==", "media_type": "image/png"}, "document type"),
        ({"type": "document", "data": "QQ==", "citations": "yes"}, "citations"),
        ({"type": "audio", "data": "QQ==", "format": "midi"}, "format"),
        ({"type": "file"}, "file_id"),
    ],
)
def test_a_bad_stored_media_block_is_a_serialization_error(
    stored: dict[str, object], message: str
) -> None:
    with pytest.raises(SerializationError, match=message):
        block_from_dict(stored)


def test_media_blocks_go_into_user_messages_like_images() -> None:
    message = Message.user([Text(text="summarize"), Document(data=PDF), Audio(data=b"RIFF")])
    assert message.text == "summarize"
    assert [type(block) for block in message.content] == [Text, Document, Audio]


def test_text_and_tool_uses_read_every_block_in_order() -> None:
    first, second = (
        kova.ToolUse(id="c1", name="f", input={}),
        kova.ToolUse(id="c2", name="g", input={}),
    )
    message = Message(role="assistant", content=(Text(text="a"), first, Text(text="b"), second))
    assert message.text == "ab"
    assert message.tool_uses == (first, second)
    result = kova.ToolResult(
        content=(Text(text="x"), Image(url="https://x.test/i.png"), Text(text="y"))
    )
    assert result.text == "xy"
