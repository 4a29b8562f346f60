"""AG-UI at ``/agui`` (``ag-ui-protocol``'s types and event encoder): POST a run
(``RunAgentInput``), get its events back as server-sent events.

A turn's events become AG-UI events: ``RUN_STARTED``; text as ``TEXT_MESSAGE_START`` /
``_CONTENT`` / ``_END``; thinking as ``REASONING_*``; each tool call the agent runs as
``TOOL_CALL_START``, ``TOOL_CALL_ARGS`` (as the model writes them, one event per piece the
provider streamed), ``TOOL_CALL_END`` and ``TOOL_CALL_RESULT``; the input's ``state``, when
given, as a ``STATE_SNAPSHOT`` (kova agents keep no state of their own); then
``RUN_FINISHED`` with the answer and usage, or ``RUN_ERROR``.

A deferred approval (``AgentBuilder.defer_approvals``) ends the run with an ``interrupt``
outcome, one interrupt per call waiting (``reason: "tool_approval"``, its ``toolCallId``);
the client resumes with a new run whose ``resume`` entries answer them (payload
``{"approve": true}`` or ``{"approve": false, "reason": "..."}``; ``status: "cancelled"``
denies). The paused turn is kept here, in memory, until it is resumed (at most
``max_paused`` of them; the oldest goes first).
"""

from __future__ import annotations

import json
import secrets
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from .._errors import KovaError
from .._messages import Message, Text, ToolResult, ToolUse
from .._models import TextDelta, ThinkingDelta
from .._record import Record
from ..agent import ToolCallDelta, ToolCallFinished, ToolCallStarted, TurnCompleted
from ._http import BadRequest, EventStream, json_response, read_json
from ._turns import failure, find_agent

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from ag_ui.core import BaseEvent, RunAgentInput
    from starlette.requests import Request
    from starlette.routing import BaseRoute

    from ..agent import Agent, PendingApprovals
    from ._turns import Served

__all__ = ["Paused", "routes"]

PROTOCOL_VERSION = "1.0"


class _Pause(Record):
    """A paused turn kept for its resume."""

    key: str
    agent: str
    history: tuple[Message, ...]
    pending: PendingApprovals
    interrupts: Mapping[str, str]
    """Interrupt id by call id."""


class Paused:
    """Turns paused for approval, by interrupt id, oldest first; bounded. Changed only in
    plain methods (trio's one thread: no task sees a half-made change)."""

    __slots__ = ("_by_interrupt", "_turns", "max_paused")

    def __init__(self, max_paused: int) -> None:
        self.max_paused = max_paused
        self._turns: OrderedDict[str, _Pause] = OrderedDict()
        self._by_interrupt: dict[str, str] = {}
        """interrupt id -> the paused turn's key."""

    def __len__(self) -> int:
        return len(self._turns)

    def add(
        self, agent: str, history: tuple[Message, ...], pending: PendingApprovals
    ) -> Mapping[str, str]:
        """Keep a paused turn; returns its interrupt ids by call id."""
        key = secrets.token_hex(8)
        ids = {call.id: f"approval-{key}-{index}" for index, call in enumerate(pending.calls)}
        self.put_back(
            _Pause(key=key, agent=agent, history=history, pending=pending, interrupts=ids)
        )
        return ids

    def put_back(self, pause: _Pause) -> None:
        """Keep ``pause`` (again: a resume that failed or was cancelled can be retried)."""
        self._turns[pause.key] = pause
        for interrupt in pause.interrupts.values():
            self._by_interrupt[interrupt] = pause.key
        while len(self._turns) > self.max_paused:
            self._forget(next(iter(self._turns)))

    def _forget(self, key: str) -> None:
        pause = self._turns.pop(key)
        for interrupt in pause.interrupts.values():
            self._by_interrupt.pop(interrupt, None)

    def take(self, answers: list[tuple[str, bool, str | None]]) -> tuple[_Pause, PendingApprovals]:
        """The paused turn ``answers`` (interrupt id, approve, reason) decide, no longer kept
        (:meth:`put_back` it if its resume fails), and its decided approvals.

        Raises:
            BadRequest: an unknown interrupt, answers for two paused turns, or a call of
                the turn left unanswered.
        """
        keys = set()
        for interrupt, _, _ in answers:
            key = self._by_interrupt.get(interrupt)
            if key is None:
                raise BadRequest(
                    404,
                    f"no paused run has the interrupt {interrupt[:100]!r} (answered "
                    "already, or forgotten)",
                    code="unknown_interrupt",
                )
            keys.add(key)
        if len(keys) != 1:
            raise BadRequest(400, "resume answers the interrupts of one paused run at a time")
        pause = self._turns[keys.pop()]
        call_of = {interrupt: call for call, interrupt in pause.interrupts.items()}
        pending = pause.pending
        for interrupt, approve, reason in answers:
            call_id = call_of[interrupt]
            pending = pending.approve(call_id) if approve else pending.deny(call_id, reason)
        left = len(pending.undecided)
        if left:
            raise BadRequest(400, f"resume must answer every interrupt of the run ({left} left)")
        self._forget(pause.key)
        return pause, pending


def routes(served: Served, paused: Paused) -> list[BaseRoute]:
    from starlette.routing import Route

    async def run(request: Request) -> Any:
        try:
            return await _run(served, paused, request, request.path_params.get("name"))
        except BadRequest as exc:
            return _error(exc.status, exc.message, exc.code)

    return [
        Route("/agui", run, methods=["POST"]),
        Route("/agui/{name}", run, methods=["POST"]),
    ]


def _error(status: int, message: str, code: str | None) -> Any:
    return json_response({"error": {"message": message, "code": code or "invalid_request"}}, status)


def _text_of(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for index, part in enumerate(content or ()):
        if getattr(part, "type", None) != "text":
            raise BadRequest(400, f"{where}.content[{index}]: only text parts are taken here")
        texts.append(part.text)
    return "".join(texts)


def _history(input: RunAgentInput) -> list[Message]:
    """The kova history of an AG-UI conversation (tool calls and results included)."""
    from ag_ui.core import (
        AssistantMessage,
        DeveloperMessage,
        SystemMessage,
        ToolMessage,
        UserMessage,
    )

    messages: list[Message] = []
    results: list[ToolResult] = []
    for index, message in enumerate(input.messages):
        where = f"messages[{index}]"
        if not isinstance(message, ToolMessage) and results:
            messages.append(Message.tool_results(results))
            results = []
        if isinstance(message, SystemMessage | DeveloperMessage):
            messages.append(Message.system(message.content))
        elif isinstance(message, UserMessage):
            messages.append(Message.user(_text_of(message.content, where)))
        elif isinstance(message, AssistantMessage):
            blocks: list[Text | ToolUse] = []
            if message.content:
                blocks.append(Text(text=message.content))
            for call in message.tool_calls or ():
                blocks.append(
                    ToolUse(
                        id=call.id,
                        name=call.function.name,
                        input=_arguments(call.function.arguments, where),
                    )
                )
            if blocks:
                messages.append(Message.assistant(blocks))
        elif isinstance(message, ToolMessage):
            content = _text_of(message.content, where)
            results.append(ToolResult(tool_use_id=message.tool_call_id, content=content))
        # activity and reasoning messages are the client's own: not the model's history
    if results:
        messages.append(Message.tool_results(results))
    return messages


def _arguments(text: str, where: str) -> dict[str, Any]:
    try:
        arguments = json.loads(text or "{}")
    except ValueError:
        raise BadRequest(400, f"{where}: a tool call's arguments are not JSON") from None
    if not isinstance(arguments, dict):
        raise BadRequest(400, f"{where}: a tool call's arguments must be a JSON object")
    return arguments


def _answers(input: RunAgentInput) -> list[tuple[str, bool, str | None]]:
    answers: list[tuple[str, bool, str | None]] = []
    for entry in input.resume or ():
        if entry.status == "cancelled":
            answers.append((entry.interrupt_id, False, "cancelled by the client"))
            continue
        payload = entry.payload
        if isinstance(payload, bool):
            answers.append((entry.interrupt_id, payload, None))
        elif isinstance(payload, dict) and isinstance(payload.get("approve"), bool):
            reason = payload.get("reason")
            answers.append(
                (
                    entry.interrupt_id,
                    payload["approve"],
                    reason if isinstance(reason, str) else None,
                )
            )
        else:
            raise BadRequest(
                400,
                f"resume payload for {entry.interrupt_id!r} must be "
                '{"approve": true|false, "reason"?: "..."} or a boolean',
            )
    return answers


async def _run(served: Served, paused: Paused, request: Request, name: str | None) -> Any:
    from ag_ui.core import RunAgentInput
    from pydantic import ValidationError

    body = await read_json(request, limit=served.max_body_bytes)
    try:
        input = RunAgentInput.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise BadRequest(
            400,
            f"not an AG-UI RunAgentInput: {where}: {first['msg']} ({exc.error_count()} problems)",
        ) from None
    if name is None:
        props = input.forwarded_props
        name = props.get("agent") if isinstance(props, dict) else None
        if name is None and len(served.agents) == 1:
            name = next(iter(served.agents))
        if name is None:
            raise BadRequest(
                400, "several agents are served: POST to /agui/NAME or pass forwardedProps.agent"
            )
    agent = find_agent(served, name, what="agent")
    answers = _answers(input)
    resume: tuple[_Pause, PendingApprovals] | None = None
    if answers:
        pause, pending = paused.take(answers)
        if pause.agent != agent.config.name:
            paused.put_back(pause)
            raise BadRequest(400, f"those interrupts belong to the agent {pause.agent!r}")
        resume = (pause, pending)
        messages = list(pause.history)
    else:
        messages = _history(input)
        if not messages or messages[-1].role.value not in ("user", "tool"):
            raise BadRequest(400, "the run needs messages ending with the user's (or a tool's)")
    return EventStream(_AguiRun(agent, paused, input, messages, resume).produce)


class _AguiRun:
    """One AG-UI run: agent events in, AG-UI events out."""

    __slots__ = (
        "_agent",
        "_arguments",
        "_encoder",
        "_input",
        "_messages",
        "_paused",
        "_reasoning",
        "_resume",
        "_text",
    )

    def __init__(
        self,
        agent: Agent,
        paused: Paused,
        input: RunAgentInput,
        messages: list[Message],
        resume: tuple[_Pause, PendingApprovals] | None,
    ) -> None:
        from ag_ui.encoder import EventEncoder

        self._agent = agent
        self._paused = paused
        self._input = input
        self._messages = messages
        self._resume = resume
        self._encoder = EventEncoder()
        self._text: str | None = None
        self._reasoning: str | None = None
        self._arguments: dict[str, int] = {}
        """Calls whose arguments are streaming: how much of their text was sent."""

    def _encode(self, *events: BaseEvent) -> bytes:
        return "".join(self._encoder.encode(event) for event in events).encode()

    def _close_text(self) -> list[BaseEvent]:
        from ag_ui.core import ReasoningEndEvent, ReasoningMessageEndEvent, TextMessageEndEvent

        out: list[BaseEvent] = []
        if self._reasoning is not None:
            out += [
                ReasoningMessageEndEvent(message_id=self._reasoning),
                ReasoningEndEvent(message_id=self._reasoning),
            ]
            self._reasoning = None
        if self._text is not None:
            out.append(TextMessageEndEvent(message_id=self._text))
            self._text = None
        return out

    def _events(self, event: object) -> list[BaseEvent]:
        from ag_ui.core import (
            ReasoningMessageContentEvent,
            ReasoningMessageStartEvent,
            ReasoningStartEvent,
            TextMessageContentEvent,
            TextMessageStartEvent,
            ToolCallArgsEvent,
            ToolCallEndEvent,
            ToolCallResultEvent,
            ToolCallStartEvent,
        )

        out: list[BaseEvent] = []
        if isinstance(event, TextDelta) and event.text:
            if self._reasoning is not None:
                out += self._close_text()
            if self._text is None:
                self._text = "msg_" + secrets.token_hex(12)
                out.append(TextMessageStartEvent(message_id=self._text, role="assistant"))
            out.append(TextMessageContentEvent(message_id=self._text, delta=event.text))
        elif isinstance(event, ThinkingDelta) and event.text:
            if self._reasoning is None:
                out += self._close_text()
                self._reasoning = "rsn_" + secrets.token_hex(12)
                out += [
                    ReasoningStartEvent(message_id=self._reasoning),
                    ReasoningMessageStartEvent(message_id=self._reasoning, role="reasoning"),
                ]
            out.append(ReasoningMessageContentEvent(message_id=self._reasoning, delta=event.text))
        elif isinstance(event, ToolCallDelta):
            sent = self._arguments.get(event.call_id)
            if sent is None:
                parent = self._text
                out += self._close_text()
                out.append(
                    ToolCallStartEvent(
                        tool_call_id=event.call_id,
                        tool_call_name=event.name,
                        parent_message_id=parent,
                    )
                )
                sent = 0
            piece = event.arguments_text[sent:]
            if piece:
                out.append(ToolCallArgsEvent(tool_call_id=event.call_id, delta=piece))
            self._arguments[event.call_id] = len(event.arguments_text)
        elif isinstance(event, ToolCallStarted):
            call = event.call
            if self._arguments.pop(call.id, None) is None:  # its arguments were not streamed
                parent = self._text
                out += self._close_text()
                out.append(
                    ToolCallStartEvent(
                        tool_call_id=call.id, tool_call_name=call.name, parent_message_id=parent
                    )
                )
                out.append(
                    ToolCallArgsEvent(
                        tool_call_id=call.id, delta=json.dumps(call.input, ensure_ascii=False)
                    )
                )
            out.append(ToolCallEndEvent(tool_call_id=call.id))
        elif isinstance(event, ToolCallFinished):
            out.append(
                ToolCallResultEvent(
                    message_id="tool_" + secrets.token_hex(12),
                    tool_call_id=event.call.id,
                    content=event.result.text,
                    role="tool",
                )
            )
        return out

    def _finished(self, event: TurnCompleted) -> list[BaseEvent]:
        from ag_ui.core import (
            Interrupt,
            RunFinishedEvent,
            RunFinishedInterruptOutcome,
            TokenUsage,
        )

        response = event.response
        usage = response.usage
        tokens = TokenUsage(
            model=self._agent.config.name,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.input_tokens + usage.output_tokens,
            reasoning_tokens=min(usage.reasoning_tokens, usage.output_tokens) or None,
            cached_input_tokens=min(usage.cache_read_tokens, usage.input_tokens) or None,
        )
        out = self._close_text()
        thread_id, run_id = self._input.thread_id, self._input.run_id
        if response.pending is not None:
            history = (*self._messages, *response.new_messages)
            interrupts = self._paused.add(self._agent.config.name, history, response.pending)
            outcome = RunFinishedInterruptOutcome(
                interrupts=[
                    Interrupt(
                        id=interrupts[call.id],
                        reason="tool_approval",
                        message=f"Approve {call.name}?",
                        tool_call_id=call.id,
                        response_schema={
                            "type": "object",
                            "properties": {
                                "approve": {"type": "boolean"},
                                "reason": {"type": "string"},
                            },
                            "required": ["approve"],
                        },
                        metadata={"tool": call.name, "arguments": dict(call.arguments)},
                    )
                    for call in response.pending.calls
                ]
            )
            out.append(
                RunFinishedEvent(
                    thread_id=thread_id, run_id=run_id, outcome=outcome, usage=[tokens]
                )
            )
        else:
            out.append(
                RunFinishedEvent(
                    thread_id=thread_id, run_id=run_id, result=response.text, usage=[tokens]
                )
            )
        return out

    async def produce(self, write: Callable[[bytes], Awaitable[None]]) -> None:
        from ag_ui.core import RunErrorEvent, RunStartedEvent, StateSnapshotEvent

        started: list[BaseEvent] = [
            RunStartedEvent(
                thread_id=self._input.thread_id,
                run_id=self._input.run_id,
                protocol_version=PROTOCOL_VERSION,
                parent_run_id=self._input.parent_run_id,
            )
        ]
        if self._input.state is not None:
            started.append(StateSnapshotEvent(snapshot=self._input.state))
        await write(self._encode(*started))
        resume = None if self._resume is None else self._resume[1]
        finished = False
        try:
            async with self._agent.stream(self._messages, resume=resume) as events:
                async for event in events:
                    if event.path:
                        continue  # an inner agent's (agent.as_tool()): inside its call
                    if isinstance(event, TurnCompleted):
                        await write(self._encode(*self._finished(event)))
                        finished = True
                    else:
                        found = self._events(event)
                        if found:
                            await write(self._encode(*found))
        except KovaError as exc:
            _, code, message = failure(exc)
            await write(
                self._encode(*self._close_text(), RunErrorEvent(message=message, code=code))
            )
        finally:
            if not finished and self._resume is not None:
                self._paused.put_back(self._resume[0])
