"""Structured output: the answer constrained to a JSON schema and validated, re-asking the
model with the problem when it is not valid.

``output`` is a :class:`~kova.ResponseFormat` (a raw JSON schema: the answer is parsed and
checked against it with ``jsonschema``) or any type pydantic's ``TypeAdapter`` validates: a
pydantic model, a dataclass, a ``TypedDict``, ``list[...]``, a primitive, a union. A type
whose schema is not a JSON object (``list[City]``, ``int``) is asked for as
``{"result": ...}``, the one shape every provider's structured output accepts, and the value
inside is returned. Streamed (:func:`stream_structured_turn`), the values parsed from the
JSON prefix arrive as the text does, then the validated value.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import trio

from .._errors import KovaError, StructuredOutputError
from .._groups import lone_exceptions
from .._json import loads
from .._models import InferenceConfig, JSONValue, Message, ResponseFormat, TextDelta
from .._record import evolve
from ._events import TurnCompleted
from ._partial_json import parse_partial_json
from ._reask import feedback as _feedback

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from pydantic import BaseModel, TypeAdapter

    from ._cancel import CancelToken
    from ._events import AgentEvent, AgentResponse

__all__ = [
    "StructuredStream",
    "check_output_retries",
    "parse_partial_json",
    "response_format_for",
    "run_structured_turn",
    "stream_structured_turn",
]

T = TypeVar("T")


_WRAPPER_KEY = "result"
"""The one property of the object a non-object output is asked for in."""


def _closed(schema: JSONValue) -> tuple[JSONValue, bool]:
    """The schema with ``additionalProperties: false`` on every object, and whether every
    object also lists all its properties as required (what OpenAI's strict mode demands)."""
    if isinstance(schema, Mapping):
        strict_ok = True
        result: dict[str, JSONValue] = {}
        for key, value in schema.items():
            converted, ok = _closed(value)
            result[key] = converted
            strict_ok = strict_ok and ok
        if result.get("type") == "object" or "properties" in result:
            result.setdefault("additionalProperties", False)
            properties = result.get("properties")
            required = result.get("required")
            if isinstance(properties, Mapping):
                names = set(properties)
                listed = set(required) if isinstance(required, list) else set()
                strict_ok = strict_ok and names <= listed
        return result, strict_ok
    if isinstance(schema, list):
        items = [_closed(item) for item in schema]
        return [item for item, _ in items], all(ok for _, ok in items)
    return schema, True


class _InvalidAnswer(Exception):
    """The answer did not parse or validate; ``problem`` says why, for the user and model."""

    def __init__(self, problem: str, cause: Exception) -> None:
        self.problem = problem
        self.cause = cause
        super().__init__(problem)


_LONE_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
"""A JSON escape of a surrogate (paired or not: the fallback that reads it is exact either
way)."""


def _loads(text: str) -> Any:
    try:
        return loads(text)
    except ValueError as exc:  # not JSON, or nested too deeply (JsonNestingError)
        raise _InvalidAnswer(f"the answer is not valid JSON ({exc})", exc) from exc


class _Output:
    """What a structured turn asks for (``response_format``) and how it checks the answer."""

    def __init__(self, output: object) -> None:
        self.wrapped = False
        self._adapter: TypeAdapter[Any] | None = None
        self._validator: Any = None
        if isinstance(output, ResponseFormat):
            from ..tools._validate import ArgumentValidator

            self.response_format = output
            self._validator = ArgumentValidator(output.schema)
            self.name = output.name
            return
        if not (isinstance(output, type) or typing.get_origin(output) is not None):
            raise TypeError(
                "run_structured's output must be a kova.ResponseFormat or a type pydantic can "
                "validate (a pydantic model, a dataclass, a TypedDict, list[...], int, a union), "
                f"got {output!r}"
            )
        from pydantic import PydanticUserError, TypeAdapter

        try:
            self._adapter = TypeAdapter(cast("Any", output))
            raw: dict[str, Any] = self._adapter.json_schema()
        except PydanticUserError as exc:  # no schema for it, or a form pydantic refuses
            if exc.code == "typed-dict-version":
                # One line, not pydantic's chained traceback: the fix is an import.
                raise TypeError(
                    f"run_structured's output {output!r} uses typing.TypedDict, which pydantic "
                    "cannot read before Python 3.12: use typing_extensions.TypedDict "
                    "(from typing_extensions import TypedDict)"
                ) from None
            raise TypeError(
                f"run_structured's output must be a kova.ResponseFormat or a type pydantic "
                f"can validate, got {output!r}: {exc}"
            ) from exc
        self.name = _name_of(output)
        if raw.get("type") != "object":
            defs = raw.pop("$defs", None)
            raw = {
                "type": "object",
                "properties": {_WRAPPER_KEY: raw},
                "required": [_WRAPPER_KEY],
                **({"$defs": defs} if defs else {}),
            }
            self.wrapped = True
        schema, strict_ok = _closed(raw)
        assert isinstance(schema, Mapping)
        description = raw.get("description") if not self.wrapped else None
        self.response_format = ResponseFormat(
            name=self.name,
            schema=schema,
            strict=strict_ok,
            description=description.strip() or None if isinstance(description, str) else None,
        )

    def to_json(self, value: Any) -> Any:
        """A validated value as plain JSON (for a tool result)."""
        if self._adapter is None:
            return value
        return self._adapter.dump_python(value, mode="json")

    def validate(self, text: str) -> Any:
        """The value the answer ``text`` holds, validated.

        Raises:
            _InvalidAnswer: not JSON, or not valid for the output.
        """
        if self._adapter is None:
            value = _loads(text)
            problems = self._validator.problems(value)
            if problems:
                raise _InvalidAnswer(
                    f"the answer does not match the schema {self.name!r}: "
                    f"{len(problems)} problem(s): {'; '.join(problems)}",
                    ValueError(problems[0]),
                )
            return value
        from pydantic import ValidationError

        try:
            if self.wrapped:
                outer = _loads(text)
                if not isinstance(outer, dict) or _WRAPPER_KEY not in outer:
                    raise _InvalidAnswer(
                        f'the answer must be an object {{"{_WRAPPER_KEY}": ...}} holding the value',
                        ValueError(text[:100]),
                    )
                return self._validate_json(json.dumps(outer[_WRAPPER_KEY]))
            return self._validate_json(text)
        except ValidationError as exc:
            details = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or '(root)'}: {error['msg']}"
                for error in exc.errors()
            )
            raise _InvalidAnswer(
                f"the answer does not validate as {self.name}: "
                f"{exc.error_count()} error(s): {details}",
                exc,
            ) from exc

    def _validate_json(self, text: str) -> Any:
        """pydantic's JSON validation of ``text``. pydantic's JSON reader refuses a lone
        surrogate escape (``"\\ud83d"``, half an emoji), which Python's ``json`` reads and kova
        keeps everywhere else (:mod:`kova._json`): an answer holding one is read with
        ``json`` and validated as Python data instead of being re-asked as "not JSON"."""
        assert self._adapter is not None
        try:
            return self._adapter.validate_json(text)
        except ValueError:
            if _LONE_SURROGATE_ESCAPE.search(text) is None:
                raise
            return self._adapter.validate_python(_loads(text))

    def partial(self, text: str) -> Any:
        """The best-effort value of the JSON prefix ``text`` (``None``: nothing yet)."""
        value = parse_partial_json(text)
        if self.wrapped:
            return value.get(_WRAPPER_KEY) if isinstance(value, dict) else None
        return value


def _name_of(output: object) -> str:
    """A response-format name for ``output`` (letters, digits, ``_`` and ``-``)."""
    name = getattr(output, "__name__", None)
    if not isinstance(name, str) or getattr(output, "__args__", None):
        name = re.sub(r"[^A-Za-z0-9_-]+", "_", repr(output).replace("typing.", "")).strip("_")
    return name[:64] or "output"


def response_format_for(model: type[BaseModel] | object) -> ResponseFormat:
    """The response format a structured turn sends for ``model`` (a pydantic model or any
    type pydantic validates): its JSON schema, closed to extra keys; ``strict`` when every
    field is required (strict mode cannot express optional fields)."""
    return _Output(model).response_format


def check_output_retries(value: object) -> None:
    """Raises ``TypeError`` / ``ValueError`` unless ``value`` is ``None`` or an int >= 0."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"output_retries must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"output_retries must be at least 0, got {value}")


def _combined(responses: list[AgentResponse], feedback: list[Message]) -> AgentResponse:
    """One response for the whole structured turn: every attempt's messages (each re-ask in
    between), usage and calls summed, the last attempt's text and stop reason."""
    messages: list[Message] = []
    for number, response in enumerate(responses):
        if number:
            messages.append(feedback[number - 1])
        messages.extend(response.new_messages)
    usage = responses[0].usage
    for response in responses[1:]:
        usage = usage + response.usage
    thinking = [response.thinking for response in responses if response.thinking]
    last = responses[-1]
    return evolve(
        last,
        new_messages=tuple(messages),
        usage=usage,
        llm_calls=sum(response.llm_calls for response in responses),
        thinking="\n\n".join(thinking) if thinking else None,
        output_retries=len(responses) - 1,
    )


class _Attempts:
    """The attempts of one structured turn: each answer checked, re-asked while invalid and
    retries remain."""

    def __init__(self, messages: Sequence[Message], output: _Output, retries: int) -> None:
        self.output = output
        self.retries = retries
        self.working = list(messages)
        self.responses: list[AgentResponse] = []
        self.feedback: list[Message] = []

    def check(self, response: AgentResponse) -> tuple[bool, Any]:
        """``(True, value)`` for a valid answer, ``(False, None)`` when the model is to be
        asked again (``working`` then holds the re-ask).

        Raises:
            StructuredOutputError: the answer is invalid and no retry is left.
        """
        self.responses.append(response)
        if response.pending is not None:
            # Paused for approvals: the answer is still to come (resume, then validate it).
            raise StructuredOutputError(
                "the turn paused for approvals before its answer (error.response.pending): "
                "resume it with agent.resume and validate the final answer",
                raw_text=response.text,
                response=self.combined(),
                attempts=tuple(r.text for r in self.responses),
            )
        try:
            return True, self.output.validate(response.text)
        except _InvalidAnswer as invalid:
            if len(self.responses) > self.retries:
                raise StructuredOutputError(
                    invalid.problem,
                    raw_text=response.text,
                    response=self.combined(),
                    attempts=tuple(r.text for r in self.responses),
                ) from invalid.cause
            note = _feedback(invalid.problem)
            self.feedback.append(note)
            self.working = [*self.working, *response.new_messages, note]
            return False, None

    def combined(self) -> AgentResponse:
        return _combined(self.responses, self.feedback)


async def run_structured_turn(
    run: Callable[[Sequence[Message], InferenceConfig], Awaitable[AgentResponse]],
    messages: Sequence[Message],
    output: object,
    config: InferenceConfig | None,
    retries: int,
    first: AgentResponse | None = None,
) -> tuple[Any, AgentResponse]:
    """Run a turn constrained to ``output`` and validate its answer; while the answer is
    invalid and ``retries`` remain, re-ask with the problem as a user message.

    Args:
        run: runs one turn (``agent.run`` with the caller's cancel token bound).
        messages: the caller's history.
        output: a response format (parsed JSON, checked against its schema) or any type
            pydantic validates.
        config: the caller's per-call overrides.
        retries: how many times to re-ask after an invalid answer.
        first: the first attempt's response when it has already run (a turn resumed after
            its approvals: ``messages`` is then the history it resumed from).

    Returns:
        ``(value, response)``; ``response`` covers every attempt (``output_retries`` counts
        the re-asks, ``new_messages`` holds all of them, so history stays consistent).

    Raises:
        StructuredOutputError: the last answer is still invalid; ``attempts`` holds every raw
            answer, ``response`` the combined turn.
    """
    spec = _Output(output)
    overrides = InferenceConfig(response_format=spec.response_format).merged(config)
    attempts = _Attempts(messages, spec, retries)
    response = first
    while True:
        if response is None:
            response = await run(attempts.working, overrides)
        valid, value = attempts.check(response)
        if valid:
            return value, attempts.combined()
        response = None


class StructuredStream(Generic[T]):
    """The values of a streamed structured turn (``agent.stream_structured``).

    ``async for value in stream`` gives, as the answer's text arrives, the best-effort
    value of its JSON so far (plain JSON: dicts, lists, strings, numbers; a string still
    being written is there in part), each one different from the one before; the last value
    is the validated one, of the requested type. After a re-ask the partial values start
    again. Once the iteration ends, :attr:`value` and :attr:`response` hold the outcome.
    """

    def __init__(self, receive: trio.MemoryReceiveChannel[tuple[bool, Any] | KovaError]) -> None:
        self._receive = receive
        self._value: T | None = None
        self._response: AgentResponse | None = None
        self._done = False

    @property
    def done(self) -> bool:
        """Whether the validated value has arrived."""
        return self._done

    @property
    def value(self) -> T:
        """The validated value.

        Raises:
            RuntimeError: the iteration has not reached it yet.
        """
        if not self._done:
            raise RuntimeError("the structured stream has not finished: iterate it first")
        return self._value  # type: ignore[return-value]

    @property
    def response(self) -> AgentResponse:
        """The whole turn (every attempt's messages: persist ``response.new_messages``).

        Raises:
            RuntimeError: the iteration has not finished yet.
        """
        if self._response is None:
            raise RuntimeError("the structured stream has not finished: iterate it first")
        return self._response

    def __aiter__(self) -> StructuredStream[T]:
        return self

    async def __anext__(self) -> Any:
        if self._done:
            raise StopAsyncIteration
        try:
            item = await self._receive.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None
        if isinstance(item, KovaError):
            raise item
        final, value = item
        if final:
            self._value, self._response = value
            self._done = True
            return value[0]
        return value


@asynccontextmanager
async def stream_structured_turn(
    stream: Callable[..., Any],
    messages: Sequence[Message],
    output: object,
    config: InferenceConfig | None,
    retries: int,
    cancel: CancelToken | None,
) -> AsyncIterator[StructuredStream[Any]]:
    """A structured turn streamed: see :class:`StructuredStream`.

    The attempts run in a task of this block, handing values over a channel (an async
    generator may not yield from inside the stream's own block); an error of the turn is
    raised from the iteration; leaving the block early cancels the turn.
    """
    spec = _Output(output)
    overrides = InferenceConfig(response_format=spec.response_format).merged(config)
    attempts = _Attempts(messages, spec, retries)
    send, receive = trio.open_memory_channel[tuple[bool, Any] | KovaError](0)

    async def attempt() -> AgentResponse:
        text: list[str] = []
        last: Any = None
        response: AgentResponse | None = None
        events: AsyncIterator[AgentEvent]
        async with stream(attempts.working, config=overrides, cancel=cancel) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    text.append(event.text)
                    partial = spec.partial("".join(text))
                    if partial is not None and partial != last:
                        last = partial
                        await send.send((False, partial))
                elif isinstance(event, TurnCompleted):
                    response = event.response
        assert response is not None, "a streamed turn ends with TurnCompleted"
        return response

    async def produce() -> None:
        # Closed without a checkpoint (not ``async with``): the consumer, woken by the close,
        # cancels this nursery, and a checkpoint here would turn an error on its way out
        # into that Cancelled, which the nursery absorbs: the error would be lost.
        with send:
            try:
                while True:
                    valid, value = attempts.check(await attempt())
                    if valid:
                        await send.send((True, (value, attempts.combined())))
                        return
            except KovaError as exc:
                await send.send(exc)

    with lone_exceptions():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce)
            try:
                yield StructuredStream(receive)
            finally:
                nursery.cancel_scope.cancel(reason="structured stream left")
                receive.close()
