"""What a provider call sends: the conversation, the tools the model may call, and the
settings."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeVar

from ._errors import BuildError, SerializationError
from ._json import MAX_JSON_DEPTH, depth_exceeds
from ._messages import JSONObject, Message, _non_empty
from ._record import Record, evolve, set_field

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from ._messages import JSONValue

__all__ = [
    "COMPACTION_KEYS",
    "ChatRequest",
    "check_schema",
    "InferenceConfig",
    "ProviderCompaction",
    "ResponseFormat",
    "ToolAnnotations",
    "ToolDefinition",
    "annotations_from_json",
    "annotations_to_json",
    "field",
    "optional_field",
    "tool_from_json",
    "tool_to_json",
]


def _type_name(value: object) -> str:
    return type(value).__name__


def check_schema(value: object, what: str) -> JSONObject:
    """``value`` if it is a JSON object that JSON can carry, nested at most
    :data:`~kova._json.MAX_JSON_DEPTH` deep.

    Checked where a schema is given, in the caller: one that reached a provider would fail
    there, in the middle of a turn (or, unserializable, as a ``TypeError`` from the encoder).

    Raises:
        TypeError: not a mapping with string keys, or holding a value JSON cannot carry.
        ValueError: nested too deeply, holding NaN or an infinity, or containing itself.
    """
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be a JSON object (a dict), got {_type_name(value)}")
    if depth_exceeds(value):
        raise ValueError(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        json.dumps(value, allow_nan=False)
    except TypeError as exc:
        raise TypeError(f"{what} is not JSON: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"{what} is not JSON: {exc}") from None
    return value


class ToolAnnotations(Record):
    """Hints about what a tool does, the same four as MCP's tool annotations.

    ``None`` means "not said". They are hints for hosts (approval policies, replay after a
    lost connection, UIs), never sent to the model and never a security boundary on their own.
    MCP's defaults when a hint is absent: not read-only, destructive, not idempotent, open-world.
    """

    read_only: bool | None = None
    """The tool does not modify its environment."""
    destructive: bool | None = None
    """The tool may perform destructive updates (meaningful when not read-only)."""
    idempotent: bool | None = None
    """Calling it again with the same arguments has no further effect."""
    open_world: bool | None = None
    """The tool interacts with an open world of external entities (the web, ...)."""
    title: str | None = None
    """A human-readable title for UIs."""

    def __post_init__(self) -> None:
        # A hint approval policies read: "no" as a truthy string would read as read-only to
        # a handler that tests `annotations.read_only`, so only a bool or None is a hint.
        for name in ("read_only", "destructive", "idempotent", "open_world"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, bool):
                raise TypeError(
                    f"ToolAnnotations.{name} must be True, False or None, got {value!r}"
                )
        if self.title is not None and not isinstance(self.title, str):
            raise TypeError(f"ToolAnnotations.title must be a str or None, got {self.title!r}")

    @property
    def is_read_only(self) -> bool:
        """True only when the tool says it is read-only."""
        return self.read_only is True


class ToolDefinition(Record, eq_exclude=("annotations", "output_schema")):
    """What the model is told about a tool."""

    name: str
    description: str
    parameters: JSONObject
    """A JSON Schema for the tool's arguments (an ``object`` schema); by default one that
    takes no arguments."""
    annotations: ToolAnnotations | None
    """Hints for the host (see :class:`ToolAnnotations`); providers never send them. Not
    part of equality."""
    output_schema: JSONObject | None
    """A JSON Schema of the tool's structured result, where the tool declares one (MCP). Not
    part of equality."""

    def __init__(
        self,
        *,
        name: str,
        description: str = "",
        parameters: JSONObject | None = None,
        annotations: ToolAnnotations | None = None,
        output_schema: JSONObject | None = None,
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"ToolDefinition.name must be a str, got {_type_name(name)}")
        if not isinstance(description, str):
            raise TypeError(
                f"ToolDefinition.description must be a str, got {_type_name(description)}"
            )
        set_field(self, "name", _non_empty("name", name))
        set_field(self, "description", description)
        if parameters is not None and not isinstance(parameters, Mapping):
            # Only the type here: a definition is made for every step of a turn; the whole
            # schema is checked once, where a tool is registered (ToolRegistry.register).
            raise TypeError(
                f"the parameters of tool {name!r} must be a JSON object, got "
                f"{_type_name(parameters)}"
            )
        set_field(
            self,
            "parameters",
            {"type": "object", "properties": {}} if parameters is None else parameters,
        )
        set_field(self, "annotations", annotations)
        set_field(self, "output_schema", output_schema)


# -- a tool definition as stored (a saved turn, pending approvals, the MCP tool memory):
# plain JSON, read back strictly (anything else is a SerializationError naming the field)

_T = TypeVar("_T")

_NAMES = {
    bool: "a boolean",
    int: "an integer",
    str: "a string",
    list: "a list",
    dict: "an object",
}


def field(data: Mapping[str, object], key: str, kind: type[_T]) -> _T:
    """``data[key]``, which must be of ``kind`` (an int is never a bool here)."""
    value = data.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise SerializationError(
            f"stored field {key!r} must be {_NAMES.get(kind, kind.__name__)}, got {value!r:.60}"
        )
    return value


def optional_field(data: Mapping[str, object], key: str, kind: type[_T]) -> _T | None:
    if data.get(key) is None:
        return None
    return field(data, key, kind)


def annotations_to_json(annotations: ToolAnnotations) -> dict[str, JSONValue]:
    return {name: getattr(annotations, name) for name in annotations.__record_fields__}


def annotations_from_json(data: object) -> ToolAnnotations:
    if not isinstance(data, Mapping):
        raise SerializationError("stored tool annotations must be a JSON object")
    return ToolAnnotations(
        read_only=optional_field(data, "read_only", bool),
        destructive=optional_field(data, "destructive", bool),
        idempotent=optional_field(data, "idempotent", bool),
        open_world=optional_field(data, "open_world", bool),
        title=optional_field(data, "title", str),
    )


def tool_to_json(tool: ToolDefinition) -> dict[str, JSONValue]:
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "annotations": None if tool.annotations is None else annotations_to_json(tool.annotations),
        "output_schema": tool.output_schema,
    }


def tool_from_json(data: object) -> ToolDefinition:
    if not isinstance(data, Mapping):
        raise SerializationError("a stored tool definition must be a JSON object")
    annotations = data.get("annotations")
    return ToolDefinition(
        name=field(data, "name", str),
        description=field(data, "description", str),
        parameters=field(data, "parameters", dict),
        annotations=None if annotations is None else annotations_from_json(annotations),
        output_schema=optional_field(data, "output_schema", dict),
    )


class ResponseFormat(Record):
    """Constrain the final answer to a JSON schema (mapped to each provider's native way)."""

    name: str
    schema: JSONObject
    strict: bool = True
    description: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"ResponseFormat.name must be a str, got {_type_name(self.name)}")
        _non_empty("name", self.name)
        check_schema(self.schema, "ResponseFormat.schema")
        if not isinstance(self.strict, bool):
            raise TypeError(f"ResponseFormat.strict must be a bool, got {self.strict!r}")
        if self.description is not None and not isinstance(self.description, str):
            raise TypeError(
                f"ResponseFormat.description must be a str or None, got "
                f"{_type_name(self.description)}"
            )

    @classmethod
    def named(cls, name: str, schema: JSONObject, *, strict: bool = True) -> ResponseFormat:
        return cls(name=name, schema=schema, strict=strict)


def _positive_or_none(name: str, value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {_type_name(value)}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def _number_or_none(name: str, value: float | None) -> float | None:
    """A finite real number (a NaN would go on the wire as ``NaN``, which is not JSON)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, got {_type_name(value)}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    return value


def _str_or_none(name: str, value: str | None) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {_type_name(value)}")
    return value


def _stop_sequences(value: Iterable[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    try:
        sequences = tuple(value)
    except TypeError:
        raise TypeError(
            f"stop_sequences must be a str or an iterable of str, got {_type_name(value)}"
        ) from None
    for item in sequences:
        if not isinstance(item, str):
            raise TypeError(f"stop_sequences must hold str, got {_type_name(item)}")
    return sequences


class InferenceConfig(Record):
    """Per-call model parameters. ``None`` means "not set": the provider's default applies.

    Checked as it is built: a value of the wrong type is a ``TypeError``, a NaN or infinite
    ``temperature``/``top_p`` or a ``max_tokens`` below 1 a ``ValueError``.
    """

    model: str | None
    max_tokens: int | None
    temperature: float | None
    top_p: float | None
    stop_sequences: tuple[str, ...] | None
    response_format: ResponseFormat | None

    def __init__(
        self,
        *,
        model: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        stop_sequences: Iterable[str] | None = None,
        response_format: ResponseFormat | None = None,
    ) -> None:
        if response_format is not None and not isinstance(response_format, ResponseFormat):
            raise TypeError(
                "response_format must be a kova.ResponseFormat, got "
                f"{_type_name(response_format)}"
                + (
                    " (write ResponseFormat(name=..., schema={...}))"
                    if isinstance(response_format, str | Mapping)
                    else ""
                )
            )
        set_field(self, "model", _str_or_none("model", model))
        set_field(self, "max_tokens", _positive_or_none("max_tokens", max_tokens))
        set_field(self, "temperature", _number_or_none("temperature", temperature))
        set_field(self, "top_p", _number_or_none("top_p", top_p))
        set_field(self, "stop_sequences", _stop_sequences(stop_sequences))
        set_field(self, "response_format", response_format)

    def merged(self, overrides: InferenceConfig | None) -> InferenceConfig:
        """This config with every field ``overrides`` sets taking precedence."""
        if overrides is None:
            return self
        changes = {
            name: value
            for name in self.__record_fields__
            if (value := getattr(overrides, name)) is not None
        }
        return evolve(self, **changes) if changes else self


COMPACTION_KEYS = frozenset({"anthropic_compaction"})
"""``provider_metadata`` keys of an empty :class:`~kova.Text` that carries a provider's
server-side compaction (Anthropic's ``compaction`` block): everything before the message that
holds it is summed up in it, and the provider ignores it."""


class ProviderCompaction(Record):
    """The provider's own server-side context management, as a context strategy
    (``kova.agent.ProviderCompaction``; docs/context.md).

    Sent with each request to a provider that has it: Anthropic's ``context_management``
    edits (``clear_tool_uses_20250919`` for ``clear_tool_results``, ``compact_20260112`` for
    ``summarize``, with the beta headers they need), OpenAI Responses' ``context_management``
    compaction (``summarize``; Responses has no clearing). Other providers never see it: the
    strategies after it in the policy do the work there.

    ``trigger``: the prompt tokens at which the provider acts (``None``: three quarters of
    the policy's limit, so the provider acts before kova's own strategies would).
    ``keep_last`` / ``keep_tools``: the tool uses Anthropic keeps whole (the newest, and
    those of these tools); ``instructions``: what Anthropic's summary should keep.
    """

    clear_tool_results: bool = True
    summarize: bool = True
    keep_last: int = 3
    keep_tools: tuple[str, ...] = ()
    instructions: str | None = None
    trigger: int | None = None

    def __post_init__(self) -> None:
        for name in ("clear_tool_results", "summarize"):
            if not isinstance(getattr(self, name), bool):
                raise BuildError(f"ProviderCompaction({name}=...) must be a bool")
        if not (self.clear_tool_results or self.summarize):
            raise BuildError("ProviderCompaction needs clear_tool_results or summarize")
        keep_last: object = self.keep_last
        if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0:
            raise BuildError(
                f"ProviderCompaction(keep_last=...) must be an int >= 0, got {keep_last!r}"
            )
        keep_tools: object = self.keep_tools
        if not isinstance(keep_tools, tuple) or not all(isinstance(n, str) for n in keep_tools):
            raise BuildError("ProviderCompaction(keep_tools=...) must be a tuple of tool names")
        if self.instructions is not None and (
            not isinstance(self.instructions, str) or not self.instructions.strip()
        ):
            raise BuildError("ProviderCompaction(instructions=...) must be a non-empty str")
        trigger: object = self.trigger
        if trigger is not None and (
            isinstance(trigger, bool) or not isinstance(trigger, int) or trigger < 1
        ):
            raise BuildError(
                f"ProviderCompaction(trigger=...) must be a positive int, got {trigger!r}"
            )


class ChatRequest(Record):
    """One request to a model: the conversation, the tools it may call, and the settings.

    The one value that travels through the :class:`~kova.providers.Provider` protocol, the
    provider actor's messages, the scripted providers and the fake servers. Build it with
    keywords (``ChatRequest(messages=history, tools=defs, config=cfg)``) or from a prompt with
    :meth:`of`. Sequences are stored as tuples, so a request never changes after it is built.
    """

    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...]
    config: InferenceConfig
    compaction: ProviderCompaction | None
    """The provider's server-side context management to ask for (a context policy's
    :class:`ProviderCompaction`, its ``trigger`` set); providers without one ignore it."""
    deferred_tools: tuple[ToolDefinition, ...]
    """Tools for the provider's own tool search (``AgentBuilder().tool_search(
    provider_native=True)``): sent marked ``defer_loading`` beside the provider's search tool,
    so the model loads them itself (Anthropic, OpenAI Responses). Only those providers get a
    request with them (the builder refuses the others)."""

    def __init__(
        self,
        *,
        messages: Iterable[Message],
        tools: Iterable[ToolDefinition] = (),
        config: InferenceConfig | None = None,
        compaction: ProviderCompaction | None = None,
        deferred_tools: Iterable[ToolDefinition] = (),
    ) -> None:
        set_field(self, "messages", tuple(messages))
        set_field(self, "tools", tuple(tools))
        set_field(self, "deferred_tools", tuple(deferred_tools))
        set_field(self, "config", InferenceConfig() if config is None else config)
        if compaction is not None and not isinstance(compaction, ProviderCompaction):
            raise TypeError(
                f"compaction must be a ProviderCompaction, got {_type_name(compaction)}"
            )
        set_field(self, "compaction", compaction)

    @classmethod
    def of(
        cls,
        messages: str | Message | Sequence[Message],
        *,
        tools: Sequence[ToolDefinition] = (),
        config: InferenceConfig | None = None,
    ) -> ChatRequest:
        """A request from a user prompt, one message or a sequence of messages."""
        if isinstance(messages, str):
            items: tuple[Message, ...] = (Message.user(messages),)
        elif isinstance(messages, Message):
            items = (messages,)
        else:
            items = tuple(messages)
        return cls(messages=items, tools=tuple(tools), config=config or InferenceConfig())
