"""kova's own values for what an MCP server offers: resources, prompts, elicitation.

Tools are described by :class:`kova.ToolDefinition` and their results are
:class:`kova.ToolResult`, the same values native tools use. The ``mcp`` package's pydantic
models never leave :mod:`kova.mcp`. Their names are listed once, in ``kova.mcp.__all__``
(which re-exports every one of them).
"""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal, TypeAlias

from .._errors import ConfigError, check_seconds
from .._record import Record

if TYPE_CHECKING:
    import datetime

    from .._models import JSONObject, JSONValue, Message


class ReconnectPolicy(Record):
    """How the connection actor gets a lost MCP session back.

    After a loss it reconnects at once; each failed attempt then waits
    ``min(maximum, initial * factor ** (n - 1))`` seconds, spread by ``jitter`` (a fraction:
    0.2 means anywhere from 80% to 120% of that), before attempt ``n + 1``. By default it
    never gives up, so a server that is down for minutes does not end the host's
    ``async with McpClient.connect()`` block; calls meanwhile fail fast with
    :class:`~kova.McpUnavailableError`.

    ``give_up_after`` (seconds of one outage) or ``max_attempts`` bring back the OTP way:
    the connection actor crashes and its supervisor decides (restart it, or give up once its
    restart intensity is spent, which ends the client's block with :class:`~kova.ActorFailed`).
    """

    initial: float = 0.1
    factor: float = 2.0
    maximum: float = 2.0
    """The longest wait between attempts, so a server that is back is found within it."""
    jitter: float = 0.2
    give_up_after: float | None = None
    max_attempts: int | None = None

    def __post_init__(self) -> None:
        for name in ("initial", "factor", "maximum", "jitter", "give_up_after", "max_attempts"):
            value = getattr(self, name)
            if (value is None and name in ("give_up_after", "max_attempts")) or (
                not isinstance(value, bool) and isinstance(value, int | float)
            ):
                continue
            raise TypeError(f"ReconnectPolicy.{name} must be a number, got {value!r}")
        # kova's one rule for durations (ConfigError, naming the field): NaN and infinity
        # were accepted, and a NaN delay made the actor's wait fail with a raw trio error.
        for name in ("initial", "maximum"):
            check_seconds(f"ReconnectPolicy.{name}", getattr(self, name), zero=True)
        check_seconds("ReconnectPolicy.give_up_after", self.give_up_after, optional=True)
        for name in ("factor", "jitter"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ConfigError(
                    f"ReconnectPolicy.{name} must be a finite number >= 0, got {value}"
                )
        attempts = self.max_attempts
        if attempts is not None and (not isinstance(attempts, int) or attempts <= 0):
            raise ConfigError(
                f"ReconnectPolicy.max_attempts must be a positive int or None, got {attempts}"
            )

    def delay(self, failures: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after the ``failures``-th failed attempt of one outage (1-based)."""
        try:
            grown = self.initial * self.factor ** max(0, failures - 1)
        except OverflowError:  # 2.0 ** 1024: an outage of ~1,000 attempts must not crash
            grown = math.inf
        base = min(self.maximum, grown)
        if self.jitter == 0 or base == 0:
            return base
        spread = (rng or random).uniform(-self.jitter, self.jitter)
        return max(0.0, base * (1.0 + spread))

    def gives_up(self, failures: int, outage: float) -> bool:
        """Whether to stop after ``failures`` failed attempts, ``outage`` seconds into it."""
        if self.max_attempts is not None and failures >= self.max_attempts:
            return True
        return self.give_up_after is not None and outage >= self.give_up_after


ConnectionStatus: TypeAlias = Literal["idle", "connecting", "connected", "unavailable", "closed"]
"""``idle``: a client connected with ``lazy=True`` whose server has not started yet (its first
request starts it). ``connecting``: a (re)connection attempt is running; calls wait for it.
``connected``: a session is up. ``unavailable``: the last attempt failed and the actor is
backing off; calls fail fast. ``closed``: the client's block ended."""


class McpConnectionState(Record):
    """Where one MCP connection stands (:attr:`McpClient.state`)."""

    status: ConnectionStatus
    since: datetime.datetime
    """When this status began (UTC wall clock). While ``unavailable``: when the outage began."""
    error: str | None = None
    """Why the session was lost, or why the last attempt failed."""
    attempts: int = 0
    """Reconnect attempts that failed in the current outage."""
    session: int = 0
    """How many sessions this connection has opened so far (1 for the first)."""


StateChangeHandler: TypeAlias = Callable[[McpConnectionState], object]
"""A host function called (synchronously, in the connection actor) on every state change."""


class McpProgress(Record):
    """A ``notifications/progress`` the server sent for one call."""

    progress: float
    total: float | None = None
    message: str | None = None


ProgressHandler: TypeAlias = Callable[[McpProgress], Awaitable[None]]
"""A host function that receives the progress of one call."""


class McpLogMessage(Record):
    """A log message the server sent (``notifications/message``)."""

    level: Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
    data: JSONValue
    logger: str | None = None


LogHandler: TypeAlias = Callable[[McpLogMessage], Awaitable[None]]
"""A host function that receives the server's log messages."""

ResourceUpdatedHandler: TypeAlias = Callable[[str], Awaitable[None]]
"""A host function told the URI of a subscribed resource that changed."""


class McpRoot(Record):
    """A root the client offers the server (``roots/list``): a ``file://`` URI and a name."""

    uri: str
    name: str | None = None

    def __post_init__(self) -> None:
        if not self.uri.startswith("file://"):
            raise ValueError(f"an MCP root must be a file:// URI, got {self.uri!r}")


class McpServerInfo(Record):
    """What the server said about itself in ``initialize``."""

    name: str
    version: str = ""
    instructions: str | None = None
    """How to use the server, meant for the model (e.g. appended to a system prompt)."""
    protocol_version: str = ""
    """The MCP protocol version the two sides agreed on."""


class McpResource(Record):
    """A resource the server lists (``resources/list``)."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    """Size in bytes, when the server knows it."""


class McpResourceTemplate(Record):
    """A parameterised resource (``resources/templates/list``), an RFC 6570 URI template."""

    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None


class McpResourceContents(Record):
    """One item of a read resource: exactly one of ``text`` or ``blob`` (base64) is set."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None


class McpPromptArgument(Record):
    """An argument a prompt template accepts."""

    name: str
    description: str | None = None
    required: bool = False


class McpPrompt(Record):
    """A prompt template the server lists (``prompts/list``)."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: tuple[McpPromptArgument, ...] = ()


class McpPromptResult(Record):
    """A rendered prompt (``prompts/get``), as kova messages ready to go into a history."""

    description: str | None = None
    messages: tuple[Message, ...] = ()


class ElicitationRequest(Record):
    """The server asks the user for input.

    In form mode, ``requested_schema`` is a flat JSON Schema object describing the fields
    the server wants. In URL mode, ``url`` is a page the user should open (kova never opens
    it); answer ``accept`` once the user agreed to go there.
    """

    message: str
    mode: Literal["form", "url"] = "form"
    requested_schema: JSONObject | None = None
    url: str | None = None


class ElicitationResponse(Record):
    """The user's answer: ``accept`` (with ``content`` in form mode), ``decline`` or
    ``cancel`` (dismissed without choosing)."""

    action: Literal["accept", "decline", "cancel"]
    content: JSONObject | None = None


ElicitationHandler: TypeAlias = Callable[[ElicitationRequest], Awaitable[ElicitationResponse]]
"""A host function that asks the user and returns the answer."""
