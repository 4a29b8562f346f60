"""The fake Anthropic server reads a tool result's parts back: text, images and documents;
a part that names a file by id has no kova counterpart there and is left out."""

from __future__ import annotations

from kova import Document, Image, Text, ToolResult
from kova.testing._wire.anthropic import messages_from_wire


def test_a_tool_results_parts_are_read_back_and_a_file_by_id_left_out() -> None:
    parts = [
        {"type": "text", "text": "see"},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
        {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
        {"type": "document", "source": {"type": "text", "data": "notes"}, "title": "n"},
    ]
    body = {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": parts}],
            }
        ]
    }
    (message,) = messages_from_wire(body)
    (result,) = message.content
    assert isinstance(result, ToolResult)
    assert result.content == (
        Text(text="see"),
        Image(url="https://example.com/a.png"),
        Document.from_text("notes", title="n", citations=False),
    )
