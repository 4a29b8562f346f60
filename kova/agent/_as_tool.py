"""An agent used as another agent's tool: :meth:`Agent.as_tool <kova.agent.Agent.as_tool>`.

The tool runs one turn of its agent with the model's input as the prompt and answers with
the turn's final text. It runs inside the outer turn's tool call, so everything the outer
turn does holds for it by construction: cancelling the outer turn cancels it (and all it
started), its events reach the outer stream with a path, its calls ask the outer approval
policy when it has none of its own, its deferred calls pause the outer turn, and its usage
counts in the outer turn's usage and limits. A failure of the inner turn is an error result
for the outer model, never a failure of the outer turn (a cancellation stays one).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import trio

from .._errors import BuildError, KovaError
from .._messages import Message, ToolResult
from ..tools import ToolContext, current_tool_context
from ._approvals import InnerPause, call_fingerprint
from ._config import DEFAULT_NAME, usage_key
from ._input import check_messages
from ._loop import run_turn
from ._nesting import outer_call

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable

    from .._messages import JSONObject
    from .._requests import InferenceConfig
    from ._events import AgentResponse
    from ._nesting import CallSite
    from ._seams import OpenAgent
    from ._structured import _Output

__all__ = [
    "UNNAMED_TOOL",
    "AgentTool",
    "check_agent_names",
    "make_agent_tool",
    "open_as_tool",
    "run_inner_turn",
]

HistoryOption = Sequence[Message] | Callable[[ToolContext[Any]], Sequence[Message]] | None
"""``as_tool(history=...)``: what the inner turn sees before the prompt."""

UNNAMED_TOOL = "agent"
"""``as_tool()``'s name for an agent left with the default name."""

_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


class AgentTool:
    """A :class:`~kova.tools.Tool` that runs one turn of an agent (see
    :meth:`Agent.as_tool <kova.agent.Agent.as_tool>`)."""

    __slots__ = (
        "_history",
        "_input",
        "_output",
        "_session",
        "agent",
        "description",
        "name",
        "parameters",
    )

    def __init__(
        self,
        agent: OpenAgent,
        *,
        name: str,
        description: str,
        parameters: JSONObject,
        input: type[Any],
        history: HistoryOption,
        output: tuple[object, _Output] | None = None,
        session: Any = None,
    ) -> None:
        self.agent = agent
        """The agent this tool runs."""
        self.name = name
        self.description = description
        self.parameters = parameters
        self._input = input
        self._history = history
        self._output = output
        self._session = session
        """``as_tool(session=...)``: the inner agent's conversation, kept across calls."""

    def __repr__(self) -> str:
        return f"<AgentTool {self.name!r} running agent {self.agent.config.name!r}>"

    def prompt(self, arguments: JSONObject) -> str:
        """The inner turn's prompt for the model's ``arguments`` (already schema-checked)."""
        if self._input is str:
            value = arguments.get("input")
            return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        model: Any = self._input
        return str(model.model_validate(arguments).model_dump_json())

    def _messages(self, prompt: str) -> tuple[Message, ...]:
        history = self._history
        if callable(history):
            context = current_tool_context()
            if context is None:  # run outside an agent: the context a tool gets there
                context = ToolContext(call_id="", turn_id="", agent="", deps=None)
            history = history(context)
        before: tuple[Message, ...] = () if history is None else tuple(history)
        check_messages(before)
        return (*before, Message.user(prompt))

    async def execute(self, arguments: JSONObject) -> ToolResult:
        """Run one turn of the agent; its final text is the result (a failure of that turn
        is an error result, a cancellation propagates)."""
        agent = self.agent
        site = outer_call()
        try:
            resume = site.step.resumes.get(site.call.id) if site is not None else None
            if resume is not None:
                history: tuple[Message, ...] = resume.history
            else:
                history = self._messages(self.prompt(arguments))
            if not agent.is_open:
                raise BuildError(
                    f"agent {agent.config.name!r} is not open: give it to the outer agent "
                    "(AgentBuilder.tool) before its `async with`, or open it yourself"
                )
            if self._session is not None:  # kova.sessions loads before and appends after
                response = await _in_session(self._session, agent, history, site, resume)
            elif self._output is None:
                response = await run_inner_turn(agent, history, site, resume)
            else:
                from ._structured import run_structured_turn

                def attempt(
                    working: Sequence[Message], overrides: InferenceConfig
                ) -> Awaitable[AgentResponse]:
                    return run_inner_turn(agent, tuple(working), site, None, overrides)

                raw, output = self._output
                first = None
                if resume is not None:  # the resumed turn's answer is the first attempt
                    first = response = await run_inner_turn(agent, history, site, resume)
                if first is None or first.pending is None:
                    # Validated, and re-asked while invalid, as run_structured does.
                    value, response = await run_structured_turn(
                        attempt, history, raw, None, agent.config.output_retries, first
                    )
                    # The answer as the tool's result: its JSON text, and the value itself.
                    data = output.to_json(value)
                    return ToolResult(content=json.dumps(data, ensure_ascii=False), structured=data)
        except trio.Cancelled:
            raise
        except (KovaError, Exception) as exc:  # in-band: the outer model decides what next
            if site is not None and site.call.id in site.step.paused:
                return ToolResult(content="(waiting for approvals)")  # a structured turn's pause
            detail = str(exc)
            kind = type(exc).__name__
            return ToolResult.error(
                f"agent {self.name!r} failed: {kind}: {detail}"
                if detail
                else f"agent {self.name!r} failed: {kind}"
            )
        if response.pending is not None:
            assert site is not None  # only a nested turn hands its pause on
            return ToolResult(content="(waiting for approvals)")
        return ToolResult(content=response.text)


async def run_inner_turn(
    agent: OpenAgent,
    history: tuple[Message, ...],
    site: CallSite | None,
    resume: InnerPause | None,
    overrides: InferenceConfig | None = None,
) -> AgentResponse:
    """One turn of ``agent`` run by an agent tool for the outer call ``site`` (``None`` when
    the tool is called outside an agent): streamed into the outer stream when that is
    streamed; a pause is left in the outer step's ``paused``."""
    context = current_tool_context()
    deps = context.deps if context is not None else None
    if site is None:
        return await agent.run(history, config=overrides, deps=deps)
    driver = agent.driver_context()
    if resume is not None:
        turn = driver.resume_turn(history, resume.pending, overrides)
    else:
        turn = driver.start_turn(history, overrides, None)
    response = await run_turn(driver, turn, overrides, deps=deps, site=site)
    if response.pending is not None:
        call = site.call
        site.step.paused[call.id] = InnerPause(
            agent=agent.config.name,
            history=(*history, *response.new_messages),
            pending=response.pending,
            fingerprint=call_fingerprint(call.name, call.input),
        )
    return response


def check_agent_names(outer: OpenAgent) -> None:
    """Refuse a tree of agents (``outer`` and the agents given to it as tools, at any depth)
    in which two different agents would be counted under one key of ``usage_by_agent``:
    their name, or for one left with the default name, the name of the tool it is given as
    (:func:`usage_key`). One agent under several keys (one unnamed agent given as two
    tools) is counted under each; one key for one agent (a named agent given twice, as two
    tools or at two levels) is one entry.

    Raises:
        BuildError: naming both agents and where they are in the tree.
    """
    seen: dict[str, tuple[OpenAgent, str]] = {}
    expanded: set[int] = set()

    def visit(agent: OpenAgent, tools: tuple[AgentTool, ...]) -> None:
        key = usage_key(agent.config.name, tools[-1].name if tools else None)
        if not tools:
            where = "the outer agent"
        else:
            unnamed = " (unnamed)" if agent.config.name == DEFAULT_NAME else ""
            path = " > ".join(repr(tool.name) for tool in tools)
            where = f"the agent{unnamed} behind tool {path}"
        found = seen.get(key)
        if found is None:
            seen[key] = (agent, where)
        elif found[0] is not agent:
            both = f"{found[1]} and {where}"
            if found[0].config.name == agent.config.name == key != DEFAULT_NAME:
                raise BuildError(
                    f"two agents in agent {outer.config.name!r}'s tree are named {key!r}: "
                    f"{both}. usage_by_agent counts usage by agent name, so give each its "
                    "own name (AgentBuilder.name)"
                )
            raise BuildError(
                f"two agents in agent {outer.config.name!r}'s tree would both count as "
                f"{key!r} in usage_by_agent: {both}. An agent left with the default name "
                f"{DEFAULT_NAME!r} counts under the name of the tool it is given as: give the "
                "agents names (AgentBuilder.name) or the tools other names (as_tool(name=...))"
            )
        if id(agent) in expanded:
            return
        expanded.add(id(agent))
        for tool in agent.config.registry:
            if isinstance(tool, AgentTool):
                visit(tool.agent, (*tools, tool))

    visit(outer, ())


@asynccontextmanager
async def open_as_tool(inner: OpenAgent, outer: OpenAgent) -> AsyncIterator[None]:
    """Hold ``inner`` (given to ``outer`` as a tool) open for ``outer``'s block.

    An agent the host opened is used as it is and left open. Otherwise ``outer`` opens it
    and closes it when its own block ends: an open agent owns tasks (its runtime, its
    actors) in the block that opened it, so it cannot outlive that block for a second outer
    agent. A second outer agent that finds it held open by the first is refused with a
    :class:`BuildError` saying to open it around both.
    """
    owner = inner.tool_owner
    if owner is not None:
        raise BuildError(
            f"agent {inner.config.name!r} (a tool of agent {outer.config.name!r}) is held open "
            f"by agent {owner!r}, which opened it and closes it when its block ends; to give "
            f"one agent to several agents, open it yourself around them: "
            f"`async with {inner.config.name}, ...:` (an open agent is used as it is)"
        )
    if inner.is_open:
        yield
        return
    inner.tool_owner = outer.config.name  # before opening: a concurrent outer sees it
    try:
        async with inner:
            yield
    finally:
        inner.tool_owner = None


async def _in_session(
    session: Any,
    agent: OpenAgent,
    history: tuple[Message, ...],
    site: CallSite | None,
    resume: InnerPause | None,
) -> AgentResponse:
    """One inner turn on the tool's session: the prompt after the session's history, or the
    inner turn paused there resumed with the outer decisions."""
    if resume is None:
        run = partial(run_inner_turn, agent, site=site, resume=None)
        response: AgentResponse = await session.run_turn(history[-1:], run)
        return response

    async def resumed(stored: tuple[Message, ...], pending: object) -> AgentResponse:
        return await run_inner_turn(agent, stored, site, resume)

    response = await session.resume_turn(None, resume.pending, resumed)
    return response


def make_agent_tool(
    agent: OpenAgent,
    name: str | None,
    description: str | None,
    input: object,
    history: object,
    output: object = None,
    session: object = None,
) -> AgentTool:
    """:meth:`Agent.as_tool`'s checks and schema."""
    if name is None:
        # An agent left unnamed is "agent" to the model (and in usage_by_agent), not "kova".
        name = UNNAMED_TOOL if agent.config.name == DEFAULT_NAME else agent.config.name
    if not isinstance(name, str) or not name or not set(name) <= _NAME_OK or len(name) > 64:
        raise BuildError(
            f"as_tool name must be 1 to 64 letters, digits, '_' or '-', got {name!r}"
            + (" (the agent's name; pass name=...)" if name == agent.config.name else "")
        )
    if description is None:
        description = agent.config.system_prompt or (
            "Ask another agent." if name == UNNAMED_TOOL else f"Ask the {name} agent."
        )
    if not isinstance(description, str):
        raise TypeError(f"as_tool description must be a str, got {type(description).__name__}")
    if input is str:
        parameters: JSONObject = {
            "type": "object",
            "properties": {"input": {"type": "string", "description": "What to ask the agent."}},
            "required": ["input"],
            "additionalProperties": False,
        }
    else:
        parameters = _model_schema(input)
    if history is not None and not callable(history):
        if not isinstance(history, Sequence) or isinstance(history, str | bytes):
            raise TypeError(
                "as_tool history must be a sequence of kova.Message, a function of the "
                f"ToolContext returning one, or None; got {type(history).__name__}"
            )
        history = tuple(history)
        check_messages(history)
    if session is not None:
        if not callable(getattr(session, "run_turn", None)):
            raise TypeError(
                f"as_tool session must be a kova.sessions.Session, got {type(session).__name__}"
            )
        if history is not None or output is not None:
            raise TypeError(
                "as_tool session= keeps the inner agent's conversation: not with history= "
                "(the session is the history) or output="
            )
    return AgentTool(
        agent,
        session=session,
        name=name,
        description=description,
        parameters=parameters,
        input=cast("type[Any]", input),
        history=cast("HistoryOption", history),
        output=None if output is None else (output, _structured_output(output)),
    )


def _structured_output(output: object) -> _Output:
    from ._structured import _Output

    try:
        return _Output(output)
    except TypeError as exc:
        raise TypeError(str(exc).replace("run_structured's output", "as_tool output")) from None


def _model_schema(model: object) -> JSONObject:
    """The JSON schema of a pydantic model class, as a tool's parameters."""
    # A pydantic model cannot exist unless pydantic was imported (it is not a dependency).
    pydantic = sys.modules.get("pydantic")
    if pydantic is None or not isinstance(model, type) or not issubclass(model, pydantic.BaseModel):
        shown = model.__name__ if isinstance(model, type) else type(model).__name__
        raise TypeError(f"as_tool input must be str or a pydantic model class, got {shown}")
    schema: dict[str, Any] = dict(cast("Any", model).model_json_schema())
    schema.setdefault("type", "object")
    return schema
