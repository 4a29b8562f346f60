"""The data model: constructors, validation, merging, usage sums, and lossless JSON history."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kova
from kova import (
    Audio,
    Document,
    File,
    Image,
    InferenceConfig,
    Message,
    RedactedThinking,
    ResponseFormat,
    Role,
    StopKind,
    StopReason,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
    Usage,
)
from kova._messages import AUDIO_FORMATS, DOCUMENT_MEDIA_TYPES

if TYPE_CHECKING:
    from pathlib import Path

# --- strategies -------------------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
ids = st.text(min_size=1, max_size=12)

texts = st.builds(Text, text=st.text(max_size=40), provider_metadata=st.none() | json_objects)
images = st.one_of(
    st.builds(
        Image,
        media_type=st.sampled_from(["image/png", "image/jpeg"]),
        data=st.text(min_size=1, max_size=20),
    ),
    st.builds(Image, url=st.text(min_size=1, max_size=30)),
)
tool_uses = st.builds(
    ToolUse,
    id=ids,
    name=ids,
    input=json_objects,
    provider_metadata=st.none() | json_objects,
    raw_arguments=st.none() | st.text(max_size=10),
)
tool_results = st.builds(
    ToolResult,
    tool_use_id=ids,
    content=st.text(max_size=30) | st.lists(texts | images, max_size=3).map(tuple),
    is_error=st.booleans(),
    structured=st.none() | json_values,
)
thinkings = st.builds(
    Thinking,
    text=st.text(max_size=30),
    signature=st.none() | st.text(max_size=20),
    provider_metadata=st.none() | json_objects,
)
redacted = st.builds(RedactedThinking, data=st.text(max_size=30))
sources = st.text(min_size=1, max_size=20)
documents = st.one_of(
    st.builds(
        Document,
        data=sources | st.binary(min_size=1, max_size=20),
        media_type=st.sampled_from(sorted(DOCUMENT_MEDIA_TYPES)),
        title=st.none() | st.text(min_size=1, max_size=10),
        citations=st.booleans(),
    ),
    st.builds(Document, url=sources, title=st.none() | st.text(min_size=1, max_size=10)),
    st.builds(Document, file_id=sources, media_type=st.just("text/plain")),
)
audios = st.builds(Audio, data=sources, format=st.sampled_from(sorted(AUDIO_FORMATS))) | (
    st.builds(Audio, url=sources)
)
files = st.builds(File, sources, media_type=st.none() | st.just("application/pdf"))
blocks = (
    texts | images | documents | audios | files | tool_uses | tool_results | thinkings | redacted
)
messages = st.builds(
    Message, role=st.sampled_from(list(Role)), content=st.lists(blocks, max_size=5)
)


@given(st.lists(messages, max_size=6))
def test_history_round_trips_through_plain_json(history: list[Message]) -> None:
    stored = kova.messages_to_json(history)
    assert isinstance(stored, str)
    assert kova.messages_from_json(stored) == history
    assert kova.messages_from_json(stored.encode()) == history
    assert kova.messages_from_dicts(json.loads(json.dumps(kova.messages_to_dicts(history)))) == (
        history
    )


def test_history_saves_to_and_loads_from_a_file(tmp_path: Path) -> None:
    history = [Message.user("hi"), Message.assistant("hello")]
    path = tmp_path / "history.json"
    path.write_text(kova.messages_to_json(history, indent=2))
    assert kova.messages_from_json(path.read_text()) == history
    assert kova.messages_from_json(path.read_bytes()) == history


@pytest.mark.parametrize(
    ("stored", "message"),
    [("not json", "not JSON"), ('{"role": "user"}', "JSON array"), ("[1]", "must be an object")],
)
def test_history_from_bad_json_is_a_serialization_error(stored: str, message: str) -> None:
    with pytest.raises(kova.SerializationError, match=message):
        kova.messages_from_json(stored)


def test_history_from_a_list_names_the_dicts_function() -> None:
    with pytest.raises(TypeError, match="messages_from_dicts"):
        kova.messages_from_json([{"role": "user", "content": []}])  # type: ignore[arg-type]


def test_text_provider_metadata_is_stored_only_when_set() -> None:
    # Histories stored before Text had provider_metadata read back unchanged, and a plain text
    # block still stores as {"type", "text"}.
    assert Message.user("hi").to_dict() == {
        "role": "user",
        "content": [{"type": "text", "text": "hi"}],
    }
    signed = Text(text="a", provider_metadata={"gemini_thought_signature": "c2ln"})
    stored = Message.assistant([signed]).to_dict()
    assert stored["content"] == [
        {"type": "text", "text": "a", "provider_metadata": {"gemini_thought_signature": "c2ln"}}
    ]
    assert Message.from_dict(stored).content == (signed,)
    assert signed != Text(text="a")
    assert Message.assistant([signed]).text == "a"


def test_thinking_provider_metadata_is_stored_only_when_set() -> None:
    plain = Message.assistant([Thinking(text="t", signature="s")]).to_dict()
    assert plain["content"] == [{"type": "thinking", "text": "t", "signature": "s"}]
    thought = Thinking(text="t", provider_metadata={"gemini_thought_signature": "c2ln"})
    stored = Message.assistant([thought]).to_dict()
    assert stored["content"] == [
        {
            "type": "thinking",
            "text": "t",
            "signature": None,
            "provider_metadata": {"gemini_thought_signature": "c2ln"},
        }
    ]
    assert Message.from_dict(stored).content == (thought,)


def test_message_constructors() -> None:
    assert Message.user("hi") == Message(role=Role.USER, content=(Text(text="hi"),))
    assert Message.assistant("yo").role is Role.ASSISTANT
    assert Message.system("be brief").text == "be brief"
    call = ToolUse(id="c1", name="f", input={"x": 1})
    assert Message.assistant([Text(text="a"), call]).tool_uses == (call,)


def test_tool_results_message_requires_ids() -> None:
    with pytest.raises(ValueError, match="tool_use_id"):
        Message.tool_results([ToolResult(content="x")])
    message = Message.tool_results([ToolResult(content="x", tool_use_id="c1")])
    assert message.role is Role.TOOL


def test_image_needs_exactly_one_source() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Image(media_type="image/png")
    with pytest.raises(ValueError, match="exactly one"):
        Image(media_type="image/png", data="AAAA", url="http://x")
    with pytest.raises(ValueError, match="media_type"):
        Image(data="AAAA")


def test_tool_use_rejects_empty_ids() -> None:
    with pytest.raises(ValueError, match="id"):
        ToolUse(id="", name="f")


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"role": "wizard", "content": []}, "role"),
        ({"role": "user", "content": "hi"}, "list"),
        ({"role": "user", "content": [{"type": "video"}]}, "unknown content block"),
        ({"role": "user", "content": [{"type": "text"}]}, "text"),
        (
            {"role": "user", "content": [{"type": "text", "text": "a", "provider_metadata": 1}]},
            "provider_metadata",
        ),
        ({"role": "user", "content": [{"type": "tool_use", "id": "", "name": "f"}]}, "invalid"),
    ],
)
def test_bad_stored_history_raises_serialization_error(data: dict[str, object], match: str) -> None:
    with pytest.raises(kova.SerializationError, match=match):
        Message.from_dict(data)


def test_usage_sums_every_field() -> None:
    a = Usage(input_tokens=10, output_tokens=5, cache_read_tokens=3, reasoning_tokens=1)
    b = Usage(input_tokens=1, output_tokens=2, cache_creation_tokens=4)
    total = a + b
    assert total == Usage(
        input_tokens=11,
        output_tokens=7,
        total_tokens=18,
        cache_read_tokens=3,
        cache_creation_tokens=4,
        reasoning_tokens=1,
    )
    assert Usage(input_tokens=2, output_tokens=3).total_tokens == 5


def test_inference_config_merge_falls_back_for_unset_fields() -> None:
    fmt = ResponseFormat.named("r", {"type": "object"})
    base = InferenceConfig(model="m", max_tokens=100, temperature=0.2)
    merged = base.merged(InferenceConfig(temperature=0.9, response_format=fmt))
    assert merged == InferenceConfig(
        model="m", max_tokens=100, temperature=0.9, response_format=fmt
    )
    assert base.merged(None) is base
    assert base.merged(InferenceConfig()) is base


def test_inference_config_validates_max_tokens() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        InferenceConfig(max_tokens=0)


def test_stop_reason_constants_and_unknown() -> None:
    assert StopReason.END_TURN.kind is StopKind.END_TURN
    odd = StopReason.unknown("content_filter")
    assert odd.kind is StopKind.UNKNOWN
    assert odd.raw == "content_filter"
    assert str(odd) == "unknown(content_filter)"
    assert StopReason(kind=StopKind.TOOL_USE) == StopReason.TOOL_USE


def test_the_decoders_text_delta_is_the_same_value_as_the_class_call() -> None:
    import copy
    import pickle

    from kova._models import text_delta

    built, called = text_delta("h\u00e9"), kova.TextDelta(text="h\u00e9")
    assert type(built) is kova.TextDelta
    assert built == called
    assert hash(built) == hash(called)
    assert repr(built) == repr(called)
    assert built.provider_metadata is None
    assert pickle.loads(pickle.dumps(built)) == called == copy.copy(built)
    with pytest.raises(AttributeError):
        built.text = "x"  # type: ignore[misc]


def test_message_content_of_the_wrong_type_says_what_it_takes() -> None:
    # Before: "TypeError: 'int' object is not iterable", from tuple(5).
    for build in (Message.user, Message.assistant):
        with pytest.raises(TypeError, match="message content must be a str or content blocks"):
            build(5)  # type: ignore[arg-type]


def test_tool_annotations_are_bools_or_none() -> None:
    # Before: ToolAnnotations(read_only="no") was kept as given, and an approval handler
    # testing `annotations.read_only` (as docs/asyncio.md's does) read the truthy string
    # as read-only and approved the call.
    from kova import ToolAnnotations

    with pytest.raises(TypeError, match="read_only must be True, False or None, got 'no'"):
        ToolAnnotations(read_only="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="destructive must be"):
        ToolAnnotations(destructive=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="title must be a str"):
        ToolAnnotations(title=5)  # type: ignore[arg-type]
    assert ToolAnnotations(read_only=True, title="t").is_read_only
