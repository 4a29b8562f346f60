"""Structured output: a :class:`~kova.ResponseFormat` from a pydantic model class, and the
turn that parses the answer, re-asking the model with the validation error when it fails."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._errors import StructuredOutputError
from .._json import loads
from .._models import InferenceConfig, JSONValue, Message, ResponseFormat
from .._record import evolve

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ._events import AgentResponse

__all__ = ["check_output_retries", "response_format_for", "run_structured_turn"]

_MAX_FEEDBACK_CHARS = 2000
"""The validation problems sent back to the model are cut here (a huge schema can produce
hundreds of errors; the first ones are what the model needs)."""


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


def response_format_for(model: type[BaseModel]) -> ResponseFormat:
    """A response format for ``model``: its JSON schema, closed to extra keys; ``strict``
    when every field is required (strict mode cannot express optional fields)."""
    raw: Any = model.model_json_schema()  # pydantic's schema: a plain JSON dict
    schema, strict_ok = _closed(raw)
    assert isinstance(schema, Mapping)
    return ResponseFormat(
        name=model.__name__,
        schema=schema,
        strict=strict_ok,
        description=(model.__doc__ or "").strip() or None,
    )


def _check_model(output: object) -> None:
    """A pydantic model class, or ``TypeError`` naming what was given instead."""
    if isinstance(output, type):
        try:
            from pydantic import BaseModel
        except ImportError:  # pydantic is optional: no class can be a model without it
            pass
        else:
            if issubclass(output, BaseModel):
                return
    raise TypeError(
        "run_structured's output must be a kova.ResponseFormat or a pydantic model class, "
        f"got {output!r}"
    )


def check_output_retries(value: object) -> None:
    """Raises ``TypeError`` / ``ValueError`` unless ``value`` is ``None`` or an int >= 0."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"output_retries must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"output_retries must be at least 0, got {value}")


class _InvalidAnswer(Exception):
    """The answer did not parse or validate; ``problem`` says why, for the user and model."""

    def __init__(self, problem: str, cause: Exception) -> None:
        self.problem = problem
        self.cause = cause
        super().__init__(problem)


def _parse(text: str, model: type[BaseModel] | None) -> Any:
    if model is None:
        try:
            return loads(text)
        except ValueError as exc:  # not JSON, or nested too deeply (JsonNestingError)
            raise _InvalidAnswer(f"the answer is not valid JSON ({exc})", exc) from exc
    from pydantic import ValidationError

    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        errors = exc.errors()
        details = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '(root)'}: {error['msg']}"
            for error in errors
        )
        raise _InvalidAnswer(
            f"the answer does not validate as {model.__name__}: "
            f"{exc.error_count()} error(s): {details}",
            exc,
        ) from exc


def _feedback(problem: str) -> Message:
    text = problem if len(problem) <= _MAX_FEEDBACK_CHARS else problem[:_MAX_FEEDBACK_CHARS] + "..."
    return Message.user(
        f"Your previous answer could not be used: {text}\n"
        "Answer again with only the JSON value, matching the requested schema."
    )


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


async def run_structured_turn(
    run: Callable[[Sequence[Message], InferenceConfig], Awaitable[AgentResponse]],
    messages: Sequence[Message],
    output: ResponseFormat | type[BaseModel],
    config: InferenceConfig | None,
    retries: int,
) -> tuple[Any, AgentResponse]:
    """Run a turn constrained to ``output`` and parse its answer; while the answer does not
    parse or validate and ``retries`` remain, re-ask with the problem as a user message.

    Args:
        run: runs one turn (``agent.run`` with the caller's cancel token bound).
        messages: the caller's history.
        output: a response format (parsed JSON) or a pydantic model class (validated).
        config: the caller's per-call overrides.
        retries: how many times to re-ask after an invalid answer.

    Returns:
        ``(value, response)``; ``response`` covers every attempt (``output_retries`` counts
        the re-asks, ``new_messages`` holds all of them, so history stays consistent).

    Raises:
        StructuredOutputError: the last answer is still invalid; ``attempts`` holds every raw
            answer, ``response`` the combined turn.
    """
    if isinstance(output, ResponseFormat):
        response_format = output
        model = None
    else:
        _check_model(output)
        response_format = response_format_for(output)
        model = output
    overrides = InferenceConfig(response_format=response_format).merged(config)
    responses: list[AgentResponse] = []
    feedback: list[Message] = []
    working = list(messages)
    while True:
        response = await run(working, overrides)
        responses.append(response)
        try:
            value = _parse(response.text, model)
        except _InvalidAnswer as invalid:
            if len(responses) > retries:
                combined = _combined(responses, feedback)
                raise StructuredOutputError(
                    invalid.problem,
                    raw_text=response.text,
                    response=combined,
                    attempts=tuple(r.text for r in responses),
                ) from invalid.cause
            note = _feedback(invalid.problem)
            feedback.append(note)
            working = [*working, *response.new_messages, note]
            continue
        return value, _combined(responses, feedback)
