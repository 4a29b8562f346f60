"""Agents as MCP tools, on the ``mcp`` package's own server: Streamable HTTP at ``/mcp`` on
:func:`kova.serve.app`, and stdio with :func:`serve_mcp_stdio` (``kova mcp serve``).

Each agent is one tool named after it: ``{"prompt": "..."}`` in, the turn's answer out (an
error result, ``isError``, when the turn fails). While the turn runs the caller gets progress
notifications (when it asked for them with a progress token): one when the turn starts, one as
each of the agent's own tool calls starts and finishes, one when the answer begins. A client
that cancels the request (``notifications/cancelled``) cancels the turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._errors import KovaError
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

    from ..agent import Agent

__all__ = ["mcp_server", "mounted", "serve_mcp_stdio"]

_INVALID_PARAMS = -32602


def _description(agent: Agent) -> str:
    prompt = agent.config.system_prompt
    if prompt:
        return f"Ask the agent {agent.config.name!r}. Its instructions: {prompt[:500]}"
    return f"Ask the agent {agent.config.name!r}: it runs a turn and answers."


def mcp_server(agents: Mapping[str, Agent], *, max_prompt_chars: int = 200_000) -> Server[Any]:
    """An MCP server (the ``mcp`` package's lowlevel ``Server``) offering each agent as a
    tool."""
    import mcp_types as mt
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError

    schema = {
        "type": "object",
        "properties": {"prompt": {"type": "string", "description": "what to ask the agent"}},
        "required": ["prompt"],
        "additionalProperties": False,
    }

    async def list_tools(
        context: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        return mt.ListToolsResult(
            tools=[
                mt.Tool(name=name, description=_description(agent), input_schema=schema)
                for name, agent in agents.items()
            ]
        )

    async def call_tool(
        context: ServerRequestContext[Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult:
        agent = agents.get(params.name)
        if agent is None:
            known = ", ".join(agents)
            raise MCPError(_INVALID_PARAMS, f"no tool named {params.name!r} (tools: {known})")
        arguments = params.arguments or {}
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
        instructions="Each tool is a kova agent: pass it a prompt, get its answer.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


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
        _, _, message = failure(exc)
        return mt.CallToolResult(content=[mt.TextContent(type="text", text=message)], is_error=True)
    message = "the turn ended without an answer"
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=message)], is_error=True)


def mounted(
    agents: Mapping[str, Agent], *, max_prompt_chars: int
) -> tuple[Route, StreamableHTTPSessionManager]:
    """The ``/mcp`` route (Streamable HTTP) and its session manager, to run in the app's
    lifespan (``async with manager.run():``)."""
    from mcp.server.streamable_http_manager import (
        StreamableHTTPASGIApp,
        StreamableHTTPSessionManager,
    )
    from starlette.routing import Route

    manager = StreamableHTTPSessionManager(
        app=mcp_server(agents, max_prompt_chars=max_prompt_chars)
    )
    return Route("/mcp", StreamableHTTPASGIApp(manager)), manager


async def serve_mcp_stdio(*agents: Agent) -> None:
    """Serve ``agents`` as MCP tools over this process's stdin and stdout until the client
    goes away (opening the agents not open yet). ``kova mcp serve`` runs this."""
    from contextlib import AsyncExitStack

    from mcp.server.stdio import stdio_server

    named = agent_names(agents)
    server = mcp_server(named)
    async with AsyncExitStack() as stack:
        for agent in named.values():
            if not agent.is_open:
                await stack.enter_async_context(agent)
        read, write = await stack.enter_async_context(stdio_server())
        await server.run(read, write, server.create_initialization_options())
