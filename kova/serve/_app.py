"""The served app: :func:`app` builds one Starlette application for one or more agents.

Every protocol lives in a module of its own (``_openai``, ...) that adds its routes; this
module holds what they share: the agents by name, the limits, the lifespan that opens the
agents, and the check of every request's credentials.
"""

from __future__ import annotations

import inspect
import secrets
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from .._json import dumps_bytes
from .._log import get_logger
from ._turns import Served, agent_names

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.requests import HTTPConnection
    from starlette.types import ASGIApp, Receive, Scope, Send

    from ..agent import Agent
    from ..sessions import SessionStore
    from ..web import EventServer

__all__ = ["Served", "app"]

log = get_logger(__name__)


def app(
    *agents: Agent,
    token: str | None = None,
    authorize: Callable[[HTTPConnection], bool | Awaitable[bool]] | None = None,
    max_body_bytes: int = 1024 * 1024,
    max_prompt_chars: int = 200_000,
    max_paused_runs: int = 1024,
    sessions: SessionStore | None = None,
    web: EventServer | None = None,
    mcp_tools: bool = False,
) -> Starlette:
    """An ASGI application serving ``agents`` to standard clients (the ``serve`` extra).

    Routes: ``POST /v1/chat/completions``, ``POST /v1/responses`` and ``GET /v1/models``
    (OpenAI-compatible; the model name is the agent's name, ``AgentBuilder.name``);
    ``POST /agui`` and ``/agui/{name}`` (AG-UI: a run in, its events back as SSE);
    ``/mcp`` (MCP, Streamable HTTP: each agent a tool); ``POST /a2a`` (A2A, JSON-RPC: the
    first agent; ``/a2a/{name}`` each) with the agent card at
    ``/.well-known/agent-card.json`` (``/a2a/{name}/.well-known/agent-card.json``).

    Serve it with Hypercorn's trio worker (``kova serve`` does), or mount it into your own
    Starlette/FastAPI app served on trio. The app's lifespan opens the agents not open yet
    and closes them after; mounted, open them in your app's own lifespan
    (``async with agent:``).

    Args:
        agents: the agents to serve, each under its own name.
        token: a secret every request must present as ``Authorization: Bearer <token>``.
        authorize: a check of every request (a Starlette ``HTTPConnection``), returning
            (or awaiting to) ``True`` to let it through; with ``token`` both must pass.
            With neither, every client is let in: only for loopback and trusted networks.
        max_body_bytes: the largest request body taken; a larger one gets HTTP 413.
        max_prompt_chars: the most text one request's messages may hold in all.
        max_paused_runs: AG-UI runs paused for approval kept for their resume (the oldest
            is forgotten first).
        sessions: a :class:`~kova.sessions.SessionStore` keeping the conversations a
            protocol names: A2A's ``contextId`` and the Responses API's ``conversation``
            each map to a session (``a2a/<agent>/<id>``, ``responses/<agent>/<id>``).
            Without one, A2A contexts are kept in memory and ``conversation`` is refused.
        web: kova's web view to serve at ``/`` (its page and WebSocket, which check the
            event server's own token, host and origin): ``kova serve`` passes the one it
            opened with ``kova.web``'s hosted event server.
        mcp_tools: offer the agents' own tools at ``/mcp`` too, beside the agents, each
            under its own name; a call runs on its agent's tool pool under the agent's
            approval policy and tool guards (a call they leave to a person does not run).

    Raises:
        ValueError: no agents, two agents with one name, a token under 16 characters,
            a limit that is not a positive integer, or (with ``mcp_tools``) two agents
            offering one tool name, or a tool named like an agent.
        TypeError: something other than an :class:`~kova.agent.Agent` was given.
    """
    from starlette.applications import Starlette

    from .._hypercorn import close_failed_websockets
    from . import _a2a, _agui, _mcp, _openai

    close_failed_websockets()  # served by Hypercorn: a broken WebSocket frame gets its code

    named = agent_names(agents)
    _check_options(
        token,
        authorize,
        sessions,
        mcp_tools,
        max_body_bytes=max_body_bytes,
        max_prompt_chars=max_prompt_chars,
        max_paused_runs=max_paused_runs,
    )
    served = Served(
        named,
        max_body_bytes=max_body_bytes,
        max_prompt_chars=max_prompt_chars,
        sessions=sessions,
    )
    mcp, mcp_sessions = _mcp.mounted(named, max_prompt_chars=max_prompt_chars, tools=mcp_tools)
    paused = _agui.Paused(max_paused_runs)
    routes = [
        *_openai.routes(served),
        *_agui.routes(served, paused),
        mcp,
        *_a2a.routes(served, secured=token is not None or authorize is not None),
    ]
    public = PUBLIC_PATHS
    if web is not None:
        from ..web._asgi import PATHS
        from ..web._asgi import routes as web_routes

        routes.extend(web_routes(web))
        public = public | PATHS
    starlette = Starlette(routes=routes, lifespan=_lifespan(served, mcp_sessions))
    starlette.add_middleware(_Guard, token=token, authorize=authorize, public=public)
    starlette.state.kova_served = served
    return starlette


def _check_options(
    token: object,
    authorize: object,
    sessions: object,
    mcp_tools: object,
    **limits: object,
) -> None:
    """Refuse :func:`app`'s options that cannot work, naming the option."""
    if token is not None and (not isinstance(token, str) or len(token) < 16):
        raise ValueError("token must be a string of at least 16 characters")
    if authorize is not None and not callable(authorize):
        raise TypeError(f"authorize must be callable, not {type(authorize).__name__}")
    for name, value in limits.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, not {value!r}")
    from ..sessions import SessionStore

    if sessions is not None and not isinstance(sessions, SessionStore):
        raise TypeError(f"sessions must be a kova.sessions.SessionStore, not {sessions!r}")
    if not isinstance(mcp_tools, bool):
        raise TypeError(f"mcp_tools must be True or False, not {mcp_tools!r}")


def _lifespan(
    served: Served, mcp_sessions: StreamableHTTPSessionManager
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """The app's lifespan: open the agents not open yet and the MCP sessions, and give the
    routes a nursery for the work that outlives a request; close all of it after."""

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for agent in served.agents.values():
                if not agent.is_open:
                    await stack.enter_async_context(agent)
            await stack.enter_async_context(mcp_sessions.run())
            nursery = await stack.enter_async_context(trio.open_nursery())
            served.nursery = nursery
            try:
                yield
            finally:
                served.nursery = None
                nursery.cancel_scope.cancel(reason="the app is shutting down")

    return lifespan


PUBLIC_PATHS = frozenset({"/.well-known/agent-card.json"})
_PUBLIC_SUFFIX = "/.well-known/agent-card.json"
"""Paths any client may read (the A2A agent card says how to authenticate)."""


def refusal(path: str, status: int, message: str) -> tuple[bytes, bytes]:
    """The body and content type of a refusal in the shape the route's protocol uses."""
    if path.startswith("/v1/"):
        code = "invalid_api_key" if status == 401 else "forbidden"
        body: dict[str, Any] = {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": code,
            }
        }
    elif path.startswith("/agui"):
        body = {
            "error": {"message": message, "code": "unauthorized" if status == 401 else "forbidden"}
        }
    elif path.startswith(("/mcp", "/a2a")):
        body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": message}}
    else:
        body = {"error": message}
    return dumps_bytes(body), b"application/json"


class _Guard:
    """Checks every HTTP request's credentials before any route sees it."""

    __slots__ = ("_app", "_authorize", "_public", "_token")

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        authorize: Callable[[HTTPConnection], bool | Awaitable[bool]] | None,
        public: frozenset[str],
    ) -> None:
        self._app = app
        self._token = token
        self._authorize = authorize
        self._public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] not in ("http", "websocket")
            or scope["path"] in self._public
            or (scope["path"].startswith("/a2a/") and scope["path"].endswith(_PUBLIC_SUFFIX))
        ):
            await self._app(scope, receive, send)
            return
        problem = await self._check(scope)
        if problem is None:
            await self._app(scope, receive, send)
            return
        status, message = problem
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": message})
            return
        body, media_type = refusal(scope["path"], status, message)
        headers = [
            (b"content-type", media_type),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b"Bearer"),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _check(self, scope: Scope) -> tuple[int, str] | None:
        from starlette.requests import HTTPConnection

        connection = HTTPConnection(scope)
        if self._token is not None:
            given = connection.headers.get("authorization", "")
            scheme, _, credential = given.partition(" ")
            if scheme.lower() != "bearer" or not secrets.compare_digest(
                credential.strip().encode(), self._token.encode()
            ):
                return 401, "missing or wrong bearer token (Authorization: Bearer <token>)"
        if self._authorize is not None:
            try:
                verdict = self._authorize(connection)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
            except Exception as exc:  # the host's check failed: refuse, and serve on
                log.warning("serve.authorize.failed", error=repr(exc))
                return 403, "the request was not authorized"
            if verdict is not True:
                return 403, "the request was not authorized"
        return None
