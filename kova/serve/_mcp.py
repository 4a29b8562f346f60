"""Agents as MCP tools, on the ``mcp`` package's own server: Streamable HTTP at ``/mcp`` on
:func:`kova.serve.app`, and stdio with :func:`serve_mcp_stdio` (``kova mcp serve``).

Each agent is one tool named after it: ``{"prompt": "..."}`` in, the turn's answer out (an
error result, ``isError``, when the turn fails). While the turn runs the caller gets progress
notifications (when it asked for them with a progress token): one when the turn starts, one as
each of the agent's own tool calls starts and finishes, one when the answer begins. A client
that cancels the request (``notifications/cancelled``) cancels the turn.

With ``tools=True`` the agents' own tools are offered too, each under its own name (two
served agents offering one tool name, or a tool named like an agent, is refused when the
server is made). A call runs on its agent's tool pool exactly as the agent's own calls do:
its arguments checked against the tool's schema, its agent's approval policy and tool guards
asked first (a call left to a person, or denied, is an error result: MCP has no one to ask),
the result's text, images and documents as MCP content. Cancelling the request cancels the
call.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from .._errors import GuardrailTripped, KovaError
from .._messages import Document, Image, Text, ToolResult, ToolUse
from .._models import TextDelta
from ..agent import ToolCallFinished, ToolCallStarted, TurnCompleted
from ._turns import PausedTurn, agent_names, failure

if TYPE_CHECKING:
    from collections.abc import Mapping

    import mcp_types as mt
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.routing import Route

    from .._requests import ToolDefinition
    from ..agent import Agent

__all__ = ["mcp_server", "mounted", "serve_mcp_stdio"]

_INVALID_PARAMS = -32602


def _description(agent: Agent) -> str:
    prompt = agent.config.system_prompt
    if prompt:
        return f"Ask the agent {agent.config.name!r}. Its instructions: {prompt[:500]}"
    return f"Ask the agent {agent.config.name!r}: it runs a turn and answers."


def offered_tools(
    agents: Mapping[str, Agent], *, strict: bool = False
) -> dict[str, tuple[Agent, ToolDefinition]]:
    """The agents' own tools by name, with the agent each belongs to.

    Raises:
        ValueError: with ``strict``, two agents offer one tool name, or a tool is named like
            a served agent (otherwise the first one found is kept).
    """
    found: dict[str, tuple[Agent, ToolDefinition]] = {}
    for agent in agents.values():
        for definition in agent.config.registry.definitions():
            name = definition.name
            if name in agents or name in found:
                if not strict:
                    continue
                owner = found[name][0].config.name if name in found else ""
                other = "an agent" if name in agents else f"the agent {owner!r}"
                raise ValueError(
                    f"the tool {name!r} of the agent {agent.config.name!r} cannot be offered "
                    f"over MCP: {other} has that name too (MCP tools need unique names; serve "
                    "the agents apart, or without tools=True)"
                )
            found[name] = (agent, definition)
    return found


def _listed(definition: ToolDefinition) -> mt.Tool:
    import mcp_types as mt

    hints = definition.annotations
    annotations = None
    if hints is not None:
        annotations = mt.ToolAnnotations(
            title=hints.title,
            read_only_hint=hints.read_only,
            destructive_hint=hints.destructive,
            idempotent_hint=hints.idempotent,
            open_world_hint=hints.open_world,
        )
    return mt.Tool(
        name=definition.name,
        description=definition.description,
        input_schema=dict(definition.parameters),
        output_schema=None if definition.output_schema is None else dict(definition.output_schema),
        annotations=annotations,
    )


def mcp_server(
    agents: Mapping[str, Agent], *, max_prompt_chars: int = 200_000, tools: bool = False
) -> Server[Any]:
    """An MCP server (the ``mcp`` package's lowlevel ``Server``) offering each agent as a
    tool, and with ``tools`` the agents' own tools.

    Raises:
        ValueError: with ``tools``, two agents offer one tool name, or a tool is named like
            an agent.
    """
    import mcp_types as mt
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError

    if tools:
        offered_tools(agents, strict=True)
    schema = {
        "type": "object",
        "properties": {"prompt": {"type": "string", "description": "what to ask the agent"}},
        "required": ["prompt"],
        "additionalProperties": False,
    }

    async def list_tools(
        context: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        listed = [
            mt.Tool(name=name, description=_description(agent), input_schema=schema)
            for name, agent in agents.items()
        ]
        if tools:
            listed.extend(_listed(definition) for _, definition in offered_tools(agents).values())
        return mt.ListToolsResult(tools=listed)

    async def call_tool(
        context: ServerRequestContext[Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult:
        agent = agents.get(params.name)
        arguments = params.arguments or {}
        if agent is None:
            owner = offered_tools(agents).get(params.name) if tools else None
            if owner is None:
                known = ", ".join([*agents, *(offered_tools(agents) if tools else ())])
                raise MCPError(_INVALID_PARAMS, f"no tool named {params.name!r} (tools: {known})")
            if not owner[0].is_open:
                raise MCPError(-32603, f"the agent {owner[0].config.name!r} is not open")
            return await call_agent_tool(owner[0], params.name, dict(arguments))
        prompt = arguments.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise MCPError(_INVALID_PARAMS, "the argument 'prompt' must be a non-empty string")
        if set(arguments) - {"prompt"}:
            extra = ", ".join(sorted(set(arguments) - {"prompt"}))
            raise MCPError(_INVALID_PARAMS, f"unknown arguments: {extra}")
        if len(prompt) > max_prompt_chars:
            raise MCPError(_INVALID_PARAMS, f"the prompt is over {max_prompt_chars} characters")
        if not agent.is_open:
            raise MCPError(-32603, f"the agent {params.name!r} is not open")
        return await _run(agent, prompt, context)

    return Server(
        "kova",
        instructions="Each tool is a kova agent: pass it a prompt, get its answer."
        + (" The agents' own tools are offered too." if tools else ""),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def call_agent_tool(agent: Agent, name: str, arguments: dict[str, Any]) -> mt.CallToolResult:
    """One call of ``agent``'s tool ``name``, run on its tool pool as the agent's own calls
    are (schema check, tool guards, approval policy), as an MCP result."""
    from ..agent._guard_gate import GuardGate
    from ..agent._guards import ToolGuard
    from ..agent._steps import ToolStep
    from ..agent._turn import new_turn_id

    context = agent.driver_context()
    call = ToolUse(id="mcp_" + secrets.token_hex(8), name=name, input=arguments)
    guards = [guard for guard in context.config.guards if isinstance(guard, ToolGuard)]
    gate = GuardGate(guards, "") if guards else None
    step = ToolStep(context, context.emitter(), streamed=False, gate=gate)
    result: object
    try:
        denied = {} if gate is None else await gate.tool_calls((call,))
    except GuardrailTripped as exc:
        return _error_result(f"the call was stopped: {exc}")
    if call.id in denied:
        result = denied[call.id]
    else:
        request = step.request((call,), approved=frozenset(), turn_id=new_turn_id())
        (result,) = await step.execute(request)
    if not isinstance(result, ToolResult):  # DEFER: the agent leaves the call to a person
        return _error_result(
            f"the call of {name!r} needs a person's approval, which an MCP client cannot give "
            "here: it did not run"
        )
    return _tool_result(result)


def _error_result(message: str) -> mt.CallToolResult:
    import mcp_types as mt

    return mt.CallToolResult(content=[mt.TextContent(type="text", text=message)], is_error=True)


def _tool_result(result: ToolResult) -> mt.CallToolResult:
    """A kova tool result as MCP content: text, images, documents (embedded or linked)."""
    import mcp_types as mt

    parts = (Text(text=result.content),) if isinstance(result.content, str) else result.content
    content: list[mt.ContentBlock] = []
    for number, part in enumerate(parts):
        if isinstance(part, Text):
            content.append(mt.TextContent(type="text", text=part.text))
        elif isinstance(part, Image):
            if part.data is not None:
                media_type = part.media_type or "application/octet-stream"
                content.append(mt.ImageContent(type="image", data=part.data, mime_type=media_type))
            else:
                assert part.url is not None
                content.append(
                    mt.ResourceLink(
                        type="resource_link",
                        name=f"image-{number}",
                        uri=part.url,
                        mime_type=part.media_type,
                    )
                )
        elif isinstance(part, Document):
            content.append(_document(part, number))
    structured = result.structured if isinstance(result.structured, dict) else None
    return mt.CallToolResult(
        content=content, structured_content=structured, is_error=result.is_error
    )


def _document(part: Document, number: int) -> mt.ContentBlock:
    import mcp_types as mt

    name = part.title or f"document-{number}"
    if part.data is not None:
        return mt.EmbeddedResource(
            type="resource",
            resource=mt.BlobResourceContents(
                uri=f"kova://result/{name}", mime_type=part.media_type, blob=part.data
            ),
        )
    uri = part.url if part.url is not None else f"kova://file/{part.file_id}"
    return mt.ResourceLink(type="resource_link", name=name, uri=uri, mime_type=part.media_type)


async def _run(agent: Agent, prompt: str, context: ServerRequestContext[Any]) -> mt.CallToolResult:
    import mcp_types as mt

    step = 0

    async def progress(message: str) -> None:
        nonlocal step
        step += 1
        await context.session.report_progress(step, None, message)

    answering = False
    try:
        await progress("the turn started")
        async with agent.stream(prompt) as events:
            async for event in events:
                if event.path:
                    continue
                if isinstance(event, TextDelta):
                    if not answering and event.text:
                        answering = True
                        await progress("answering")
                elif isinstance(event, ToolCallStarted):
                    answering = False
                    await progress(f"calling {event.call.name}")
                elif isinstance(event, ToolCallFinished):
                    outcome = "failed" if event.result.is_error else "done"
                    await progress(f"{event.call.name} {outcome}")
                elif isinstance(event, TurnCompleted):
                    response = event.response
                    if response.pending is not None:
                        raise PausedTurn
                    return mt.CallToolResult(
                        content=[mt.TextContent(type="text", text=response.text)],
                        structured_content={
                            "answer": response.text,
                            "usage": {
                                "input_tokens": response.usage.input_tokens,
                                "output_tokens": response.usage.output_tokens,
                            },
                        },
                    )
    except KovaError as exc:
        return _error_result(failure(exc)[2])
    return _error_result("the turn ended without an answer")


def mounted(
    agents: Mapping[str, Agent], *, max_prompt_chars: int, tools: bool = False
) -> tuple[Route, StreamableHTTPSessionManager]:
    """The ``/mcp`` route (Streamable HTTP) and its session manager, to run in the app's
    lifespan (``async with manager.run():``)."""
    from mcp.server.streamable_http_manager import (
        StreamableHTTPASGIApp,
        StreamableHTTPSessionManager,
    )
    from starlette.routing import Route

    manager = StreamableHTTPSessionManager(
        app=mcp_server(agents, max_prompt_chars=max_prompt_chars, tools=tools)
    )
    return Route("/mcp", StreamableHTTPASGIApp(manager)), manager


async def serve_mcp_stdio(*agents: Agent, tools: bool = False) -> None:
    """Serve ``agents`` as MCP tools over this process's stdin and stdout until the client
    goes away (opening the agents not open yet). ``kova mcp serve`` runs this.

    Args:
        agents: the agents, each a tool named after it.
        tools: offer the agents' own tools too, each under its own name (run on its agent's
            tool pool, under its approval policy and tool guards).

    Raises:
        ValueError: no agents, two with one name, or (with ``tools``) a tool name offered
            twice.
    """
    from contextlib import AsyncExitStack

    from mcp.server.stdio import stdio_server

    named = agent_names(agents)
    server = mcp_server(named, tools=tools)
    async with AsyncExitStack() as stack:
        for agent in named.values():
            if not agent.is_open:
                await stack.enter_async_context(agent)
        read, write = await stack.enter_async_context(stdio_server())
        await server.run(read, write, server.create_initialization_options())
