"""``kova serve``: a chat agent behind the web view (:mod:`kova.web`).

A person chats in the browser, watches text and tool calls stream, and approves or denies
each tool call from the page. Prompts are taken one turn at a time, in order; the
conversation lives in this process for as long as it runs.
"""

from __future__ import annotations

import errno
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

import trio

from .._errors import KovaError
from .._models import Message
from ._errors import CliError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..providers import Provider
    from ..tools import Tool

__all__ = ["serve_chat"]


async def serve_chat(
    provider: Provider,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    system_prompt: str | None = None,
    tools: Sequence[Tool] = (),
    approve_all: bool = False,
    approval_timeout: float = 300.0,
    out: Callable[[str], None] = print,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve a chat agent on the web view until cancelled.

    Reports the page's URL (token included) through ``out`` and ``task_status.started``.
    Every tool call waits for approval on the page unless ``approve_all``. A turn that fails,
    or that a person stops with the page's Stop button, is shown so on the page and leaves
    the conversation as it was.

    Raises:
        CliError: the address cannot be listened on (a busy port, say).
    """
    from ..agent import AgentBuilder, TurnCompleted
    from ..web import open_event_server

    async with AsyncExitStack() as stack:
        try:
            server = await stack.enter_async_context(open_event_server(host, port, chat=True))
        except OSError as exc:
            raise CliError(_cannot_listen(host, port, exc)) from exc
        builder = AgentBuilder().provider(provider)
        if tools:
            builder = builder.tools(*tools)
        if system_prompt:
            builder = builder.system_prompt(system_prompt)
        if not approve_all:
            handler = server.approval_handler(tools=tools, timeout=approval_timeout)
            builder = builder.approval_handler(handler)
        history: list[Message] = []
        # Retries, usage, errors and timing from the agent's telemetry reach the pages too.
        async with builder.build() as agent:
            with agent.telemetry.subscribe(server):
                out(f"kova serve: open {server.url}")
                out("(the token in that address is the only key to this page; Ctrl-C stops)")
                task_status.started(server.url)
                async for prompt in server.prompts:
                    asked = [*history, Message.user(prompt)]
                    try:
                        # The page's Stop button cancels this scope: the turn adds nothing.
                        with server.stoppable() as stop:
                            async with agent.stream(asked) as events:
                                async for event in server.relay(events, prompt=prompt):
                                    if isinstance(event, TurnCompleted):
                                        history = [*asked, *event.response.new_messages]
                    except KovaError as exc:  # shown on the page by relay; the chat goes on
                        out(f"kova serve: the turn failed: {exc}")
                    else:
                        if stop.cancelled_caught:
                            out("kova serve: the turn was stopped from the page")


def _cannot_listen(host: str, port: int, exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return f"port {port} on {host} is already in use; pass --port 0 to use any free port"
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}"
