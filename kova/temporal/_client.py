"""The client side: start a turn, wait for its response, decide its approvals, read its
live events. Every public name here is re-exported, and listed once, by ``kova.temporal``."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio.client import WorkflowFailureError, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError, CancelledError, FailureError

from .._errors import (
    ApprovalMismatchError,
    GuardrailTripped,
    KovaError,
    SerializationError,
    StructuredOutputError,
    TurnCancelled,
    check_seconds,
)
from .._messages import Message, ToolResult, ToolUse, block_from_dict
from .._models import InferenceConfig
from .._record import Record
from ..agent._approvals import PendingApprovals, pending_document
from ..agent._input import coerce_history
from ..agent._state_json import config_to_json
from ..agent._structured import _combined, _InvalidAnswer, _Output, check_output_retries
from ..agent._turn import AwaitApproval, Finished, Turn
from ._payloads import read_json, write_json
from ._workflow import EVENTS_QUERY, AgentWorkflow

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from temporalio.client import Client

    from .._models import ResponseFormat
    from ..agent import AgentResponse
    from ..agent._input import HistoryInput


class TurnFailedError(KovaError):
    """A turn run by Temporal failed: ``error_type`` names the kova error that ended it
    (``"RateLimited"`` after the last retry, ``"MaxIterationsError"``, ...), or Temporal's
    (``"TimeoutError"``); the message is that error's. The Temporal error is the
    ``__cause__``."""

    def __init__(self, message: str, error_type: str | None) -> None:
        super().__init__(f"{error_type}: {message}" if error_type else message)
        self.error_type = error_type


class TurnEvent(Record):
    """A live event of a turn run by Temporal (see :func:`events`).

    ``kind`` is ``"text"`` or ``"thinking"`` (``text`` holds the pieces that arrived
    together), ``"tool_started"`` (``call``), ``"tool_finished"`` (``call``, ``result``),
    ``"tool_deferred"`` (``call``: left to a person, see :func:`pending`), or a guard's
    decision: ``"guard_passed"``, ``"guard_denied"`` (a tool guard answered ``call``
    in-band) or ``"guard_tripped"`` (the turn stops), with the ``guard``'s name, its reason
    in ``text`` and, for a tool guard, the ``call``.
    ``attempt`` is the activity's attempt (1, then 2 after a retry: a retried model call
    streams its answer again from the start, so a consumer drops what an earlier attempt of
    the same ``activity`` showed); ``activity`` is the activity's id within the workflow
    (``""`` for what the workflow did itself: a ``search_tools`` call it answered).
    ``path`` is empty for the turn's own events; an agent given to the worker's agent as a
    tool (``agent.as_tool()``) streams its turn's events inside that call's activity, each
    with the tool-call ids that led to it, as ``event.path`` of an in-process stream.
    """

    kind: str
    attempt: int
    activity: str
    text: str = ""
    call: ToolUse | None = None
    result: ToolResult | None = None
    path: tuple[str, ...] = ()
    guard: str = ""


def _seconds(value: timedelta | float | None, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    # kova's one rule for durations (issue 43): infinity was taken, and failed in the
    # workflow when it made a timedelta of it; None is "for ever" where that is allowed.
    check_seconds(name, value)
    return float(value)


async def start_turn(
    client: Client,
    *,
    agent: str,
    history: HistoryInput,
    task_queue: str,
    id: str,
    events: bool = False,
    approval_timeout: timedelta | float | None = None,
    model_timeout: timedelta | float = timedelta(minutes=10),
    tool_timeout: timedelta | float = timedelta(minutes=30),
    heartbeat_timeout: timedelta | float = timedelta(seconds=30),
    output: ResponseFormat | object = None,
    output_retries: int | None = None,
) -> WorkflowHandle[AgentWorkflow, str]:
    """Start one turn of ``agent`` as an :class:`AgentWorkflow`; returns its handle (for a
    turn that may wait for approvals: :func:`pending`, :func:`decide`, :func:`response`).

    Args:
        client: a connected Temporal client.
        agent: the agent's name on the workers of ``task_queue``.
        history: the conversation (a str, a Message, or a sequence of them).
        task_queue: where :func:`kova.temporal.worker` polls.
        id: the workflow id, which is the turn's id (tools' idempotency keys derive from it
            and the call's id): one turn per id.
        events: send the turn's live events (text as it streams, tool calls) to the
            workflow, for :func:`events`. Off by default: each batch is a signal in the
            workflow's history.
        approval_timeout: how long the turn waits for decisions (default: for ever); past
            it, the turn ends paused (its response's ``pending`` set).
        model_timeout: the longest one model call may take (start to close).
        tool_timeout: the longest one tool call may take.
        heartbeat_timeout: an activity not heard from for this long is retried elsewhere
            (a worker that died); it is also how soon a cancellation reaches it.
        output: make it a structured turn (as :meth:`kova.agent.Agent.run_structured`): a
            type pydantic validates or a :class:`~kova.ResponseFormat`. The model is asked
            for that JSON schema; the workflow checks each answer against the schema and
            re-asks with the problem while it is invalid, up to ``output_retries`` times
            (default: the worker's agent's). Read the value with :func:`structured_output`.
        output_retries: re-asks after an invalid answer (only with ``output``).

    Raises:
        TypeError: ``history``, ``agent`` or ``output`` of the wrong type.
        ValueError: ``output_retries`` below 0.
        ConfigError: a timeout that is not a positive, finite duration (``None`` is for ever,
            for ``approval_timeout``).
        PayloadTooLargeError: the history is over Temporal's payload limit.
    """
    if not isinstance(agent, str) or not agent:
        raise TypeError(f"agent must be an agent's name (a non-empty str), got {agent!r}")
    if not isinstance(id, str) or not id:
        raise TypeError(f"id must be a non-empty str (the workflow id), got {id!r}")
    messages = coerce_history(history)
    structured: dict[str, Any] | None = None
    if output is not None:
        check_output_retries(output_retries)
        format_ = _Output(output).response_format
        structured = {
            "config": config_to_json(InferenceConfig(response_format=format_)),
            "retries": output_retries,
        }
    elif output_retries is not None:
        raise TypeError("output_retries is for a structured turn: give output= too")
    request = write_json(
        {
            "kova": "temporal-turn",
            "output": structured,
            "agent": agent,
            "history": [message.to_dict() for message in messages],
            "events": bool(events),
            "approval_timeout": _seconds(approval_timeout, "approval_timeout"),
            "model_timeout": _seconds(model_timeout, "model_timeout"),
            "tool_timeout": _seconds(tool_timeout, "tool_timeout"),
            "heartbeat_timeout": _seconds(heartbeat_timeout, "heartbeat_timeout"),
        },
        "the turn's history",
    )
    return await client.start_workflow(AgentWorkflow.run, request, id=id, task_queue=task_queue)


async def run_turn(
    client: Client,
    *,
    agent: str,
    history: HistoryInput,
    task_queue: str,
    id: str,
    **options: Any,
) -> AgentResponse:
    """Run one turn of ``agent`` on Temporal and return its
    :class:`~kova.agent.AgentResponse` (arguments as :func:`start_turn`).

    Raises:
        TurnFailedError: the turn failed (its ``error_type`` names kova's error).
        GuardrailTripped: a guard of the worker's agent stopped the turn.
        TurnCancelled: the workflow was cancelled.
    """
    handle = await start_turn(
        client, agent=agent, history=history, task_queue=task_queue, id=id, **options
    )
    return await response(handle)


async def response(handle: WorkflowHandle[Any, Any]) -> AgentResponse:
    """Wait for the turn of ``handle`` to end; its :class:`~kova.agent.AgentResponse`
    (with ``pending`` set if it ended paused, past its ``approval_timeout``).

    Raises:
        TurnFailedError: the turn failed.
        GuardrailTripped: a guard of the worker's agent stopped the turn.
        TurnCancelled: the workflow was cancelled.
    """
    responses, _ = await _outcome(handle)
    return responses


async def _outcome(handle: WorkflowHandle[Any, Any]) -> tuple[AgentResponse, list[AgentResponse]]:
    """The turn's response (a structured turn's attempts combined) and each attempt's."""
    try:
        text = await handle.result()
    except WorkflowFailureError as exc:
        raise _kova_error(exc) from exc
    data = read_json(text, "the finished turn")
    if data.get("kova") != "structured-turn":
        return _response_of(text), []
    turns = data.get("turns")
    notes = data.get("feedback")
    if not isinstance(turns, list) or not turns or not isinstance(notes, list):
        raise SerializationError("a structured turn's result has no turns or feedback")
    attempts = [_response_of(turn) for turn in turns]
    feedback = [Message.from_dict(note) for note in notes]
    return _combined(attempts, feedback), attempts


def _response_of(text: object) -> AgentResponse:
    if not isinstance(text, str):
        raise SerializationError("a finished turn must be Turn JSON")
    step = Turn.from_json(text).next_step()
    assert isinstance(step, Finished | AwaitApproval)
    return step.response


async def structured_output(
    handle: WorkflowHandle[Any, Any], output: ResponseFormat | object
) -> tuple[Any, AgentResponse]:
    """Wait for the structured turn of ``handle`` (started with ``output=``) to end; its
    ``(value, response)`` as :meth:`kova.agent.Agent.run_structured` returns them: the last
    answer validated into ``output`` (with pydantic, for a type; a ResponseFormat's answer
    is the parsed JSON, checked against its schema), ``response`` every attempt's messages
    and usage, ``response.output_retries`` the re-asks.

    Raises:
        StructuredOutputError: the last answer is still invalid (``attempts`` holds every
            raw answer, ``response`` the whole turn), or the turn ended paused for
            approvals (``error.response.pending`` is set).
        TypeError: ``output`` is neither a ResponseFormat nor a type pydantic validates.
        TurnFailedError: the turn failed. TurnCancelled: the workflow was cancelled.
    """
    spec = _Output(output)
    response, attempts = await _outcome(handle)
    raw = tuple(attempt.text for attempt in attempts) or (response.text,)
    if response.pending is not None:
        raise StructuredOutputError(
            "the turn paused for approvals before its answer (error.response.pending): "
            "decide them (kova.temporal.decide) before its approval_timeout",
            raw_text=response.text,
            response=response,
            attempts=raw,
        )
    try:
        value = spec.validate(response.text)
    except _InvalidAnswer as invalid:
        raise StructuredOutputError(
            invalid.problem, raw_text=response.text, response=response, attempts=raw
        ) from invalid.cause
    return value, response


async def run_structured(
    client: Client,
    *,
    agent: str,
    history: HistoryInput,
    output: ResponseFormat | object,
    task_queue: str,
    id: str,
    output_retries: int | None = None,
    **options: Any,
) -> tuple[Any, AgentResponse]:
    """:meth:`kova.agent.Agent.run_structured` on Temporal: one workflow runs the turn and
    its re-asks; returns ``(value, response)`` (see :func:`structured_output`; the other
    arguments as :func:`start_turn`).

    Raises:
        StructuredOutputError: the answer is still invalid after every output retry.
        TurnFailedError: the turn failed. TurnCancelled: the workflow was cancelled.
    """
    handle = await start_turn(
        client,
        agent=agent,
        history=history,
        task_queue=task_queue,
        id=id,
        output=output,
        output_retries=output_retries,
        **options,
    )
    return await structured_output(handle, output)


def _kova_error(exc: WorkflowFailureError) -> KovaError:
    cause: BaseException | None = exc.cause
    while cause is not None:
        if isinstance(cause, CancelledError):
            return TurnCancelled("the turn's workflow was cancelled")
        if isinstance(cause, ApplicationError):
            inner = cause.cause
            if isinstance(inner, FailureError):
                cause = inner
                continue
            details = cause.details
            if cause.type == "GuardrailTripped" and len(details) == 2:
                guard, reason = details
                if isinstance(guard, str) and isinstance(reason, str):
                    return GuardrailTripped(guard=guard, reason=reason)
            return TurnFailedError(cause.message, cause.type)
        if isinstance(cause, FailureError):
            if cause.cause is None:
                return TurnFailedError(cause.message, type(cause).__name__)
            cause = cause.cause
            continue
        break
    return TurnFailedError(str(exc), None)


async def pending(handle: WorkflowHandle[Any, Any]) -> PendingApprovals | None:
    """The calls the turn of ``handle`` waits for decisions on (the ``pending`` query), or
    ``None`` when it waits for none."""
    text = await handle.query("pending")
    return None if text is None else PendingApprovals.from_json(text)


async def decide(handle: WorkflowHandle[Any, Any], decided: PendingApprovals) -> None:
    """Send decisions to the turn of ``handle`` (the ``decide`` update): ``decided`` is
    :func:`pending`'s value with every call approved or denied. Returns once the workflow
    has accepted them.

    Raises:
        TypeError: ``decided`` is not a PendingApprovals.
        ApprovalMismatchError: the turn does not wait for these calls, or a call has no
            decision; nothing changed.
    """
    if not isinstance(decided, PendingApprovals):
        raise TypeError(
            f"decide() takes a kova.agent.PendingApprovals, got {type(decided).__name__}"
        )
    try:
        await handle.execute_update("decide", pending_document(decided))
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        message = cause.message if isinstance(cause, FailureError) else str(exc)
        raise ApprovalMismatchError(message) from exc


async def events(
    handle: WorkflowHandle[Any, Any], *, poll: float = 0.2
) -> AsyncIterator[TurnEvent]:
    """The live events of a turn started with ``events=True``, in order, from its start
    until it has finished (read with the ``kova.events`` query every ``poll`` seconds;
    another consumer, a web view say, can read the same events at the same time).
    """
    seen = 0
    while True:
        data = read_json(await handle.query(EVENTS_QUERY, seen), "a turn's events")
        items = data.get("events")
        if isinstance(items, list):
            for item in items:
                seen += 1
                yield _event(item)
        if data.get("finished"):
            return
        await asyncio.sleep(poll)


def _event(item: Any) -> TurnEvent:
    call = item.get("call")
    result = item.get("result")
    parsed_call = None if call is None else block_from_dict(call)
    parsed_result = None if result is None else block_from_dict(result)
    path = item.get("path")
    return TurnEvent(
        kind=str(item.get("kind")),
        attempt=int(item.get("attempt", 1)),
        activity=str(item.get("activity", "")),
        text=str(item.get("text", "")),
        call=parsed_call if isinstance(parsed_call, ToolUse) else None,
        result=parsed_result if isinstance(parsed_result, ToolResult) else None,
        path=tuple(str(step) for step in path) if isinstance(path, list) else (),
        guard=str(item.get("guard", "")),
    )
