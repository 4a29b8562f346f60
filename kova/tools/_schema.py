"""Python type hints and Google docstrings turned into JSON Schema (for ``@tool``).

Each supported type becomes a :class:`_Node`: its JSON Schema, a converter from the JSON the
model sends to the Python value the function expects (an ``Enum`` member, a dataclass
instance, a pydantic model), and a cheap structural test used to pick a branch of a union.

Named classes (dataclasses, attrs classes, TypedDicts) are inlined rather than referenced
through ``$defs``: models follow a flat schema more reliably, and several providers accept
only a subset of ``$ref``. A class that contains itself cannot be inlined and is rejected.
Pydantic models bring their own schema (with ``$defs``); those definitions are hoisted to the
root of the tool's schema so their ``#/$defs/...`` references still resolve.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import functools
import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union, get_args, get_origin

import attrs

from .._record import Record, evolve
from ._context import ToolContext
from ._errors import ToolDefinitionError

if typing.TYPE_CHECKING:
    from .._models import JSONValue

__all__ = ["ParameterSpec", "build_parameters", "parse_docstring"]

Schema = dict[str, "JSONValue"]
Converter = Callable[[Any], Any]
"""JSON value in, Python value out (``Any``: it carries arbitrary user types)."""


def _same(value: Any) -> Any:
    return value


class _Node(Record):
    schema: Schema
    convert: Converter = _same
    matches: Callable[[object], bool] = lambda _value: True
    """Whether a JSON value has this node's shape (picks the branch of a union to convert)."""
    trivial: bool = True
    """``convert`` is the identity for every value (lets containers skip copying)."""


class ParameterSpec(Record):
    """One function parameter as the model sees it and as the function receives it."""

    name: str
    positional_only: bool
    required: bool
    default: Any
    """The Python default (``inspect.Parameter.empty`` when required)."""
    convert: Converter
    trivial: bool
    context: bool = False
    """The parameter takes the call's :class:`~kova.tools.ToolContext` (not shown to the
    model)."""


# ---------------------------------------------------------------------------------------------
# Docstrings

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Attributes|Keyword Args|Keyword Arguments|Returns|"
    r"Return|Raises|Yields|Yield|Examples?|Notes?|See Also|Warnings?|Todo|References)\s*:\s*$"
)
_ARGUMENT_SECTIONS = frozenset(
    {"Args", "Arguments", "Parameters", "Params", "Attributes", "Keyword Args",
     "Keyword Arguments"}
)  # fmt: skip
_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The free text of a Google-style docstring and its per-argument descriptions.

    Returns:
        ``(description, arguments)``: the text before the first section (summary plus any
        further paragraphs), and a map from each name in an ``Args:`` (or ``Attributes:``,
        ``Parameters:``...) section to its description, continuation lines joined.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    arguments: dict[str, str] = {}
    index = 0
    while index < len(lines) and not _SECTION.match(lines[index]):
        description.append(lines[index])
        index += 1
    while index < len(lines):
        header = _SECTION.match(lines[index])
        index += 1
        if header is None:
            continue
        base_indent: int | None = None
        current: str | None = None
        while index < len(lines):
            line = lines[index]
            if not line.strip():
                index += 1
                continue
            indent = len(line) - len(line.lstrip())
            if indent == 0:
                break  # the next section (or trailing text)
            if base_indent is None:
                base_indent = indent
            if header.group(1) in _ARGUMENT_SECTIONS:
                entry = _ENTRY.match(line.strip()) if indent <= base_indent else None
                if entry is not None:
                    current = entry.group(1)
                    arguments[current] = entry.group(2).strip()
                elif current is not None:
                    arguments[current] = f"{arguments[current]} {line.strip()}".strip()
            index += 1
    return _join_paragraphs(description), arguments


def _join_paragraphs(lines: list[str]) -> str:
    paragraphs: list[str] = []
    current: list[str] = []
    for line in [*lines, ""]:
        if line.strip():
            current.append(line.strip())
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    return "\n\n".join(paragraphs)


def _class_doc(cls: type) -> tuple[str, dict[str, str]]:
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str):
        return "", {}
    if dataclasses.is_dataclass(cls) and doc.startswith(f"{cls.__name__}("):
        return "", {}  # the signature dataclasses writes when a class has no docstring
    return parse_docstring(doc)


# ---------------------------------------------------------------------------------------------
# Types


def _json_default(value: object) -> Any:
    """A Python default as JSON, or raise ``TypeError`` when it has no JSON form."""
    if isinstance(value, enum.Enum):
        return value.value
    raise TypeError(type(value).__name__)


def _as_json(value: object) -> tuple[bool, JSONValue]:
    try:
        text = json.dumps(value, default=_json_default)
    except (TypeError, ValueError):
        return False, None
    loaded: JSONValue = json.loads(text)
    return True, loaded


_PRIMITIVES: dict[object, tuple[str, type | tuple[type, ...]]] = {
    str: ("string", str),
    int: ("integer", int),
    float: ("number", (int, float)),
    bool: ("boolean", bool),
}

_SEQUENCES = {list, collections.abc.Sequence, collections.abc.MutableSequence,
              collections.abc.Iterable, collections.abc.Collection}  # fmt: skip
_SETS = {set, frozenset, collections.abc.Set, collections.abc.MutableSet}
_MAPPINGS = {dict, collections.abc.Mapping, collections.abc.MutableMapping}


def _is_instance(kinds: type | tuple[type, ...]) -> Callable[[object], bool]:
    # bool is an int in Python but not in JSON: only a bool hint matches True and False.
    allow_bool = bool in (kinds if isinstance(kinds, tuple) else (kinds,))

    def matches(value: object) -> bool:
        return isinstance(value, kinds) and (allow_bool or not isinstance(value, bool))

    return matches


def _json_type(values: list[JSONValue]) -> str | None:
    """The JSON type every value shares, if they share one."""
    kinds: set[str] = set()
    for value in values:
        if isinstance(value, bool):
            kinds.add("boolean")
        elif isinstance(value, int):
            kinds.add("integer")
        elif isinstance(value, float):
            kinds.add("number")
        elif isinstance(value, str):
            kinds.add("string")
        elif value is None:
            kinds.add("null")
        else:
            return None
    return kinds.pop() if len(kinds) == 1 else None


class _Builder:
    """Builds nodes for one tool; collects the ``$defs`` hoisted from pydantic models."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.defs: dict[str, JSONValue] = {}
        self._open: list[type] = []  # classes being described (recursion guard)

    def fail(self, message: str) -> ToolDefinitionError:
        return ToolDefinitionError(f"{self.where}: {message}")

    def node(self, hint: Any) -> _Node:
        if hint is inspect.Parameter.empty or hint is Any or hint is object:
            return _Node(schema={})
        if hint is None or hint is type(None):
            return _Node(schema={"type": "null"}, matches=lambda value: value is None)
        if isinstance(hint, typing.NewType):
            return self.node(hint.__supertype__)
        origin = get_origin(hint)
        if origin is typing.Required or origin is typing.NotRequired:
            return self.node(get_args(hint)[0])  # TypedDict markers; required keys come apart
        if origin is typing.Annotated:
            inner, *metadata = get_args(hint)
            node = self.node(inner)
            # A plain string, or anything with a string ``description`` (pydantic's Field).
            notes = [
                item if isinstance(item, str) else item.description
                for item in metadata
                if isinstance(item, str) or isinstance(getattr(item, "description", None), str)
            ]
            if notes:
                node = evolve(node, schema={**node.schema, "description": notes[-1]})
            return node
        if origin is Union or origin is types.UnionType:
            return self._union(get_args(hint))
        if origin is Literal:
            return self._literal(get_args(hint))
        if hint in _PRIMITIVES:
            name, kinds = _PRIMITIVES[hint]
            if hint is float:
                return _Node(
                    schema={"type": name},
                    convert=float,
                    matches=_is_instance(kinds),
                    trivial=False,
                )
            return _Node(schema={"type": name}, matches=_is_instance(kinds))
        if origin is not None:
            return self._generic(hint, origin, get_args(hint))
        if hint in _SEQUENCES or hint is tuple:
            return _Node(schema={"type": "array"}, matches=_is_instance((list, tuple)))
        if hint in _MAPPINGS:
            return _Node(schema={"type": "object"}, matches=_is_instance(Mapping))
        if isinstance(hint, type):
            if issubclass(hint, enum.Enum):
                return self._enum(hint)
            if typing.is_typeddict(hint):
                return self._class(hint, self._typeddict_fields(hint), build=dict)
            if dataclasses.is_dataclass(hint):
                return self._class(hint, self._dataclass_fields(hint), build=hint)
            if attrs.has(hint):
                return self._class(hint, self._attrs_fields(hint), build=hint)
            pydantic_node = self._pydantic(hint)
            if pydantic_node is not None:
                return pydantic_node
        raise self.fail(
            f"cannot describe type {hint!r} as JSON Schema; use str, int, float, bool, None, "
            "list, dict[str, ...], Literal, an Enum, a TypedDict, a dataclass, an attrs class "
            "or a pydantic model, or write a Tool class with an explicit schema"
        )

    def _union(self, members: tuple[Any, ...]) -> _Node:
        nodes = [self.node(member) for member in members]
        trivial = all(node.trivial for node in nodes)

        def convert(value: Any) -> Any:
            for node in nodes:
                if node.matches(value):
                    return node.convert(value)
            return value

        return _Node(
            schema={"anyOf": [node.schema for node in nodes]},
            convert=_same if trivial else convert,
            matches=lambda value: any(node.matches(value) for node in nodes),
            trivial=trivial,
        )

    def _literal(self, values: tuple[Any, ...]) -> _Node:
        for value in values:
            if isinstance(value, enum.Enum):
                raise self.fail(f"Literal of an Enum member ({value!r}) is not supported")
            if not (value is None or isinstance(value, str | int | float | bool)):
                raise self.fail(f"Literal value {value!r} is not a JSON value")
        options: list[JSONValue] = list(values)
        schema: Schema = {"enum": options}
        kind = _json_type(options)
        if kind is not None:
            schema = {"type": kind, **schema}
        # bool == 1 in Python, so compare types as well as values.
        keys = {(type(value), value) for value in values}
        return _Node(schema=schema, matches=lambda value: (type(value), value) in keys)

    def _enum(self, cls: type[enum.Enum]) -> _Node:
        options: list[JSONValue] = []
        for member in cls:
            ok, value = _as_json(member.value)
            if not ok or isinstance(value, list | dict):
                raise self.fail(f"Enum {cls.__name__} has a value that is not a JSON scalar")
            options.append(value)
        schema: Schema = {"enum": options}
        kind = _json_type(options)
        if kind is not None:
            schema = {"type": kind, **schema}
        description, _ = _class_doc(cls)
        if description:
            schema["description"] = description
        values = {(type(member.value), member.value) for member in cls}
        return _Node(
            schema=schema,
            convert=cls,
            matches=lambda value: (type(value), value) in values,
            trivial=False,
        )

    def _generic(self, hint: Any, origin: Any, arguments: tuple[Any, ...]) -> _Node:
        if origin in _SEQUENCES or origin in _SETS:
            item = self.node(arguments[0]) if arguments else _Node(schema={})
            schema: Schema = {"type": "array", "items": item.schema}
            if origin in _SETS:
                schema["uniqueItems"] = True
            collect: Callable[[Any], Any] = list
            if origin is frozenset or origin is collections.abc.Set:
                collect = frozenset
            elif origin in _SETS:
                collect = set
            if item.trivial and collect is list:
                return _Node(schema=schema, matches=_is_instance((list, tuple)))
            return _Node(
                schema=schema,
                convert=lambda value: collect(item.convert(element) for element in value),
                matches=_is_instance((list, tuple)),
                trivial=False,
            )
        if origin is tuple:
            if len(arguments) == 2 and arguments[1] is Ellipsis:
                item = self.node(arguments[0])
                return _Node(
                    schema={"type": "array", "items": item.schema},
                    convert=lambda value: tuple(item.convert(element) for element in value),
                    matches=_is_instance((list, tuple)),
                    trivial=False,
                )
            if arguments == ((),):  # tuple[()]
                arguments = ()
            items = [self.node(argument) for argument in arguments]
            return _Node(
                schema={
                    "type": "array",
                    "prefixItems": [item.schema for item in items],
                    "items": False,
                    "minItems": len(items),
                    "maxItems": len(items),
                },
                convert=lambda value: tuple(
                    item.convert(element) for item, element in zip(items, value, strict=True)
                ),
                matches=_is_instance((list, tuple)),
                trivial=False,
            )
        if origin in _MAPPINGS:
            key, value_hint = arguments if arguments else (str, Any)
            if key is not str and key is not Any:
                raise self.fail(f"{hint!r}: JSON object keys are strings; use dict[str, ...]")
            value_node = self.node(value_hint)
            schema = {"type": "object", "additionalProperties": value_node.schema}
            if value_node.trivial:
                return _Node(schema=schema, matches=_is_instance(Mapping))
            return _Node(
                schema=schema,
                convert=lambda value: {k: value_node.convert(v) for k, v in value.items()},
                matches=_is_instance(Mapping),
                trivial=False,
            )
        raise self.fail(f"cannot describe type {hint!r} as JSON Schema")

    # -- classes --------------------------------------------------------------------------

    def _hints(self, cls: type) -> dict[str, Any]:
        try:
            return typing.get_type_hints(cls, include_extras=True)
        except NameError as exc:
            raise self.fail(f"cannot resolve the type hints of {cls.__qualname__}: {exc}") from exc

    def _typeddict_fields(self, cls: type) -> list[tuple[str, Any, bool, object]]:
        hints = self._hints(cls)
        required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset(hints))
        return [
            (name, hint, name in required_keys, inspect.Parameter.empty)
            for name, hint in hints.items()
        ]

    def _dataclass_fields(self, cls: type) -> list[tuple[str, Any, bool, object]]:
        hints = self._hints(cls)
        fields = []
        for field in dataclasses.fields(cls):
            if not field.init:
                continue
            has_default = (
                field.default is not dataclasses.MISSING
                or field.default_factory is not dataclasses.MISSING
            )
            default = (
                field.default
                if field.default is not dataclasses.MISSING
                else (inspect.Parameter.empty)
            )
            fields.append((field.name, hints.get(field.name, Any), not has_default, default))
        return fields

    def _attrs_fields(self, cls: type) -> list[tuple[str, Any, bool, object]]:
        hints = self._hints(cls)
        fields = []
        for field in attrs.fields(cls):
            if not field.init:
                continue
            required = field.default is attrs.NOTHING
            default: object = inspect.Parameter.empty
            if not required and not isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
                default = field.default
            fields.append(
                (field.alias, hints.get(field.name, field.type or Any), required, default)
            )
        return fields

    def _class(
        self, cls: type, fields: list[tuple[str, Any, bool, object]], *, build: Callable[..., Any]
    ) -> _Node:
        if cls in self._open:
            raise self.fail(
                f"{cls.__qualname__} contains itself; recursive types are not supported"
            )
        self._open.append(cls)
        try:
            description, field_docs = _class_doc(cls)
            properties: dict[str, JSONValue] = {}
            required: list[JSONValue] = []
            converters: list[tuple[str, Converter]] = []
            for name, hint, is_required, default in fields:
                node = self.node(hint)
                properties[name] = _decorate(node.schema, field_docs.get(name), default)
                if is_required:
                    required.append(name)
                if not node.trivial:
                    converters.append((name, node.convert))
        finally:
            self._open.pop()
        schema: Schema = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
        if description:
            schema["description"] = description

        def convert(value: Any) -> Any:
            arguments = dict(value)
            for name, field_convert in converters:
                if name in arguments:
                    arguments[name] = field_convert(arguments[name])
            return build(**arguments)

        return _Node(schema=schema, convert=convert, matches=_is_instance(Mapping), trivial=False)

    def _pydantic(self, cls: type) -> _Node | None:
        if "pydantic" not in sys.modules:
            return None  # a pydantic model cannot exist unless pydantic was imported
        import pydantic

        if not issubclass(cls, pydantic.BaseModel):
            return None
        model: type[pydantic.BaseModel] = cls
        schema = dict(model.model_json_schema())
        defs = schema.pop("$defs", {})
        if isinstance(defs, Mapping):
            for name, definition in defs.items():
                if name in self.defs and self.defs[name] != definition:
                    raise self.fail(f"two different pydantic models are both named {name!r}")
                self.defs[name] = definition
        return _Node(
            schema=schema,
            convert=model.model_validate,
            matches=_is_instance(Mapping),
            trivial=False,
        )


def _decorate(schema: Schema, description: str | None, default: object) -> Schema:
    result = dict(schema)
    if description and "description" not in result:
        result["description"] = description
    if default is not inspect.Parameter.empty:
        ok, value = _as_json(default)
        if ok:
            result["default"] = value
    return result


def _annotated(function: Callable[..., Any]) -> Callable[..., Any]:
    """The object whose annotations describe ``function``'s parameters."""
    while isinstance(function, functools.partial):
        function = function.func
    if inspect.isroutine(function) or isinstance(function, type):
        return function
    return type(function).__call__  # a callable instance


def build_parameters(
    function: Callable[..., Any], *, where: str, argument_docs: Mapping[str, str]
) -> tuple[Schema, tuple[ParameterSpec, ...]]:
    """The JSON Schema of ``function``'s parameters and how to bind JSON arguments to them.

    Raises:
        ToolDefinitionError: a parameter is ``self``/``cls``/``*args``/``**kwargs``, or its
            type has no JSON Schema form.
    """
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"{where}: cannot read its signature: {exc}") from exc
    try:
        hints = typing.get_type_hints(_annotated(function), include_extras=True)
    except NameError as exc:
        raise ToolDefinitionError(f"{where}: cannot resolve its type hints: {exc}") from exc
    builder = _Builder(where)
    properties: dict[str, JSONValue] = {}
    required: list[JSONValue] = []
    specs: list[ParameterSpec] = []
    for parameter in signature.parameters.values():
        name = parameter.name
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            raise builder.fail(f"*{name} cannot be given by a model; use a list parameter")
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            raise builder.fail(f"**{name} cannot be given by a model; use named parameters")
        if name in ("self", "cls"):
            raise builder.fail(
                f"parameter {name!r}: decorate a plain function or a staticmethod, not a method "
                "(a model cannot supply the instance)"
            )
        hint = hints.get(name, parameter.annotation)
        if hint is ToolContext or get_origin(hint) is ToolContext:
            # Filled in from the call, not by the model: no schema property.
            specs.append(
                ParameterSpec(
                    name=name,
                    positional_only=parameter.kind is inspect.Parameter.POSITIONAL_ONLY,
                    required=False,
                    default=parameter.default,
                    convert=_same,
                    trivial=True,
                    context=True,
                )
            )
            continue
        builder.where = f"{where}, parameter {name!r}"
        node = builder.node(hint)
        builder.where = where
        is_required = parameter.default is inspect.Parameter.empty
        properties[name] = _decorate(node.schema, argument_docs.get(name), parameter.default)
        if is_required:
            required.append(name)
        specs.append(
            ParameterSpec(
                name=name,
                positional_only=parameter.kind is inspect.Parameter.POSITIONAL_ONLY,
                required=is_required,
                default=parameter.default,
                convert=node.convert,
                trivial=node.trivial,
            )
        )
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    # The function cannot accept names it does not declare, so say so to the model up front.
    schema["additionalProperties"] = False
    if builder.defs:
        schema["$defs"] = builder.defs
    return schema, tuple(specs)
