"""Validating tool arguments against a tool's JSON Schema.

kova uses the ``jsonschema`` library rather than a home-made subset: models send every shape
of wrong argument, and a partial validator would let some through to the tool. ``jsonschema``
is imported on the first validation, not with ``import kova``, so a program that never
validates never pays for the import.

A schema is compiled (checked and turned into a validator object) once per
:class:`ArgumentValidator`. The :class:`~kova.tools.ToolRegistry` and ``@tool`` tools keep one
per tool, so the agent loop compiles each tool's schema once, not once per call.

Valid arguments, the usual case, take a fast path: a schema written only with the keywords
tools use most (``type``, ``properties``, ``required``, ``additionalProperties``, ``items``,
``enum``/``const`` of strings, ``anyOf``, the numeric and length bounds, and annotations) is
also compiled into a plain Python predicate that says "valid" in a few microseconds, where
``jsonschema`` takes ~80 us for a one-field object. The predicate is only ever trusted when it
says valid, and it says so only where ``jsonschema`` would (``tests/tools/test_validate.py``
checks that over random schemas and values); anything else, including every invalid
argument, goes to ``jsonschema``, which words the problems. A schema with any other keyword
(``$ref``, ``pattern``, ``oneOf``, ...) has no fast path.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from ._errors import InvalidToolArguments, ToolDefinitionError

if TYPE_CHECKING:
    from collections.abc import Callable

    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

    from .._models import JSONObject

__all__ = [
    "ArgumentValidator",
    "argument_problems",
    "fast_check",
    "load_validation",
    "validate_arguments",
]

MAX_PROBLEMS = 20
"""At most this many problems are listed; the rest are counted. A model needs the first few."""
MAX_PROBLEM_CHARS = 300
"""A problem line is cut to this length (jsonschema quotes the offending value in full)."""


def load_validation() -> None:
    """Import the validation library now (blocking: run it in a worker thread).

    ``jsonschema`` is imported lazily so that ``import kova`` stays light, but importing it
    takes a few hundred milliseconds; done at a tool's first call, that would block the event
    loop (every agent and stream on it) for that long. An agent with tools loads it in a
    worker thread when it opens.
    """
    from jsonschema import Draft202012Validator, validators  # noqa: F401
    from jsonschema.exceptions import best_match  # noqa: F401


class ArgumentValidator:
    """One JSON Schema, compiled on first use and reused for every later check.

    Args:
        schema: the tool's ``parameters`` schema (a JSON Schema object). The draft is taken
            from its ``$schema`` key, defaulting to 2020-12.
    """

    __slots__ = ("_fast", "_schema", "_validator")

    def __init__(self, schema: JSONObject) -> None:
        self._schema = schema
        self._validator: Validator | None = None
        self._fast: Callable[[object], bool] | None = None

    @property
    def schema(self) -> JSONObject:
        """The schema this validator checks against (the very object it was given)."""
        return self._schema

    def compile(self) -> None:
        """Check the schema and build the validator now instead of at the first check.

        Raises:
            ToolDefinitionError: the schema is not a valid JSON Schema.
        """
        self._compiled()

    def problems(self, arguments: object) -> tuple[str, ...]:
        """Everything wrong with ``arguments``, one line each; empty when they are valid.

        Each line starts with the JSON path of the offending value (``$`` is the arguments
        object itself), e.g. ``$.city: 'city' is a required property``.

        Raises:
            ToolDefinitionError: the schema is not a valid JSON Schema.
        """
        validator = self._compiled()
        fast = self._fast
        if fast is not None and fast(arguments):
            return ()
        errors = sorted(
            # Any: jsonschema's stubs want their own JSON alias; it checks any object at runtime.
            validator.iter_errors(cast("Any", arguments)),
            key=lambda error: (tuple(str(part) for part in error.absolute_path), error.message),
        )
        lines = [_describe(error) for error in errors[:MAX_PROBLEMS]]
        if len(errors) > MAX_PROBLEMS:
            lines.append(f"... and {len(errors) - MAX_PROBLEMS} more problems")
        return tuple(lines)

    def validate(self, arguments: object, *, tool_name: str | None = None) -> None:
        """Raise unless ``arguments`` match the schema.

        Args:
            arguments: the parsed arguments (normally a JSON object).
            tool_name: named in the error message.

        Raises:
            InvalidToolArguments: listing every problem (see :meth:`problems`).
            ToolDefinitionError: the schema is not a valid JSON Schema.
        """
        fast = self._fast  # set once compiled: valid arguments end here
        if fast is not None and fast(arguments):
            return
        problems = self.problems(arguments)
        if problems:
            raise InvalidToolArguments(problems, tool_name=tool_name)

    def _compiled(self) -> Validator:
        if self._validator is None:
            from jsonschema import Draft202012Validator
            from jsonschema.exceptions import SchemaError
            from jsonschema.validators import validator_for

            if not isinstance(self._schema, Mapping):
                raise ToolDefinitionError(
                    f"a tool's parameters must be a JSON Schema object, got {self._schema!r}"
                )
            base = validator_for(self._schema, default=Draft202012Validator)
            try:
                base.check_schema(cast("Any", self._schema))  # Any: the stubs want a dict
            except SchemaError as exc:
                raise ToolDefinitionError(
                    f"a tool's parameters are not a valid JSON Schema: {exc.message}"
                ) from exc
            self._validator = _lenient(base)(self._schema)
            if base is Draft202012Validator:
                self._fast = fast_check(self._schema)
        return self._validator


def argument_problems(schema: JSONObject, arguments: object) -> tuple[str, ...]:
    """Everything wrong with ``arguments`` under ``schema`` (empty when valid).

    Compiles the schema on every call; hold an :class:`ArgumentValidator` to check many
    arguments against one schema.

    Raises:
        ToolDefinitionError: the schema is not a valid JSON Schema.
    """
    return ArgumentValidator(schema).problems(arguments)


def validate_arguments(
    schema: JSONObject, arguments: object, *, tool_name: str | None = None
) -> None:
    """Raise unless ``arguments`` match ``schema``.

    Compiles the schema on every call; hold an :class:`ArgumentValidator` (or validate
    through :meth:`ToolRegistry.validate_arguments`) to reuse the compiled form.

    Raises:
        InvalidToolArguments: listing every problem, worded for the model.
        ToolDefinitionError: the schema is not a valid JSON Schema.
    """
    ArgumentValidator(schema).validate(arguments, tool_name=tool_name)


# A memo of a pure function of the (few) jsonschema draft classes: it never changes what any
# caller sees, so it is not shared mutable state in the sense STYLE.md forbids.
@functools.cache
def _lenient(base: type[Validator]) -> type[Validator]:
    """``base`` with JSON types widened to kova's ``JSONValue``.

    ``jsonschema`` accepts only ``list`` as an array and ``dict`` as an object, but kova's
    ``JSONValue`` allows any ``Sequence`` and ``Mapping`` (a tuple, a ``MappingProxyType``), so
    arguments built in Python rather than by ``json.loads`` validate too.
    """
    from jsonschema import validators

    def is_array(_checker: object, instance: object) -> bool:
        return isinstance(instance, list | tuple)

    def is_object(_checker: object, instance: object) -> bool:
        return isinstance(instance, Mapping)

    checker = base.TYPE_CHECKER.redefine_many({"array": is_array, "object": is_object})
    extended: type[Validator] = validators.extend(  # type: ignore[no-untyped-call]
        base, type_checker=checker
    )
    return extended


def _describe(error: ValidationError) -> str:
    if error.validator in ("anyOf", "oneOf") and error.context:
        # "x is not valid under any of the given schemas" tells the model little.
        branches = error.context
        if all(not branch.relative_path and branch.validator == "type" for branch in branches):
            # Every branch failed only on its type (the usual Optional[int] case): name them.
            types: list[str] = []
            for branch in branches:
                expected = branch.validator_value
                names = expected if isinstance(expected, list) else [expected]
                types.extend(str(name) for name in names if str(name) not in types)
            expected_types = " or ".join(map(repr, types))
            line = f"{error.json_path}: {error.instance!r} is not of type {expected_types}"
        else:
            # Otherwise the most relevant failure inside the branches, e.g. "$.points[0].x:
            # '1' is not of type 'integer'" rather than "$.points is not valid ...".
            from jsonschema.exceptions import best_match

            relevant = best_match([error])
            line = f"{relevant.json_path}: {relevant.message}"
    else:
        line = f"{error.json_path}: {error.message}"
    if len(line) > MAX_PROBLEM_CHARS:
        line = line[: MAX_PROBLEM_CHARS - 3] + "..."
    return line


# The fast path. Each builder returns a predicate that is true only where jsonschema (with
# _lenient's types, draft 2020-12, no format checking) finds no error, or None when the schema
# uses something it does not model. False means "ask jsonschema", never "invalid".

_Check: TypeAlias = "Callable[[object], bool]"

_ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",  # an annotation unless a format checker is given (kova gives none)
    }
)
_FAST_KEYWORDS = _ANNOTATIONS | {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
}
_MAX_FAST_DEPTH = 32


def _is_number(value: object) -> bool:
    return (type(value) is int or type(value) is float) or (
        isinstance(value, int | float) and not isinstance(value, bool)
    )


def _is_integer(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and value.is_integer()


_TYPES: dict[str, _Check] = {
    "string": lambda value: isinstance(value, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "array": lambda value: isinstance(value, list | tuple),
    # A decoded JSON object is a dict: answered without the Mapping ABC check (~6x dearer).
    "object": lambda value: type(value) is dict or isinstance(value, Mapping),
}
_CLASSES: dict[_Check, type | tuple[type, ...]] = {
    _TYPES["string"]: str,
    _TYPES["boolean"]: bool,
    _TYPES["null"]: type(None),
    _TYPES["array"]: (list, tuple),
}
"""The plain types' checks as the classes they test."""


def fast_check(schema: object) -> Callable[[object], bool] | None:
    """A predicate true only for values ``schema`` accepts, or ``None`` (no fast path).

    A false answer means "not decided here": the caller asks ``jsonschema``. The schema is
    assumed valid (it has passed ``check_schema``) and of draft 2020-12.
    """
    return _build(schema, 0)


def _build(schema: object, depth: int) -> _Check | None:
    if schema is True:
        return lambda _value: True
    if not isinstance(schema, Mapping) or depth > _MAX_FAST_DEPTH:
        return None
    if any(key not in _FAST_KEYWORDS for key in schema):
        return None
    checks: list[_Check] = []
    for builder in (_type_check, _object_check, _array_check, _choice_check, _bound_check):
        built = builder(schema, depth)
        if built is None:
            return None
        checks.extend(built)
    if not checks:
        return lambda _value: True
    if len(checks) == 1:
        return checks[0]
    return _all_of(tuple(checks))


def _all_of(checks: tuple[_Check, ...]) -> _Check:
    def all_of(value: object) -> bool:
        for check in checks:  # noqa: SIM110 - all() of a generator resumes it per check
            if not check(value):
                return False
        return True

    return all_of


def _type_check(schema: Mapping[str, object], _depth: int) -> list[_Check] | None:
    wanted = schema.get("type")
    if wanted is None or wanted == "object":  # an object's type is checked by _object_check
        return []
    names = [wanted] if isinstance(wanted, str) else wanted
    if not isinstance(names, list) or not names:
        return None
    tests = []
    for name in names:
        test = _TYPES.get(name) if isinstance(name, str) else None
        if test is None:
            return None
        tests.append(test)
    if len(tests) == 1:
        return [tests[0]]
    any_of = tuple(tests)
    return [lambda value: any(test(value) for test in any_of)]


def _object_check(schema: Mapping[str, object], depth: int) -> list[_Check] | None:
    checks: list[_Check] = []
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        return None
    subchecks: list[tuple[str, _Check]] = []
    for name, subschema in properties.items():
        check = _build(subschema, depth + 1)
        if check is None:
            return None
        subchecks.append((name, check))
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        return None
    open_ended = True  # no additionalProperties: any other property goes
    extra: _Check | None = None  # None with open_ended False: no other property goes
    if "additionalProperties" in schema:
        additional = schema["additionalProperties"]
        open_ended = additional is True
        if additional is not False and not open_ended:
            extra = _build(additional, depth + 1)
            if extra is None:
                return None
    typed = schema.get("type") == "object"
    if not subchecks and not required and open_ended:
        return [_TYPES["object"]] if typed else checks
    known = frozenset(properties)
    # A property of a plain type ({"type": "string"}) is checked here, with no call of its own.
    kinds = tuple((name, _CLASSES[check]) for name, check in subchecks if check in _CLASSES)
    pairs = tuple((name, check) for name, check in subchecks if check not in _CLASSES)
    needed = tuple(required)

    def object_check(value: object) -> bool:
        if type(value) is not dict and not isinstance(value, Mapping):
            return not typed  # these keywords apply to objects only
        for name in needed:
            if name not in value:
                return False
        for name, kind in kinds:
            if name in value and not isinstance(value[name], kind):
                return False
        for name, check in pairs:
            if name in value and not check(value[name]):
                return False
        if open_ended:
            return True
        for name in value:
            if name in known:
                continue
            if extra is None or not isinstance(name, str) or not extra(value[name]):
                return False
        return True

    checks.append(object_check)
    return checks


def _array_check(schema: Mapping[str, object], depth: int) -> list[_Check] | None:
    if "items" not in schema:
        return []
    item_check = _build(schema["items"], depth + 1)
    if item_check is None:
        return None

    def array_check(value: object) -> bool:
        if not isinstance(value, list | tuple):
            return True
        return all(item_check(item) for item in value)

    return [array_check]


def _choice_check(schema: Mapping[str, object], depth: int) -> list[_Check] | None:
    checks: list[_Check] = []
    if "enum" in schema:
        choices = schema["enum"]
        if not isinstance(choices, list):
            return None
        # Strings only: jsonschema's equality tells 1 from True and 1.0 from 1 in ways a set
        # would not; any other value is left to jsonschema.
        strings = frozenset(choice for choice in choices if isinstance(choice, str))
        checks.append(lambda value: isinstance(value, str) and value in strings)
    if "const" in schema:
        constant = schema["const"]
        if not isinstance(constant, str):
            return None
        checks.append(lambda value: isinstance(value, str) and value == constant)
    if "anyOf" in schema:
        branches = schema["anyOf"]
        if not isinstance(branches, list) or not branches:
            return None
        built = [_build(branch, depth + 1) for branch in branches]
        if any(check is None for check in built):
            return None
        any_of = tuple(check for check in built if check is not None)
        checks.append(lambda value: any(check(value) for check in any_of))
    return checks


_BOUNDS: dict[str, Callable[[float, float], bool]] = {
    "minimum": lambda value, bound: value >= bound,
    "maximum": lambda value, bound: value <= bound,
    "exclusiveMinimum": lambda value, bound: value > bound,
    "exclusiveMaximum": lambda value, bound: value < bound,
}
_LENGTHS: dict[str, tuple[Callable[[object], bool], bool]] = {
    "minLength": (lambda value: isinstance(value, str), True),
    "maxLength": (lambda value: isinstance(value, str), False),
    "minItems": (lambda value: isinstance(value, list | tuple), True),
    "maxItems": (lambda value: isinstance(value, list | tuple), False),
}


def _bound_check(schema: Mapping[str, object], _depth: int) -> list[_Check] | None:
    checks: list[_Check] = []
    for keyword, compare in _BOUNDS.items():
        if keyword in schema:
            bound = schema[keyword]
            if not _is_number(bound):
                return None
            checks.append(_numeric_bound(compare, cast("float", bound)))
    for keyword, (applies, is_minimum) in _LENGTHS.items():
        if keyword in schema:
            size = schema[keyword]
            if not _is_integer(size):
                return None
            checks.append(_length_bound(applies, int(cast("float", size)), is_minimum))
    return checks


def _numeric_bound(compare: Callable[[float, float], bool], bound: float) -> _Check:
    def check(value: object) -> bool:
        if type(value) is not int and type(value) is not float:
            # jsonschema bounds every numbers.Number but bool (a Decimal too): only a plain
            # int or float is decided here.
            return isinstance(value, bool) or not isinstance(value, numbers.Number)
        try:
            return compare(cast("float", value), bound)
        except OverflowError:  # a huge int against a float: let jsonschema decide
            return False

    return check


def _length_bound(applies: Callable[[object], bool], size: int, is_minimum: bool) -> _Check:
    def check(value: object) -> bool:
        if not applies(value):
            return True
        length = len(cast("str", value))
        return length >= size if is_minimum else length <= size

    return check
