"""kova's frozen records (kova/_record.py) behave like the frozen attrs classes they replace."""

from __future__ import annotations

import copy
import pickle
import weakref
from typing import TYPE_CHECKING, ClassVar, assert_type

import attrs
import pytest

from kova import (
    Image,
    InferenceConfig,
    Message,
    ResponseFormat,
    StopReason,
    Text,
    ToolAnnotations,
    ToolDefinition,
    ToolResult,
    ToolUse,
    Usage,
)
from kova._record import Record, evolve, set_field
from kova.providers import ChatRequest, ModelResponse
from kova.telemetry import TurnFinished

if TYPE_CHECKING:
    from collections.abc import Mapping

# Besides what it runs, this file is a test of the records' static types: under
# `mypy --strict tests/test_record.py` every `type: ignore` below must be needed (strict
# reports an unused one) and every `assert_type` must hold.


def test_a_record_is_frozen() -> None:
    text = Text(text="hi")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        text.text = "changed"  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        del text.text
    with pytest.raises(AttributeError):
        text.other = 1
    assert not hasattr(text, "__dict__")


def test_construction_is_keyword_only_and_checked() -> None:
    with pytest.raises(TypeError):
        Text("hi")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Text()  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="id must not be empty"):
        ToolUse(id="", name="x")
    with pytest.raises(ValueError, match="max_tokens must be positive"):
        InferenceConfig(max_tokens=0)
    with pytest.raises(ValueError, match="exactly one of data"):
        Image()


def test_equality_and_hashing_are_field_wise() -> None:
    assert Text(text="a") == Text(text="a")
    assert Text(text="a") != Text(text="b")
    assert hash(Text(text="a")) == hash(Text(text="a"))
    assert Text(text="a") != Thinking_like("a")
    assert (Text(text="a") == "a") is False
    assert len({StopReason.END_TURN, StopReason(kind=StopReason.END_TURN.kind)}) == 1
    # annotations and output_schema are hints, not part of a definition's identity
    plain = ToolDefinition(name="t")
    hinted = ToolDefinition(name="t", annotations=ToolAnnotations(read_only=True))
    assert plain == hinted
    assert plain != ToolDefinition(name="u")
    with pytest.raises(TypeError):
        hash(ToolUse(id="1", name="t", input={"a": 1}))  # a dict field is unhashable


def Thinking_like(text: str) -> object:  # a look-alike of another class
    class Other(Record):
        __slots__ = ("text",)
        text: str

        def __init__(self, *, text: str) -> None:
            set_field(self, "text", text)

    return Other(text=text)


def test_repr_names_every_field_in_order() -> None:
    assert repr(Text(text="hi")) == "Text(text='hi', provider_metadata=None)"
    assert repr(Usage(input_tokens=1, output_tokens=2)) == (
        "Usage(input_tokens=1, output_tokens=2, total_tokens=3, cache_read_tokens=0, "
        "cache_creation_tokens=0, reasoning_tokens=0, input_audio_tokens=0, "
        "output_audio_tokens=0, cost=None)"
    )


def test_conversions_and_defaults() -> None:
    message = Message(role="user", content=[Text(text="a")])
    assert message.content == (Text(text="a"),)
    assert message.role is message.role.USER
    assert ToolUse(id="1", name="t").input == {}
    assert ToolDefinition(name="t").parameters == {"type": "object", "properties": {}}
    assert InferenceConfig(stop_sequences="END").stop_sequences == ("END",)
    assert ChatRequest(messages=[message]).config == InferenceConfig()
    assert Usage(input_tokens=1, output_tokens=2, total_tokens=10).total_tokens == 10


def test_pickle_copy_and_weakref() -> None:
    response = ModelResponse(
        content=(Text(text="a"), ToolUse(id="1", name="t", input={"x": [1]})),
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=3),
    )
    assert pickle.loads(pickle.dumps(response)) == response
    assert copy.copy(response) == response
    deep = copy.deepcopy(response)
    assert deep == response
    assert deep.content[1] is not response.content[1]
    assert weakref.ref(response)() is response


def test_the_attrs_protocol_works_on_records() -> None:
    assert attrs.has(Text) is not attrs.has(Record)  # (no TypeGuard narrowing Text for mypy)
    names = [field.name for field in attrs.fields(ToolDefinition)]
    assert names == ["name", "description", "parameters", "annotations", "output_schema"]
    assert not attrs.fields(ToolDefinition).annotations.eq
    assert attrs.fields(ToolResult).is_error.default is False
    result = ToolResult(content="ok")
    assert attrs.evolve(result, tool_use_id="c1") == ToolResult(content="ok", tool_use_id="c1")
    assert attrs.asdict(Text(text="a")) == {"text": "a", "provider_metadata": None}
    assert evolve(InferenceConfig(model="m"), max_tokens=5) == InferenceConfig(
        model="m", max_tokens=5
    )
    assert Text(text="a").__replace__(text="b") == Text(text="b")  # copy.replace (3.13)
    with pytest.raises(ValueError, match="max_tokens"):
        attrs.evolve(InferenceConfig(), max_tokens=-1)  # evolve validates like the constructor


def test_a_record_must_declare_exactly_its_fields_as_slots() -> None:
    with pytest.raises(TypeError, match="__slots__ must list exactly"):

        class Bad(Record):
            __slots__ = ("a",)
            a: int
            b: int


class Event(Record):
    """A record that writes no ``__init__``: its annotations are the fields."""

    name: str
    count: int = 0
    tags: tuple[str, ...] = ()
    LIMIT: ClassVar[int] = 10


class Stamped(Event, eq_exclude=("at",)):
    at: float = 0.0


class Checked(Record):
    size: int

    def __post_init__(self) -> None:
        if self.size < 0:
            raise ValueError(f"size must not be negative, got {self.size}")


def test_a_record_without_init_takes_its_fields_by_keyword() -> None:
    event = Event(name="a", tags=("x",))
    assert (event.name, event.count, event.tags) == ("a", 0, ("x",))
    assert vars(Event)["__slots__"] == ("name", "count", "tags")
    assert Event.LIMIT == 10
    assert repr(event) == "Event(name='a', count=0, tags=('x',))"
    assert event == Event(name="a", tags=("x",))
    assert hash(event) == hash(Event(name="a", tags=("x",)))
    assert event != Event(name="a", count=1, tags=("x",))
    assert_type(Event(name="b").count, int)
    assert pickle.loads(pickle.dumps(event)) == event
    assert copy.deepcopy(event) == event
    assert evolve(event, count=2) == Event(name="a", count=2, tags=("x",))
    assert attrs.evolve(event, count=2) == Event(name="a", count=2, tags=("x",))
    assert attrs.asdict(event) == {"name": "a", "count": 0, "tags": ("x",)}
    assert [(f.name, f.default) for f in attrs.fields(Event)] == [
        ("name", attrs.NOTHING),
        ("count", 0),
        ("tags", ()),
    ]


def test_a_subclass_adds_fields_and_keeps_the_defaults() -> None:
    stamped = Stamped(name="a", at=1.5)
    assert (stamped.name, stamped.count, stamped.at) == ("a", 0, 1.5)
    assert vars(Stamped)["__slots__"] == ("at",)
    assert stamped == Stamped(name="a", at=2.5)  # eq_exclude
    assert repr(stamped) == "Stamped(name='a', count=0, tags=(), at=1.5)"


def test_the_generic_init_fails_like_python() -> None:
    with pytest.raises(
        TypeError, match=r"^Event\.__init__\(\) missing 1 required keyword-only argument: 'name'$"
    ):
        Event()  # type: ignore[call-arg]
    with pytest.raises(
        TypeError, match=r"^Event\.__init__\(\) got an unexpected keyword argument 'cnt'$"
    ):
        Event(name="a", cnt=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"^Event\.__init__\(\) takes 1 positional argument but 2"):
        Event("a")  # type: ignore[call-arg]
    with pytest.raises(
        TypeError,
        match=r"missing 3 required keyword-only arguments: 'turn_id', 'time', and 'outcome'$",
    ):
        TurnFinished()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"missing 2 required .*: 'name' and 'schema'$"):
        ResponseFormat()  # type: ignore[call-arg]
    Event(name=1)  # type: ignore[arg-type]  # (not checked at run time, like attrs)


def test_post_init_checks_the_stored_fields() -> None:
    assert Checked(size=1).size == 1
    with pytest.raises(ValueError, match="size must not be negative"):
        Checked(size=-1)
    with pytest.raises(ValueError, match="size must not be negative"):
        evolve(Checked(size=1), size=-1)
    with pytest.raises(ValueError, match="exactly one of data"):
        Image()
    with pytest.raises(ValueError, match="name must not be empty"):
        ResponseFormat(name="", schema={})


def test_a_record_that_generates_its_init_has_no_private_fields() -> None:
    with pytest.raises(TypeError, match="private fields writes its own __init__"):

        class Private(Record):
            _secret: int


def test_the_record_module_imports_no_attrs() -> None:
    import subprocess
    import sys

    code = "import sys, kova._record; print('attrs' in sys.modules)"
    assert subprocess.check_output([sys.executable, "-c", code], text=True).strip() == "False"


def test_a_mapping_field_defaults_to_one_shared_read_only_empty_mapping() -> None:

    from kova._record import EMPTY

    class Tagged(Record):
        tags: Mapping[str, str] = EMPTY

    first, second = Tagged(), Tagged(tags={"a": "b"})
    assert first.tags == {}
    assert first.tags is Tagged().tags
    assert second.tags == {"a": "b"}
    with pytest.raises(TypeError):
        first.tags["a"] = "b"  # type: ignore[index]


def test_attrs_configs_and_records_raise_the_same_error_on_assignment() -> None:
    from kova.providers.openai import OpenAiConfig

    for value in (Text(text="hi"), OpenAiConfig(model="m", api_key="k")):
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            value.model = "x"  # type: ignore[misc]
