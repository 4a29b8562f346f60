"""``AgentWorkflow``: one agent turn as a Temporal workflow, driving kova's turn core.

The workflow holds a :class:`~kova.agent.Turn` and does what :meth:`Turn.next_step` says:
each model call and each tool call is an activity (run by :func:`kova.temporal.worker`'s
activities, named after the agent and the tool), a step's tool calls run concurrently, and a
step with calls left to a person waits (a durable wait: days, if need be) for the ``decide``
update. The turn core does no I/O, reads no clock and draws no random number, so the
workflow is deterministic by construction; the turn's id is the workflow id. What the core
decides by itself runs here too: the agent's context policy (a summary is an activity) and
the answers to ``search_tools``. The agent's guards are checked in activities, their
decisions recorded in the turn (a replay reads them from the history and runs none again).

The workflow runs outside Temporal's sandbox (``sandboxed=False``; it is deterministic by
construction), on whatever runner a worker or ``Replayer`` has: a sandbox imports kova a
second time, and a value made by one copy (a block, an error the turn core raised) is no
instance of the other copy's class, so a replay there failed. This module imports only
temporalio, the standard library and kova's pure modules, never trio or httpx2
(``tests/test_layers.py`` checks it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():  # for a sandboxed workflow importing this
    from .._errors import (
        ApprovalMismatchError,
        ContextOverflow,
        GuardrailTripped,
        KovaError,
        SerializationError,
    )
    from .._json import dumps
    from .._messages import block_to_dict
    from ..agent._approvals import (
        DEFER,
        DeferredResult,
        InnerPause,
        PendingApprovals,
        pending_document,
        same_pause,
    )
    from ..agent._context import Compact
    from ..agent._events import ToolCallFinished, ToolCallStarted
    from ..agent._guard_record import GuardRecord
    from ..agent._guards import input_text
    from ..agent._reask import feedback as _feedback
    from ..agent._state_json import (
        config_from_json,
        field,
        messages_from_json,
        result_from_json,
        tool_from_json,
    )
    from ..agent._turn import AwaitApproval, CallModel, Finished, RunTools, Turn
    from ._inner import count_inner, outer_figures, requests_in
    from ._payloads import (
        check_size,
        guard_activity,
        model_activity,
        policy_from_json,
        read_json,
        request_to_json,
        response_from_json,
        start_activity,
        summarize_activity,
        tool_activity,
        tools_digest,
        write_json,
    )

if TYPE_CHECKING:
    from .._messages import JSONValue, Message, ToolUse
    from .._models import ToolDefinition, ToolResult

__all__ = ["AgentWorkflow"]

EVENTS_SIGNAL = "kova.events"
"""The signal the activities send a turn's live events with (batched)."""
EVENTS_QUERY = "kova.events"
"""The query that reads them: ``{"events": [...], "finished": bool}`` from an index on."""


_GUARD_EVENTS = {"pass": "guard_passed", "deny": "guard_denied", "trip": "guard_tripped"}
"""The live event of a guard's decision, by its verdict."""


def _seconds(spec: Any, key: str) -> timedelta | None:
    value = spec.get(key)
    return None if value is None else timedelta(seconds=float(value))


def _failure(exc: KovaError) -> ApplicationError:
    """A kova error of the turn as the workflow's failure (never retried: the turn core
    decided it, and deciding again gives the same answer)."""
    if isinstance(exc, GuardrailTripped):  # the client raises it again, as in-process
        return ApplicationError(
            str(exc), exc.guard, exc.reason, type="GuardrailTripped", non_retryable=True
        )
    return ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True)


@workflow.defn(name="kova.AgentWorkflow", sandboxed=False)
class AgentWorkflow:
    """One turn of an agent served by :func:`kova.temporal.worker`: history in (kova's
    Message JSON), the finished :class:`~kova.agent.Turn` out (its JSON; the client makes it
    the :class:`~kova.agent.AgentResponse`). Start it with :func:`kova.temporal.start_turn`
    or :func:`kova.temporal.run_turn`.

    - ``decide`` (an update): the decided :class:`~kova.agent.PendingApprovals` as JSON;
      rejected (nothing changes) unless they are for the calls the turn waits for, each
      decided.
    - ``pending`` (a query): the :class:`~kova.agent.PendingApprovals` JSON the turn waits
      on, or ``None``.
    """

    def __init__(self) -> None:
        self._waiting: PendingApprovals | None = None
        self._decided: PendingApprovals | None = None
        self._events: list[Any] = []
        self._finished = False

    @workflow.run
    async def run(self, request: str) -> str:
        try:
            spec = read_json(request, "the turn's request")
            agent = field(spec, "agent", str)
            output = spec.get("output")
            turn_id = workflow.info().workflow_id
            turn, started = await self._start(agent, spec.get("history"), turn_id, output)
            driver = _Driver(self, agent, spec, started)
            if output is None:
                return self._finish(await driver.drive(turn))
            history = spec.get("history")
            return await self._structured(agent, history, driver, turn, started, output)
        except KovaError as exc:
            raise _failure(exc) from None
        finally:
            # A failed or cancelled turn has finished too: its live events end there.
            self._finished = True

    async def _start(
        self, agent: str, history: object, turn_id: str, output: object
    ) -> tuple[Turn, Mapping[str, Any]]:
        """The worker's turn core for ``history`` (a local activity: it reads the worker's
        configuration and does no I/O, so it runs in this worker without a round trip
        through the server)."""
        request: dict[str, Any] = {"history": history, "turn_id": turn_id}
        if isinstance(output, Mapping):
            request["config"] = output.get("config")
        started = read_json(
            await workflow.execute_local_activity(
                start_activity(agent),
                write_json(request, "the turn's history"),
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(maximum_attempts=5),
            ),
            "the started turn",
        )
        turn = Turn.from_json(field(started, "turn", str))
        context = started.get("context")
        if context is not None:
            # The worker's agent's context policy (a saved turn holds only its state).
            turn.set_context(policy_from_json(context))
        return turn, started

    async def _structured(
        self,
        agent: str,
        history: object,
        driver: _Driver,
        turn: Turn,
        started: Mapping[str, Any],
        output: object,
    ) -> str:
        """A structured turn (``run_structured``): each attempt a turn with the response
        format, its answer checked against the format's schema, re-asked with the problem
        while it is invalid and output retries remain, as in-process. The result holds every
        attempt's turn and the re-asks; the client validates the last answer into its type."""
        if not isinstance(output, Mapping):
            raise SerializationError("a structured turn's output must be a JSON object")
        config = config_from_json(output.get("config"))
        if config.response_format is None:
            raise SerializationError("a structured turn's config has no response_format")
        retries = output.get("retries")
        if retries is None:
            retries = field(started, "output_retries", int)
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise SerializationError(f"output retries must be an int >= 0, got {retries!r}")
        working = messages_from_json(history, "history")
        turns: list[str] = []
        feedback: list[Message] = []
        while True:
            turn = await driver.drive(turn)
            turns.append(turn.to_json())
            step = turn.next_step()
            # The model activity checked the final answer against the schema (the
            # problem is in its recorded result): a paused turn has none yet.
            problem = driver.problem if isinstance(step, Finished) else None
            if problem is None or len(turns) > retries:
                self._finished = True
                return check_size(
                    dumps(
                        {
                            "kova": "structured-turn",
                            "turns": turns,
                            "feedback": [note.to_dict() for note in feedback],
                        }
                    ),
                    "the finished turn",
                )
            note = _feedback(problem)
            feedback.append(note)
            assert isinstance(step, Finished)
            working = [*working, *step.response.new_messages, note]
            retry_id = f"{workflow.info().workflow_id}#retry-{len(turns)}"
            history = [message.to_dict() for message in working]
            turn, _ = await self._start(agent, history, retry_id, output)

    def _take_decisions(self) -> PendingApprovals:
        decided = self._decided
        assert decided is not None
        self._waiting = self._decided = None
        return decided

    def _finish(self, turn: Turn) -> str:
        self._finished = True
        return check_size(turn.to_json(), "the finished turn")

    # -- approvals --------------------------------------------------------------------

    @workflow.update(name="decide")
    def decide(self, decisions: str) -> None:
        """The decisions for the calls the turn waits for (PendingApprovals JSON)."""
        self._decided = self._checked(decisions)

    @decide.validator
    def _validate_decide(self, decisions: str) -> None:
        self._checked(decisions)

    def _checked(self, decisions: str) -> PendingApprovals:
        waiting = self._waiting
        if waiting is None or self._decided is not None:
            raise ApplicationError(
                "this turn is not waiting for decisions", type="ApprovalMismatchError"
            )
        try:
            pending = PendingApprovals.from_json(decisions)
            if not same_pause(pending, waiting):
                raise ApprovalMismatchError(
                    "these decisions are for other pending calls than the ones this turn waits for"
                )
            pending.check()
        except (KovaError, TypeError, ValueError) as exc:
            raise ApplicationError(str(exc), type=type(exc).__name__) from None
        return pending

    @workflow.query(name="pending")
    def pending(self) -> str | None:
        """The PendingApprovals JSON the turn waits on, or None."""
        waiting = self._waiting
        return None if waiting is None or self._decided is not None else pending_document(waiting)

    # -- live events ------------------------------------------------------------------

    @workflow.signal(name=EVENTS_SIGNAL)
    def _events_in(self, batch: str) -> None:
        try:
            events = read_json(batch, "a batch of events").get("events")
        except KovaError:
            return  # not ours: a signal is never a reason to fail a turn
        if isinstance(events, list):
            self._events.extend(events)

    def _add_events(self, items: list[dict[str, JSONValue]]) -> None:
        """Live events of the workflow's own (deterministic: a replay adds the same)."""
        self._events.extend(items)

    @workflow.query(name=EVENTS_QUERY)
    def _events_out(self, after: int) -> str:
        return dumps({"events": self._events[after:], "finished": self._finished})


class _Driver:
    """Drives one turn to its end in workflow code: each model call and tool call an
    activity, a step with calls left to a person a durable wait for ``decide``."""

    def __init__(
        self,
        workflow_: AgentWorkflow,
        agent: str,
        spec: Mapping[str, Any],
        started: Mapping[str, Any],
    ) -> None:
        self._workflow = workflow_
        self._agent = agent
        self._events = bool(spec.get("events", False))
        heartbeat = _seconds(spec, "heartbeat_timeout")
        self._model_options: dict[str, Any] = {
            "start_to_close_timeout": _seconds(spec, "model_timeout"),
            "heartbeat_timeout": heartbeat,
            "retry_policy": _retry_policy(started.get("retry")),
            "cancellation_type": ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        }
        self._tool_options: dict[str, Any] = {
            "start_to_close_timeout": _seconds(spec, "tool_timeout"),
            "heartbeat_timeout": heartbeat,
            "retry_policy": RetryPolicy(maximum_attempts=10),
            "cancellation_type": ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        }
        self._approval_timeout = _seconds(spec, "approval_timeout")
        self.problem: str | None = None
        """What the last model reply's answer got wrong for a structured turn's schema
        (checked in the model activity), or ``None``."""
        self._digests: tuple[tuple[ToolDefinition, ...], str] | None = None
        # The digest of the deferred tools the turn searches (None: the agent has none).
        deferred = started.get("deferred")
        self._deferred = deferred if isinstance(deferred, str) else None
        self._compacts = started.get("context") is not None  # the agent has a policy
        # Which kinds of guards the worker's agent has (None: none; see _worker.guards_of).
        guards = started.get("guards")
        self._guards: Mapping[str, Any] = guards if isinstance(guards, Mapping) else {}
        self._guard_options: dict[str, Any] = {
            "start_to_close_timeout": _seconds(spec, "model_timeout"),
            "heartbeat_timeout": heartbeat,
            "retry_policy": RetryPolicy(maximum_attempts=3),
            "cancellation_type": ActivityCancellationType.TRY_CANCEL,
        }
        self._inputs: workflow.ActivityHandle[Any] | None = None
        self._inputs_started = False

    def _digest(self, turn: Turn) -> str:
        """The digest of the tools ``turn`` offers (kept while they are the same)."""
        tools = turn.tools
        cached = self._digests
        if cached is None or cached[0] is not tools:
            cached = self._digests = (tools, tools_digest(tools))
        return cached[1]

    async def drive(self, turn: Turn) -> Turn:
        """``turn`` once it has finished, or paused past the approval timeout."""
        owner = self._workflow
        self._inputs, self._inputs_started = None, False  # each turn runs its input guards
        while True:
            step = turn.next_step()
            if isinstance(step, Compact):
                # A summary the context policy asked for: an activity, so its result is in
                # the workflow's history and a replay (another worker) never asks again.
                await self._summarize(turn, step)
            elif isinstance(step, CallModel):
                await self._call_model(turn, step)
            elif isinstance(step, RunTools):
                await self._run_tools(turn, step)
            elif isinstance(step, AwaitApproval):
                await self._inputs_passed(turn)
                owner._waiting, owner._decided = step.pending, None
                try:
                    await workflow.wait_condition(
                        lambda: owner._decided is not None, timeout=self._approval_timeout
                    )
                except TimeoutError:
                    # Nobody decided in time: the turn ends paused, its pending set
                    # (resume it later with agent.resume, or start a new turn).
                    return turn
                turn.decided(owner._take_decisions())
            else:
                assert isinstance(step, Finished)
                await self._inputs_passed(turn)
                if self._guards.get("output"):  # the whole answer, once
                    text = step.response.text
                    self._decided(
                        turn, _verdict(await self._check({"kind": "output", "text": text}))
                    )
                return turn

    async def _call_model(self, turn: Turn, step: CallModel) -> None:
        """One model call (or token count) as an activity, its reply given to ``turn``."""
        # The request, not the turn: the worker's agent has the tools, so only their
        # digest travels (the list comes back when the agent's changed).
        request = request_to_json(step.request, self._digest(turn))
        request["events"] = self._events
        if self._deferred is not None:
            # The worker offers the up-front tools, search_tools and what the turn found
            # (the core answered the searches, here): never every tool.
            request["deferred"] = self._deferred
            request["found"] = list(turn.found_tools)
        if step.count_tokens:
            request["count_tokens"] = True
        else:
            await self._before_first_call(turn)
        if self._compacts:
            request["overflow"] = True  # a refusal as over the window comes back in-band
        model = workflow.start_activity(
            model_activity(self._agent),
            write_json(request, "a model request"),
            **self._model_options,
        )
        reply = read_json(await self._guarded(turn, model), "a model reply")
        tripped = reply.get("tripped")
        if tripped is not None:  # an output guard stopped the streamed answer
            self._decided(turn, [tripped])
        tools = reply.get("tools")
        if tools is not None:
            # The worker's agent offered other tools than the turn's (an MCP server's
            # list changed): from this call on, as in-process. Read from the activity's
            # result, so a replay offers the same.
            deferred = reply.get("deferred")
            if deferred is None:
                turn.set_tools(_tools_from_json(tools))
            else:
                listed = _tools_from_json(deferred)
                turn.set_tools(_tools_from_json(tools), deferred=listed)
                self._deferred = tools_digest(listed)
        if step.count_tokens:
            turn.tokens_counted(field(reply, "tokens", int))
            return
        overflow = reply.get("overflow")
        if isinstance(overflow, Mapping):
            # The provider refused the prompt as over its window: the turn's policy
            # compacts and the loop calls again (or the turn fails with it), as in-process.
            status = overflow.get("status_code")
            turn.overflowed(
                ContextOverflow(
                    str(overflow.get("message", "")),
                    status_code=status if isinstance(status, int) else None,
                )
            )
            return
        turn.model_replied(response_from_json(field(reply, "response", dict)))
        invalid = reply.get("invalid")
        self.problem = invalid if isinstance(invalid, str) else None
        if self._events:  # the search_tools calls the core answered, bracketed
            self._workflow._add_events(_core_events(turn))

    async def _run_tools(self, turn: Turn, step: RunTools) -> None:
        """A step's calls, each an activity (concurrently), after the input guards passed
        and the tool guards let them through; the outcomes given to ``turn``."""
        await self._inputs_passed(turn)
        denied = await self._screen(turn, step.calls)
        approved, events = step.approved, self._events
        # What an agent tool's inner turn checks the outer usage limits against.
        figures = outer_figures(turn)
        running = [call for call in step.calls if call.id not in denied]
        outcomes = await asyncio.gather(
            *(
                workflow.execute_activity(
                    tool_activity(self._agent, call.name),
                    write_json(
                        _tool_request(call, call.id in approved, step, events, figures),
                        "a tool call",
                    ),
                    **self._tool_options,
                )
                for call in running
            )
        )
        results: list[DeferredResult] = []
        by_id = dict(zip((call.id for call in running), outcomes, strict=True))
        outcome_data = [
            {} if call.id in denied else read_json(by_id[call.id], "a tool result")
            for call in step.calls
        ]
        # Model calls the step's inner turns sent, from each outcome on (an error over the
        # requests limit counts them all).
        sent = [requests_in(data.get("inner")) for data in outcome_data]
        for index, (call, data) in enumerate(zip(step.calls, outcome_data, strict=True)):
            if call.id in denied:  # a tool guard's denial, answered in-band
                results.append(denied[call.id])
                continue
            inner = data.get("inner")
            if inner is not None:
                # An agent tool's inner turns count in this turn, as in-process (and may
                # take it over a usage limit: then the turn fails).
                count_inner(turn, inner, sent_later=sum(sent[index + 1 :]))
            paused = data.get("paused")
            if paused is not None:  # its inner turn waits for approvals
                turn.inner_paused(call.id, InnerPause.from_dict(paused))
            if data.get("defer"):
                results.append(DEFER)
            else:
                results.append(result_from_json(data.get("result")))
        turn.tools_finished(results)

    # -- guards (the worker's agent's; each check an activity, its decisions recorded in
    # the turn: a replay reads them from the workflow's history and runs no guard again) --

    async def _check(self, request: dict[str, JSONValue]) -> Mapping[str, Any]:
        """One guard check activity; its reply (``_verdict`` reads its decisions)."""
        reply = await workflow.execute_activity(
            guard_activity(self._agent), write_json(request, "a guard check"), **self._guard_options
        )
        return read_json(reply, "a guard's verdict")

    def _decided(self, turn: Turn, records: list[Any], calls: tuple[ToolUse, ...] = ()) -> None:
        """Record the decisions in ``turn`` (and, with ``events``, report them: a
        ``guard_passed``, ``guard_denied`` or ``guard_tripped`` each, with the tool call a
        tool guard decided on); a trip ends the turn (GuardrailTripped)."""
        tripped = None
        by_id = {call.id: call for call in calls}
        for item in records:
            record = GuardRecord.from_dict(item)
            turn.guard_decided(record)
            if record.verdict == "trip" and tripped is None:
                tripped = record
            if self._events:
                event: dict[str, JSONValue] = {
                    "kind": _GUARD_EVENTS[record.verdict],
                    "guard": record.guard,
                    "text": record.reason,
                }
                call = by_id.get(record.call_id)
                if call is not None:
                    event["call"] = block_to_dict(call)
                self._workflow._add_events([event])
        if tripped is not None:
            raise GuardrailTripped(guard=tripped.guard, reason=tripped.reason)

    async def _before_first_call(self, turn: Turn) -> None:
        """Once per turn, before its first model call: the blocking input guards (a trip
        sends nothing), then the others started beside the call."""
        if self._inputs_started:
            return
        self._inputs_started = True
        guards = self._guards
        if not guards:
            return
        text = input_text(turn.history)
        if guards.get("blocking"):
            self._decided(
                turn, _verdict(await self._check({"kind": "input", "text": text, "blocking": True}))
            )
        if guards.get("concurrent"):
            self._inputs = workflow.start_activity(
                guard_activity(self._agent),
                write_json({"kind": "input", "text": text, "blocking": False}, "a guard check"),
                **self._guard_options,
            )

    async def _guarded(self, turn: Turn, call: workflow.ActivityHandle[Any]) -> Any:
        """The model activity's result; while the input guards beside it run, a trip
        cancels it and ends the turn."""
        inputs = self._inputs
        if inputs is not None and not inputs.done():
            await workflow.wait([call, inputs], return_when=asyncio.FIRST_COMPLETED)
            if inputs.done() and not call.done():
                try:
                    await self._inputs_passed(turn)
                except BaseException:
                    call.cancel()
                    raise
        return await call

    async def _inputs_passed(self, turn: Turn) -> None:
        """Wait for the input guards beside the turn (before tools run, and before it
        answers or pauses)."""
        inputs = self._inputs
        if inputs is None:
            return
        self._inputs = None
        self._decided(turn, _verdict(read_json(await inputs, "a guard's verdict")))

    async def _screen(self, turn: Turn, calls: tuple[ToolUse, ...]) -> dict[str, ToolResult]:
        """The tool guards on a step's calls: the in-band answers of those they denied."""
        if not self._guards.get("tool") or not calls:
            return {}
        request: dict[str, JSONValue] = {
            "kind": "tool",
            "calls": [block_to_dict(call) for call in calls],
        }
        reply = await self._check(request)
        self._decided(turn, _verdict(reply), calls)
        denied = reply.get("denied")
        if not isinstance(denied, Mapping):
            return {}
        return {key: result_from_json(value) for key, value in denied.items()}

    async def _summarize(self, turn: Turn, step: Compact) -> None:
        context = turn.to_dict().get("context")
        pending = context.get("pending") if isinstance(context, dict) else None
        assert isinstance(pending, list)  # a Compact step waits for its summary
        request = request_to_json(step.request, tools_digest(()))
        request["strategy"] = pending[1]  # which Summarize: the worker has its summarizer
        reply = read_json(
            await workflow.execute_activity(
                summarize_activity(self._agent),
                write_json(request, "a summary request"),
                **self._model_options,
            ),
            "a summary",
        )
        turn.compacted(response_from_json(field(reply, "response", dict)))


def _verdict(reply: Mapping[str, Any]) -> list[Any]:
    """A guard activity's decisions; a check that raised fails the turn with its error."""
    error = reply.get("error")
    if isinstance(error, Mapping):
        raise ApplicationError(
            str(error.get("message", "")), type=str(error.get("type")), non_retryable=True
        )
    records = reply.get("records")
    if not isinstance(records, list):
        raise SerializationError("a guard's verdict must list its decisions")
    return records


def _core_events(turn: Turn) -> list[dict[str, JSONValue]]:
    """What the turn core did by itself, as live events: each ``search_tools`` call it
    answered, started and finished (read from the core: the same on a replay)."""
    items: list[dict[str, JSONValue]] = []
    for event in turn.take_events():
        if isinstance(event, ToolCallStarted):
            items.append({"kind": "tool_started", "call": block_to_dict(event.call)})
        elif isinstance(event, ToolCallFinished):
            items.append(
                {
                    "kind": "tool_finished",
                    "call": block_to_dict(event.call),
                    "result": block_to_dict(event.result),
                }
            )
    return items


def _tool_request(
    call: ToolUse,
    approved: bool,
    step: RunTools,
    events: bool,
    figures: dict[str, JSONValue] | None,
) -> dict[str, JSONValue]:
    """A tool activity's argument: the call and, for a call of an agent tool, what its inner
    turn needs of this turn (its usage limits' figures, the paused inner turn it continues).
    """
    request: dict[str, JSONValue] = {
        "call": block_to_dict(call),
        "approved": approved,
        "turn_id": step.turn_id,
        "events": events,
    }
    if figures is not None:
        request["outer"] = figures
    resume = step.resumes.get(call.id)
    if resume is not None:
        request["resume"] = resume.to_dict()
    return request


def _tools_from_json(data: object) -> list[ToolDefinition]:
    if not isinstance(data, list):
        raise SerializationError("a model reply's tools must be a list")
    return [tool_from_json(item) for item in data]


def _retry_policy(data: object) -> RetryPolicy:
    """The agent's :class:`~kova.agent.RetryConfig` as Temporal's retry policy of its model
    calls (Temporal retries; the provider, inside the activity, does not)."""
    if not isinstance(data, dict):
        return RetryPolicy(maximum_attempts=3)
    initial = max(float(data["initial_backoff"]), 0.001)
    return RetryPolicy(
        initial_interval=timedelta(seconds=initial),
        backoff_coefficient=max(float(data["multiplier"]), 1.0),
        maximum_interval=timedelta(seconds=max(float(data["max_backoff"]), initial)),
        maximum_attempts=int(data["max_retries"]) + 1,
    )
