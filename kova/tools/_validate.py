"""Validating tool arguments against a tool's JSON Schema.

kova uses the ``jsonschema`` library rather than a home-made subset: models send every shape
of wrong argument, and a partial validator would let some through to the tool. ``jsonschema``
is imported on the first validation, not with ``import kova``, so a program that never
validates never pays for the import.

A schema is compiled (checked and turned into a validator object) once per
:class:`ArgumentValidator`. The :class:`~kova.tools.ToolRegistry` and ``@tool`` tools keep one
per tool, so the agent loop compiles each tool's schema once, not once per call.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from ._errors import InvalidToolArguments, ToolDefinitionError

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

    from .._models import JSONObject

__all__ = ["ArgumentValidator", "argument_problems", "load_validation", "validate_arguments"]

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

    __slots__ = ("_schema", "_validator")

    def __init__(self, schema: JSONObject) -> None:
        self._schema = schema
        self._validator: Validator | None = None

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
