"""kova's own values for what an MCP server offers: resources, prompts, elicitation.

Tools are described by :class:`kova.ToolDefinition` and their results are
:class:`kova.ToolResult`, the same values native tools use. The ``mcp`` package's pydantic
models never leave :mod:`kova.mcp`.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal, TypeAlias

import attrs

if TYPE_CHECKING:
    import datetime

    from .._models import JSONObject, JSONValue, Message

__all__ = [
    "ConnectionStatus",
    "ElicitationHandler",
    "ElicitationRequest",
    "ElicitationResponse",
    "LogHandler",
    "McpConnectionState",
    "McpLogMessage",
    "McpProgress",
    "McpPrompt",
    "McpPromptArgument",
    "McpPromptResult",
    "McpResource",
    "McpResourceContents",
    "McpResourceTemplate",
    "McpRoot",
    "McpServerInfo",
    "ProgressHandler",
    "ReconnectPolicy",
    "ResourceUpdatedHandler",
    "StateChangeHandler",
]


def _non_negative(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value}")


def _optional_positive(
    _instance: object, attribute: attrs.Attribute[float | None], value: float | None
) -> None:
    if value is not None and value <= 0:
        raise ValueError(f"{attribute.name} must be > 0 or None, got {value}")


def _optional_positive_int(
    _instance: object, attribute: attrs.Attribute[int | None], value: int | None
) -> None:
    if value is not None and value <= 0:
        raise ValueError(f"{attribute.name} must be > 0 or None, got {value}")


@attrs.frozen(kw_only=True)
class ReconnectPolicy:
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

    initial: float = attrs.field(default=0.1, validator=_non_negative)
    factor: float = attrs.field(default=2.0, validator=_non_negative)
    maximum: float = attrs.field(default=2.0, validator=_non_negative)
    """The longest wait between attempts, so a server that is back is found within it."""
    jitter: float = attrs.field(default=0.2, validator=_non_negative)
    give_up_after: float | None = attrs.field(default=None, validator=_optional_positive)
    max_attempts: int | None = attrs.field(default=None, validator=_optional_positive_int)

    def delay(self, failures: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after the ``failures``-th failed attempt of one outage (1-based)."""
        base = min(self.maximum, self.initial * self.factor ** max(0, failures - 1))
        if self.jitter == 0 or base == 0:
            return base
        spread = (rng or random).uniform(-self.jitter, self.jitter)
        return max(0.0, base * (1.0 + spread))

    def gives_up(self, failures: int, outage: float) -> bool:
        """Whether to stop after ``failures`` failed attempts, ``outage`` seconds into it."""
        if self.max_attempts is not None and failures >= self.max_attempts:
            return True
        return self.give_up_after is not None and outage >= self.give_up_after


ConnectionStatus: TypeAlias = Literal["connecting", "connected", "unavailable", "closed"]
"""``connecting``: a (re)connection attempt is running; calls wait for it. ``connected``: a
session is up. ``unavailable``: the last attempt failed and the actor is backing off; calls
fail fast. ``closed``: the client's block ended."""


@attrs.frozen(kw_only=True)
class McpConnectionState:
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


@attrs.frozen(kw_only=True)
class McpProgress:
    """A ``notifications/progress`` the server sent for one call."""

    progress: float
    total: float | None = None
    message: str | None = None


ProgressHandler: TypeAlias = Callable[[McpProgress], Awaitable[None]]
"""A host function that receives the progress of one call."""


@attrs.frozen(kw_only=True)
class McpLogMessage:
    """A log message the server sent (``notifications/message``)."""

    level: Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
    data: JSONValue
    logger: str | None = None


LogHandler: TypeAlias = Callable[[McpLogMessage], Awaitable[None]]
"""A host function that receives the server's log messages."""

ResourceUpdatedHandler: TypeAlias = Callable[[str], Awaitable[None]]
"""A host function told the URI of a subscribed resource that changed."""


@attrs.frozen(kw_only=True)
class McpRoot:
    """A root the client offers the server (``roots/list``): a ``file://`` URI and a name."""

    uri: str = attrs.field()
    name: str | None = None

    @uri.validator
    def _check_uri(self, _attribute: attrs.Attribute[str], value: str) -> None:
        if not value.startswith("file://"):
            raise ValueError(f"an MCP root must be a file:// URI, got {value!r}")


@attrs.frozen(kw_only=True)
class McpServerInfo:
    """What the server said about itself in ``initialize``."""

    name: str
    version: str = ""
    instructions: str | None = None
    """How to use the server, meant for the model (e.g. appended to a system prompt)."""
    protocol_version: str = ""
    """The MCP protocol version the two sides agreed on."""


@attrs.frozen(kw_only=True)
class McpResource:
    """A resource the server lists (``resources/list``)."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    """Size in bytes, when the server knows it."""


@attrs.frozen(kw_only=True)
class McpResourceTemplate:
    """A parameterised resource (``resources/templates/list``), an RFC 6570 URI template."""

    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None


@attrs.frozen(kw_only=True)
class McpResourceContents:
    """One item of a read resource: exactly one of ``text`` or ``blob`` (base64) is set."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None


@attrs.frozen(kw_only=True)
class McpPromptArgument:
    """An argument a prompt template accepts."""

    name: str
    description: str | None = None
    required: bool = False


@attrs.frozen(kw_only=True)
class McpPrompt:
    """A prompt template the server lists (``prompts/list``)."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: tuple[McpPromptArgument, ...] = ()


@attrs.frozen(kw_only=True)
class McpPromptResult:
    """A rendered prompt (``prompts/get``), as kova messages ready to go into a history."""

    description: str | None = None
    messages: tuple[Message, ...] = ()


@attrs.frozen(kw_only=True)
class ElicitationRequest:
    """The server asks the user for input.

    In form mode, ``requested_schema`` is a flat JSON Schema object describing the fields
    the server wants. In URL mode, ``url`` is a page the user should open (kova never opens
    it); answer ``accept`` once the user agreed to go there.
    """

    message: str
    mode: Literal["form", "url"] = "form"
    requested_schema: JSONObject | None = None
    url: str | None = None


@attrs.frozen(kw_only=True)
class ElicitationResponse:
    """The user's answer: ``accept`` (with ``content`` in form mode), ``decline`` or
    ``cancel`` (dismissed without choosing)."""

    action: Literal["accept", "decline", "cancel"]
    content: JSONObject | None = None


ElicitationHandler: TypeAlias = Callable[[ElicitationRequest], Awaitable[ElicitationResponse]]
"""A host function that asks the user and returns the answer."""
