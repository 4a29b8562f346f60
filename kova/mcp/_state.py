"""What the connection actor and its client share: the settings every (re)connection uses,
and the state that outlives one incarnation of the actor."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

import trio

from .._errors import McpUnavailableError
from .._log import get_logger
from .._observe import HOST_CODE_FAULTS
from .._record import Record, evolve
from ._types import McpConnectionState, ReconnectPolicy

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._models import ToolDefinition
    from ..providers import Provider
    from ._transports import Transport
    from ._types import (
        ElicitationHandler,
        LogHandler,
        McpRoot,
        ResourceUpdatedHandler,
        StateChangeHandler,
    )

__all__ = ["ConnectionSettings", "SharedState", "now"]

log = get_logger(__name__)


def now() -> datetime.datetime:
    """The UTC wall clock (for telling people when; decisions use trio's clock)."""
    return datetime.datetime.now(datetime.UTC)


class ConnectionSettings(Record):
    """Everything the connection actor needs to (re)connect. Immutable, shared by restarts."""

    transport: Transport
    sampling: Provider | None = None
    sampling_model: str | None = None
    elicitation: ElicitationHandler | None = None
    reconnect: ReconnectPolicy = ReconnectPolicy()
    wait_for_connection: bool = False
    replay_tools: frozenset[str] = frozenset()
    on_log: LogHandler | None = None
    on_resource_updated: ResourceUpdatedHandler | None = None
    log_level: str | None = None
    roots_enabled: bool = False
    connect_timeout: float = 30.0
    """Seconds one connection attempt (transport, ``initialize``, session setup) may take."""
    client_name: str = "kova"
    client_version: str = "0.1.0"


class SharedState:
    """What outlives one incarnation of the connection actor, for the client's whole block.

    Written only by the connection actor (through its messages); the :class:`McpClient`
    handle reads :attr:`state`, a frozen value that is replaced, never changed in place.
    """

    __slots__ = (
        "changed",
        "name",
        "on_state_change",
        "roots",
        "state",
        "subscriptions",
        "tool_watchers",
    )

    def __init__(
        self,
        *,
        name: str,
        on_state_change: StateChangeHandler | None = None,
        roots: tuple[McpRoot, ...] = (),
    ) -> None:
        self.name = name
        self.on_state_change = on_state_change
        self.state = McpConnectionState(status="connecting", since=now())
        self.changed = trio.Event()
        """Set (and replaced) on every state change."""
        self.roots = roots
        self.subscriptions: set[str] = set()
        self.tool_watchers: list[Callable[[tuple[ToolDefinition, ...]], None]] = []
        """Told the new tool list after a ``list_changed`` (the agents that use these tools)."""

    def wake(self) -> None:
        """Wake whoever waits on :attr:`changed` without a new state (the actor's own
        requests, to look again at something the state does not show)."""
        changed, self.changed = self.changed, trio.Event()
        changed.set()

    def unavailable(
        self, *, within: float | None = None, reason: str | None = None
    ) -> McpUnavailableError:
        """The error of a request that found no session, as of the current state: ``reason``
        if given, else the state's last error, else that none came up ``within`` seconds."""
        state = self.state
        if reason is None and within is not None:
            reason = state.error or f"no session came up within {within:g}s"
        return McpUnavailableError(
            server=self.name,
            since=state.since,
            reason=state.error if reason is None else reason,
            attempts=state.attempts,
        )

    def tell_tools(self, tools: tuple[ToolDefinition, ...]) -> None:
        """Tell :attr:`tool_watchers` the new tool list (a listener that fails is logged: it
        must not take the connection, or the request that learned the list, down)."""
        for watcher in tuple(self.tool_watchers):
            try:
                watcher(tools)
            except HOST_CODE_FAULTS as exc:
                log.warning("mcp.tools.listener_failed", error=repr(exc))

    def publish(self, state: McpConnectionState) -> None:
        if evolve(state, since=self.state.since) == self.state:
            return  # nothing a host would notice changed
        self.state = state
        self.wake()
        if self.on_state_change is not None:
            try:
                self.on_state_change(state)
            except HOST_CODE_FAULTS as exc:  # a host callback must not take the connection down
                log.warning("mcp.state_callback.failed", connection=self.name, error=repr(exc))
