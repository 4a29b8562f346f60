"""What every protocol does with a turn: check the served agent and the prompt, run the turn
(streamed or not) so that a client going away cancels it, and say what failed in words a
client can show.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._errors import AgentLoopError, KovaError, ProviderError, RateLimited
from .._json import dumps_bytes
from ._http import BadRequest, until_disconnect

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    import trio
    from starlette.types import Receive, Scope, Send

    from ..agent import Agent
    from ..sessions import SessionStore

__all__ = ["PausedTurn", "Served", "Watched", "agent_names", "failure", "find_agent"]


class Served:
    """What the routes share: the agents by name and the limits. Read-only once built."""

    __slots__ = ("agents", "max_body_bytes", "max_prompt_chars", "nursery", "sessions")

    def __init__(
        self,
        agents: Mapping[str, Agent],
        *,
        max_body_bytes: int,
        max_prompt_chars: int,
        sessions: SessionStore | None = None,
    ) -> None:
        self.agents = agents
        self.max_body_bytes = max_body_bytes
        self.max_prompt_chars = max_prompt_chars
        self.sessions = sessions
        """Where conversations named by a protocol's id (A2A's contextId, the Responses
        API's conversation) are kept; ``None``: A2A's in memory, Responses' refused."""
        self.nursery: trio.Nursery | None = None
        """Where work that outlives its request runs (an A2A task sent with
        ``returnImmediately``): open while the app's lifespan runs."""


def agent_names(agents: tuple[Agent, ...]) -> dict[str, Agent]:
    """The agents by name.

    Raises:
        ValueError: no agents, or two with one name.
        TypeError: something other than an agent.
    """
    from ..agent import Agent

    if not agents:
        raise ValueError("kova.serve.app() needs at least one agent")
    named: dict[str, Agent] = {}
    for agent in agents:
        if not isinstance(agent, Agent):
            raise TypeError(f"kova.serve.app() takes agents, not {type(agent).__name__}")
        name = agent.config.name
        if name in named:
            raise ValueError(
                f"two agents are named {name!r}: give each its own (AgentBuilder().name(...)); "
                "the name is the model clients ask for"
            )
        named[name] = agent
    return named


class PausedTurn(KovaError):
    """A turn paused for a person's approval on a route that has no way to ask for it."""

    def __init__(self) -> None:
        super().__init__(
            "the turn paused for a person's approval, which this route cannot ask for "
            "(AG-UI at /agui can)"
        )


def find_agent(served: Served, name: Any, *, what: str = "model") -> Agent:
    """The served agent called ``name``.

    Raises:
        BadRequest: 400 when ``name`` is not a string, 404 when no agent has that name.
    """
    if not isinstance(name, str) or not name:
        raise BadRequest(400, f"{what} must be a non-empty string naming a served agent")
    agent = served.agents.get(name)
    if agent is None:
        known = ", ".join(sorted(served.agents))
        raise BadRequest(
            404,
            f"no agent named {name[:200]!r} is served here (served: {known})",
            code="model_not_found",
        )
    if not agent.is_open:
        raise BadRequest(503, f"the agent {name!r} is not open", code="unavailable")
    return agent


def failure(exc: BaseException) -> tuple[int, str, str]:
    """A failed turn as (HTTP status, error code, message) for the client."""
    message = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, PausedTurn):
        return 409, "approval_required", str(exc)
    if isinstance(exc, RateLimited):
        return 429, "rate_limit_exceeded", message
    if isinstance(exc, ProviderError):
        # The server's own provider (its credentials, its model): not the client's fault.
        return 502, "upstream_error", message
    if isinstance(exc, AgentLoopError):
        return 500, "agent_error", message
    return 500, "server_error", message


class Watched:
    """An ASGI response computed by ``compute`` while the connection is watched: a client
    that goes away before the answer is ready cancels ``compute`` (and its turn)."""

    __slots__ = ("_compute",)

    def __init__(self, compute: Callable[[], Awaitable[tuple[int, Any]]]) -> None:
        self._compute = compute

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        results: list[tuple[int, Any]] = []
        async with until_disconnect(receive):
            results.append(await self._compute())
        if not results:
            return  # the client went away
        status, value = results[0]
        body = dumps_bytes(value)
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
