"""``/attach PATH``: each kind of local file becomes the block that carries it."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

import pytest

from kova import Audio, Document, Image
from kova.cli._attach import AttachError, attachment, describe_attachment

if TYPE_CHECKING:
    from pathlib import Path


PNG64 = base64.b64encode(b"\x89PNG").decode()


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("a.pdf", b"%PDF-1.7", Document(data=b"%PDF-1.7", title="a.pdf")),
        ("notes.md", b"# hi", Document(b"# hi", media_type="text/markdown", title="notes.md")),
        ("main.py", b"print(1)", Document(b"print(1)", media_type="text/plain", title="main.py")),
        ("Makefile", b"all:", Document(b"all:", media_type="text/plain", title="Makefile")),
        ("cat.png", b"\x89PNG", Image(media_type="image/png", data=PNG64)),
        ("call.wav", b"RIFF", Audio(data=b"RIFF", format="wav")),
        ("call.mp3", b"ID3", Audio(data=b"ID3", format="mp3")),
    ],
)  # fmt: skip
async def test_a_file_becomes_its_block(
    tmp_path: Path, name: str, data: bytes, expected: object
) -> None:
    (tmp_path / name).write_bytes(data)
    block = await attachment(f" {tmp_path / name} ")
    assert block == expected
    assert describe_attachment(block)


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("missing.pdf", None, "cannot read"),
        ("empty.txt", b"", "is empty"),
        ("blob.bin", b"\0\xff\0", "sends PDF, text, image and audio"),
        ("nul.dat", b"valid UTF-8, but \0 a NUL", "sends PDF, text, image and audio"),
        ("archive.zip", b"PK\3\4", "application/zip"),
    ],
)
async def test_a_file_no_block_carries_is_an_attach_error(
    tmp_path: Path, name: str, data: bytes | None, message: str
) -> None:
    if data is not None:
        (tmp_path / name).write_bytes(data)
    with pytest.raises(AttachError, match=message):
        await attachment(str(tmp_path / name))
