"""The fake Bedrock server reads media blocks back as the API takes them: bytes that must be
base64, or an S3 location (video only from S3)."""

from __future__ import annotations

import pytest

from kova import Audio, File, Image
from kova.testing._wire.bedrock import decode_request


def _user(block: dict[str, object]) -> object:
    return {"messages": [{"role": "user", "content": [block]}]}


def _read(block: dict[str, object]) -> object:
    return decode_request(_user(block)).messages[0].content[0]  # type: ignore[arg-type]


def test_media_blocks_read_from_bytes_or_s3() -> None:
    s3 = {"s3Location": {"uri": "s3://bucket/a"}}
    image = _read({"image": {"format": "png", "source": {"bytes": "iVBO"}}})
    assert image == Image(media_type="image/png", data="iVBO")
    assert _read({"image": {"format": "png", "source": s3}}) == Image(
        url="s3://bucket/a", media_type="image/png"
    )
    assert _read({"audio": {"format": "pcm", "source": {"bytes": "AAAA"}}}) == Audio(
        data="AAAA", format="pcm16"
    )
    assert _read({"audio": {"format": "mp3", "source": s3}}) == Audio(
        url="s3://bucket/a", format="mp3"
    )
    assert _read({"video": {"format": "mp4", "source": s3}}) == File(
        "s3://bucket/a", media_type="video/mp4"
    )


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (
            {"image": {"format": "png", "source": {"bytes": "not base64!"}}},
            "base64|padding|character",
        ),
        ({"image": {"format": "png"}}, "image block without a source"),
        ({"audio": {"format": "mp3", "source": {}}}, "audio block without bytes"),
        ({"video": {"format": "mp4", "source": {"bytes": "AAAA"}}}, "video from s3:// only"),
    ],
)
def test_media_blocks_the_api_refuses_are_refused(block: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _read(block)
