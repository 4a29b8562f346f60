"""``kova serve``: a chat agent behind the web view (:mod:`kova.web`) and the standard
doors of :func:`kova.serve.app`, on one port served by Hypercorn's trio worker.

A person chats in the browser, watches text and tool calls stream, and approves or denies
each tool call from the page. Prompts are taken one turn at a time, in order; the
conversation lives in this process for as long as it runs. Programs reach the same agent
through the app's routes (OpenAI-compatible ``/v1``) with the same token as a bearer token;
their tool calls wait for approval on the page too.
"""

from __future__ import annotations

import errno
import secrets
import socket
from contextlib import AsyncExitStack
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from .._errors import KovaError
from .._models import Message
from ._errors import CliError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..providers import Provider
    from ..sessions import SessionStore
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
    token: str | None = None,
    sessions: SessionStore | None = None,
    out: Callable[[str], None] = print,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve a chat agent on the web view and :func:`kova.serve.app`'s routes until cancelled.

    Reports the page's URL (token included) through ``out`` and ``task_status.started``.
    Every tool call waits for approval on the page unless ``approve_all``. A turn that fails,
    or that a person stops with the page's Stop button, is shown so on the page and leaves
    the conversation as it was. ``token``: the page's and the API's secret (a random one
    when ``None``). ``sessions``: a store whose sessions the page lists, opens and continues
    (each turn runs on the session open on the page); without one the conversation lives in
    this process only.

    Raises:
        CliError: the address cannot be listened on (a busy port, say), or the token is
            shorter than 16 characters.
    """
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from ..agent import AgentBuilder, TurnCompleted
    from ..serve import app
    from ..web._server import close_pages, open_hosted_event_server

    if token is None:
        token = secrets.token_urlsafe(24)
    elif len(token) < 16:
        raise CliError("--token must be at least 16 characters")
    listener = _listen(host, port)
    bound_host, bound_port = listener.getsockname()[:2]
    descriptor = listener.detach()  # Hypercorn's now: it serves and closes it
    async with AsyncExitStack() as stack:
        server = await stack.enter_async_context(
            open_hosted_event_server(
                bound_host, bound_port, token=token, chat=True, sessions=sessions
            )
        )
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
        agent = await stack.enter_async_context(builder.build())
        stack.enter_context(agent.telemetry.subscribe(server))
        config = Config()
        config.bind = [f"fd://{descriptor}"]
        config.accesslog = None
        config.errorlog = None
        config.graceful_timeout = 1.0
        served: Any = app(agent, token=token, web=server)  # Hypercorn types its own ASGI
        nursery = await stack.enter_async_context(trio.open_nursery())
        stopped = trio.Event()
        await nursery.start(partial(serve, served, config, shutdown_trigger=stopped.wait))
        stack.callback(stopped.set)
        stack.callback(close_pages, server)  # first: the pages end, then Hypercorn stops
        out(f"kova serve: open {server.url}")
        out("(the token in that address is the only key to this page; Ctrl-C stops)")
        out(
            f"kova serve: OpenAI-compatible API at http://{server._netloc}/v1, model "
            f"{agent.config.name!r}, with the header Authorization: Bearer <that token>"
        )
        task_status.started(server.url)
        async for prompt in server.prompts:
            asked = [*history, Message.user(prompt)]
            session = server.session  # the one open on the page (with sessions=)
            try:
                # The page's Stop button cancels this scope: the turn adds nothing.
                with server.stoppable() as stop:
                    turn = (
                        agent.stream(asked)
                        if session is None
                        else agent.stream(prompt, session=session)
                    )
                    async with turn as events:
                        async for event in server.relay(events, prompt=prompt):
                            if isinstance(event, TurnCompleted):
                                history = [*asked, *event.response.new_messages]
            except KovaError as exc:  # shown on the page by relay; the chat goes on
                out(f"kova serve: the turn failed: {exc}")
            else:
                if stop.cancelled_caught:
                    out("kova serve: the turn was stopped from the page")


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (Hypercorn serves it by its descriptor)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=1024)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            message = f"port {port} on {host} is already in use; pass --port 0 to use any free port"
        else:
            message = f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        raise CliError(message) from exc
