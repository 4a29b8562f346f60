"""The errors of kova's base layer (everything but the tool layer's, the actor runtime's
``UnknownMessage`` and the journal's), and the HTTP status classifier.

The tree of every error kova raises, with what each means, is documented once: in the
docstring of the public module :mod:`kova.errors` (and copied verbatim in docs/errors.md;
tests/test_errors.py checks both against these classes). The public names are listed once,
in ``kova.errors.__all__``: this module has no list of its own.
"""

from __future__ import annotations

import builtins
import enum
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import datetime
    from collections.abc import Callable
    from decimal import Decimal


class KovaError(Exception):
    """The root of every error kova raises on purpose."""

    @property
    def is_retryable(self) -> bool:
        """Whether trying the same request again later can succeed."""
        return False

    def _redact(self, mask: Callable[[str], str]) -> None:
        """Pass every text this error carries through ``mask`` (a server may echo a key in
        any of them: kova masks the credentials it sent before raising)."""
        self.args = tuple(mask(arg) if isinstance(arg, str) else arg for arg in self.args)


class BuildError(KovaError):
    """The agent (or another component) was configured wrongly, or used outside its lifecycle.

    Raised where the mistake is made: by ``build()`` and the builder's methods for a bad value,
    and at run time for a misuse of the agent itself (running one that is not open, opening
    one twice)."""


class ConfigError(BuildError, builtins.ValueError):
    """A configuration value kova cannot use (a negative or non-finite duration, ...), raised
    where the config is made; the message names the field. Also a builtin ``ValueError``."""


def check_seconds(name: str, value: object, *, optional: bool = False, zero: bool = False) -> None:
    """Check that ``value`` is a duration kova can wait: a finite number of seconds, positive
    (or zero where ``zero``), or ``None`` where ``optional`` (no deadline). NaN made every
    wait fail in trio with a raw ``ValueError``; infinity is what ``None`` says.

    Raises:
        ConfigError: naming ``name``, for a value that is negative, zero (unless ``zero``),
            NaN or infinite.
        TypeError: not a number (a ``bool`` is none).
    """
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value):
        instead = " (None means no deadline)" if optional else ""
        raise ConfigError(f"{name} must be a finite number of seconds, got {value!r}{instead}")
    if value < 0 or (value == 0 and not zero):
        wanted = "must not be negative" if zero else "must be a positive number of seconds"
        raise ConfigError(f"{name} {wanted}, got {value!r}")


class ProviderErrorClass(enum.Enum):
    """What kind of provider failure this is, independent of the provider."""

    AUTH_INVALID = "auth_invalid"
    """401: the key is wrong or expired."""
    AUTH_FORBIDDEN = "auth_forbidden"
    """403: the key lacks access."""
    RATE_LIMITED = "rate_limited"
    """429: back off (see ``retry_after``)."""
    OVERLOADED = "overloaded"
    """408, 5xx, 529: transient; retry."""
    INVALID_REQUEST = "invalid_request"
    """400, 413, 422: the request itself is wrong (including a prompt that is too long)."""
    NOT_FOUND = "not_found"
    """404: unknown model or endpoint."""
    OTHER = "other"


def classify_status(status_code: int) -> ProviderErrorClass:
    """The :class:`ProviderErrorClass` of an HTTP status."""
    if status_code == 401:
        return ProviderErrorClass.AUTH_INVALID
    if status_code == 403:
        return ProviderErrorClass.AUTH_FORBIDDEN
    if status_code == 429:
        return ProviderErrorClass.RATE_LIMITED
    if status_code == 408 or status_code == 529 or 500 <= status_code <= 599:
        return ProviderErrorClass.OVERLOADED
    if status_code in (400, 413, 422):
        return ProviderErrorClass.INVALID_REQUEST
    if status_code == 404:
        return ProviderErrorClass.NOT_FOUND
    return ProviderErrorClass.OTHER


class ProviderError(KovaError):
    """The model provider answered with an error.

    Use :meth:`from_status` to build the right subclass from an HTTP status.
    """

    default_class: ProviderErrorClass = ProviderErrorClass.OTHER

    def __new__(cls, *args: object, **kwargs: object) -> ProviderError:
        # ``ProviderError(..., error_class=X)`` builds X's subclass, so an error classified
        # from a body (not a status) is still caught by ``except RateLimited``.
        if cls is ProviderError:
            error_class = kwargs.get("error_class")
            if isinstance(error_class, ProviderErrorClass):
                cls = _CLASS_TO_ERROR.get(error_class, ProviderError)
        return super().__new__(cls, *args)

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        provider: str | None = None,
        retry_after: float | None = None,
        error_type: str | None = None,
        error_class: ProviderErrorClass | None = None,
        mid_stream: bool = False,
    ) -> None:
        self.message = message
        self.mid_stream = mid_stream
        """The error arrived inside a stream that had started (an error event, not a status)."""
        self.after_content = False
        """Content of this answer had already reached the consumer when the error arrived:
        the answer is partial, and it is never retried (no replay)."""
        self.status_code = status_code
        self.provider = provider
        self.retry_after = retry_after
        """Seconds the provider asked us to wait (``retry-after`` / ``retry-after-ms``)."""
        self.error_type = error_type
        """The provider's own error type, e.g. ``overloaded_error``."""
        self.error_class = error_class or type(self).default_class
        super().__init__(self._describe())

    def _redact(self, mask: Callable[[str], str]) -> None:
        self.message = mask(self.message)
        if self.error_type is not None:
            self.error_type = mask(self.error_type)
        self.args = (self._describe(),)

    def _describe(self) -> str:
        parts = []
        if self.provider:
            parts.append(self.provider)
        if self.status_code is not None:
            parts.append(f"HTTP {self.status_code}")
        if self.error_type:
            parts.append(self.error_type)
        prefix = " ".join(parts)
        text = f"{prefix}: {self.message}" if prefix else self.message
        if self.retry_after is not None:
            text += f" (retry after {self.retry_after:g}s)"
        if self.mid_stream:
            text += " (mid-stream)"
        return text

    @property
    def is_retryable(self) -> bool:
        return not self.after_content and self.error_class in (
            ProviderErrorClass.RATE_LIMITED,
            ProviderErrorClass.OVERLOADED,
        )

    @staticmethod
    def from_status(
        status_code: int,
        message: str,
        *,
        retry_after: float | None = None,
        provider: str | None = None,
        error_type: str | None = None,
    ) -> ProviderError:
        """The error for an HTTP error status, classified by the status."""
        return ProviderError(
            message,
            status_code=status_code,
            provider=provider,
            retry_after=retry_after,
            error_type=error_type,
            error_class=classify_status(status_code),
        )

    @staticmethod
    def invalid_response(message: str, *, provider: str | None = None) -> InvalidResponse:
        """The provider sent a response kova cannot read."""
        return InvalidResponse(message, provider=provider)

    @staticmethod
    def credential_failure(message: str, *, provider: str | None = None) -> ProviderAuthError:
        """No usable credentials were found before any request was sent."""
        return ProviderAuthError(
            message, provider=provider, error_class=ProviderErrorClass.AUTH_INVALID
        )


class ProviderAuthError(ProviderError):
    """401 or 403 (``AUTH_INVALID`` / ``AUTH_FORBIDDEN``), or no usable credentials."""

    default_class = ProviderErrorClass.AUTH_INVALID


class RateLimited(ProviderError):
    """429 (``RATE_LIMITED``): back off; ``retry_after`` says how long when the provider
    said. Retried by the agent's retry policy."""

    default_class = ProviderErrorClass.RATE_LIMITED


class ProviderOverloaded(ProviderError):
    """408, 5xx, 529 (``OVERLOADED``): transient. Retried by the agent's retry policy."""

    default_class = ProviderErrorClass.OVERLOADED


class InvalidRequest(ProviderError):
    """400, 413, 422 (``INVALID_REQUEST``): the request is wrong, including a prompt over the
    context window. Not retried."""

    default_class = ProviderErrorClass.INVALID_REQUEST


class ContextOverflow(InvalidRequest):
    """The prompt is larger than the model's context window: every provider's answer for it
    (Anthropic "prompt is too long", OpenAI and Azure ``context_length_exceeded``, Gemini "input
    token count ... exceeds", Bedrock "Input is too long", Ollama "exceeds the context
    length") is this one class. A turn with a context policy (``AgentBuilder.context``)
    compacts once and retries the call once; without one it fails with it. Not retried."""


class ModelNotFound(ProviderError):
    """404 (``NOT_FOUND``): unknown model or endpoint."""

    default_class = ProviderErrorClass.NOT_FOUND


class InvalidResponse(ProviderError):
    """The provider sent something kova cannot read (class ``OTHER``)."""

    default_class = ProviderErrorClass.OTHER


_CLASS_TO_ERROR: dict[ProviderErrorClass, type[ProviderError]] = {
    ProviderErrorClass.AUTH_INVALID: ProviderAuthError,
    ProviderErrorClass.AUTH_FORBIDDEN: ProviderAuthError,
    ProviderErrorClass.RATE_LIMITED: RateLimited,
    ProviderErrorClass.OVERLOADED: ProviderOverloaded,
    ProviderErrorClass.INVALID_REQUEST: InvalidRequest,
    ProviderErrorClass.NOT_FOUND: ModelNotFound,
}


def error_for_class(error_class: ProviderErrorClass) -> type[ProviderError]:
    """The :class:`ProviderError` subclass raised for ``error_class``."""
    return _CLASS_TO_ERROR.get(error_class, ProviderError)


class KovaConnectionError(KovaError, builtins.ConnectionError):
    """The connection could not be made or broke (refused, reset, dropped).

    Also a builtin :class:`ConnectionError`, so ``except ConnectionError`` catches it.
    """

    @property
    def is_retryable(self) -> bool:
        return True


class KovaTimeoutError(KovaError, builtins.TimeoutError):
    """A connect or read timeout expired. Also a builtin :class:`TimeoutError`."""

    def __init__(self, message: str, *, timeout: float | None = None) -> None:
        self.timeout = timeout
        super().__init__(message)

    @property
    def is_retryable(self) -> bool:
        return True


class StreamError(KovaError):
    """A stream failed: an ``error`` event arrived, or the connection was cut mid-stream."""

    def __init__(self, message: str, *, error_type: str | None = None) -> None:
        self.message = message
        self.error_type = error_type
        super().__init__(self._describe())

    def _describe(self) -> str:
        return f"{self.error_type}: {self.message}" if self.error_type else self.message

    def _redact(self, mask: Callable[[str], str]) -> None:
        self.message = mask(self.message)
        if self.error_type is not None:
            self.error_type = mask(self.error_type)
        self.args = (self._describe(),)


class ToolError(KovaError):
    """A kova-side tool fault. Failures *of* a tool go back to the model in-band instead."""


class ToolExecutionError(ToolError):
    def __init__(self, tool_name: str, message: str) -> None:
        self.tool_name = tool_name
        super().__init__(f"tool {tool_name!r} failed: {message}")


class ToolNotFoundError(ToolError):
    def __init__(self, tool_name: str) -> None:
        self.tool_name = tool_name
        super().__init__(f"no tool named {tool_name!r}")


class McpError(KovaError):
    """The MCP server reported an error or broke the protocol."""

    def __init__(self, message: str, *, code: int | None = None) -> None:
        self.message = message
        self.code = code
        """The JSON-RPC error code, when the server sent one."""
        super().__init__(f"{message} (JSON-RPC error {code})" if code is not None else message)


class McpUnavailableError(KovaConnectionError):
    """No MCP session is up: the server is down or being reconnected to.

    Raised at once (fail fast) while the connection actor backs off between reconnect
    attempts, instead of letting the request run into its timeout (or, with
    ``wait_for_connection=True``, when no session came up within it). A tool call that
    raises it never reached the server; a call that may have reached it raises
    :class:`McpCallInterruptedError` instead.
    """

    def __init__(
        self,
        *,
        server: str,
        since: datetime.datetime,
        reason: str | None = None,
        attempts: int = 0,
    ) -> None:
        self.server = server
        """The connection's name (the ``McpClient``'s)."""
        self.since = since
        """When the server became unavailable (UTC wall clock)."""
        self.reason = reason
        """Why the last connection or reconnect attempt failed."""
        self.attempts = attempts
        """Reconnect attempts that failed in this outage."""
        message = f"MCP server {server!r} is unavailable since {since:%Y-%m-%d %H:%M:%S} UTC"
        details = []
        if attempts:
            details.append(f"{attempts} reconnect attempt{'s' if attempts != 1 else ''} failed")
        if reason:
            details.append(f"last error: {reason}")
        super().__init__(message + (f" ({'; '.join(details)})" if details else ""))


class McpCallInterruptedError(McpError):
    """The connection died while a tool call was in flight, and the call was not sent again.

    The server may or may not have run it. kova replays an interrupted call on the new
    session only when the tool is annotated read-only or idempotent, or the host opted in
    (``replay=True``, ``replay_tools=``); this error says it did neither.
    """

    def __init__(
        self,
        *,
        server: str,
        tool: str,
        reason: str,
        replayed: bool = False,
        why: str | None = None,
    ) -> None:
        self.server = server
        self.tool = tool
        self.reason = reason
        self.replayed = replayed
        """Whether this was already the second attempt (a replay), which was lost too."""
        if why is None:
            why = (
                "it was already sent again once"
                if replayed
                else "the tool is not annotated read-only or idempotent"
            )
        self.why = why
        """Why it was not sent (again)."""
        super().__init__(
            f"the connection to MCP server {server!r} was lost while tool {tool!r} was "
            f"running ({reason}); the call may or may not have run on the server. It was not "
            f"sent again: {why}"
        )


class AgentLoopError(KovaError):
    """The agent loop stopped a turn."""


class MaxIterationsError(AgentLoopError):
    def __init__(self, max_iterations: int) -> None:
        self.max_iterations = max_iterations
        super().__init__(
            f"the model was still calling tools after {max_iterations} iterations "
            f"({max_iterations + 1} provider calls)"
        )


class ContextBudgetExceededError(AgentLoopError):
    def __init__(self, estimated_tokens: int, budget: int) -> None:
        self.estimated_tokens = estimated_tokens
        self.budget = budget
        super().__init__(
            f"the prompt is about {estimated_tokens} tokens, over the context budget of {budget}; "
            "nothing was sent"
        )


class UsageLimitExceeded(AgentLoopError):
    """A turn reached one of its :class:`~kova.agent.UsageLimits`. Like every failed turn it
    produced no messages."""

    def __init__(
        self, limit: str, value: int | Decimal, figure: int | Decimal, *, sent: bool
    ) -> None:
        self.limit = limit
        """Which limit: ``requests``, ``tool_calls``, ``input_tokens``, ``output_tokens``,
        ``total_tokens`` or ``cost`` (then ``value`` and ``figure`` are ``Decimal`` USD)."""
        self.value = value
        """The limit's value."""
        self.figure = figure
        """The turn's figure that went over it."""
        if limit == "cost":
            what = f"the turn has spent ${figure}"
        elif not sent and limit == "requests":
            what = f"model call {figure} was not sent"
        elif not sent and limit == "tool_calls":
            what = f"the tool step that would make {figure} tool calls was not started"
        elif not sent:
            what = f"the request counted at {figure} {limit.replace('_', ' ')} was not sent"
        else:
            what = f"the turn has used {figure} {limit.replace('_', ' ')}"
        super().__init__(f"usage limit {limit}={value} exceeded: {what}")


class BudgetExceeded(AgentLoopError):
    """A model call's worst case did not fit in what a shared :class:`~kova.agent.Budget` had
    left: the call was not sent (the turn fails and, like every failed turn, produces no
    messages)."""

    def __init__(self, budget: object, needed: Decimal, left: Decimal) -> None:
        self.budget = budget
        """The :class:`~kova.agent.Budget` that refused the call."""
        self.needed = needed
        """What the call could cost at most (USD): its counted input at the dearest input
        price plus ``max_tokens`` at the dearest output price."""
        self.left = left
        """What the budget had left (USD) when it refused: its amount less what was spent
        (in its window) and what other calls in flight hold."""
        super().__init__(
            f"budget exceeded: the model call could cost up to ${needed} and {budget!r} has "
            f"${left} left; it was not sent"
        )


class GuardrailTripped(AgentLoopError):
    """A guard stopped the turn (``kova.agent.InputGuard``, ``OutputGuard`` or ``ToolGuard``
    returned ``Trip``): the model call in flight was cancelled, no tool ran after it, and like
    every failed turn it produced no messages."""

    def __init__(self, *, guard: str, reason: str) -> None:
        self.guard = guard
        """The name of the guard that tripped."""
        self.reason = reason
        """The reason its check gave."""
        super().__init__(f"the guard {guard!r} stopped the turn: {reason}")


class ApprovalMismatchError(KovaError):
    """A resumed turn's history or decisions do not fit the turn that paused: the history
    does not end with the assistant message the pending calls came from, a decision names an
    unknown call, a call's name or arguments changed, or a call has no decision. Nothing ran.
    """


class StructuredOutputError(KovaError):
    """The final answer did not parse as JSON or did not validate against the schema, after
    every output retry."""

    def __init__(
        self,
        message: str,
        *,
        raw_text: str,
        response: object = None,
        attempts: tuple[str, ...] | None = None,
    ) -> None:
        self.raw_text = raw_text
        """The model's last raw answer."""
        self.response = response
        """The turn's :class:`~kova.agent.AgentResponse` (its messages can still be kept)."""
        self.attempts: tuple[str, ...] = attempts if attempts is not None else (raw_text,)
        """Every raw answer, in order: the first try, then one per output retry."""
        tries = f" after {len(self.attempts)} attempts" if len(self.attempts) > 1 else ""
        super().__init__(f"{message}{tries}; raw answer: {raw_text[:200]!r}")


class TurnCancelled(KovaError):
    """A turn was cancelled through a :class:`~kova.CancelToken`. It produced no messages.

    Not ``trio.Cancelled``: a caller's own cancel scope raises that, untouched.
    """

    def __init__(self, reason: str | None = None) -> None:
        self.reason = reason
        super().__init__(f"cancelled: {reason}" if reason else "cancelled")


class SerializationError(KovaError, ValueError):
    """Stored data (history, JSON) could not be read."""


class SessionError(KovaError):
    """A session store cannot be used (its file or database, its schema version), or a
    session cannot do what was asked (a turn on a session that waits for decisions)."""


class SessionBusyError(SessionError):
    """Another turn is running on this session (``store.session(id, wait=False)``); nothing
    was run or appended."""

    def __init__(self, session_id: str, message: str | None = None) -> None:
        self.session_id = session_id
        super().__init__(
            message or f"session {session_id!r} is busy: another turn is running on it (wait=False)"
        )


class SessionConflictError(SessionBusyError):
    """The session changed after this turn loaded it (another process appended, rewound or
    cleared it), so the turn's messages were not appended: two writers never both append
    after the same message."""

    def __init__(self, session_id: str, expected: int, found: int) -> None:
        self.expected = expected
        self.found = found
        super().__init__(
            session_id,
            f"session {session_id!r} changed while this turn ran (version {expected} was "
            f"loaded, the store holds {found}): nothing was appended",
        )


class KovaIOError(KovaError, OSError):
    """A local I/O failure."""


class ActorError(KovaError):
    """An actor could not serve a request."""


class ActorFailed(ActorError):
    """The actor crashed; the original error is ``__cause__``."""

    def __init__(self, actor: str, message: str = "") -> None:
        self.actor = actor
        super().__init__(f"actor {actor!r} failed" + (f": {message}" if message else ""))


class MailboxClosed(ActorError):
    """The actor is stopped or its mailbox is closed."""

    def __init__(self, actor: str) -> None:
        self.actor = actor
        super().__init__(f"actor {actor!r} is not running")


def parse_retry_after(
    retry_after: str | None, retry_after_ms: str | None = None, *, now: float | None = None
) -> float | None:
    """Seconds to wait from ``retry-after-ms`` (preferred) or ``retry-after`` (seconds or an
    HTTP date). ``None`` when neither header is usable.

    Args:
        retry_after: the ``retry-after`` header value.
        retry_after_ms: the ``retry-after-ms`` header value (OpenAI, Anthropic send it).
        now: the current wall-clock time in seconds (for HTTP dates); defaults to ``time.time()``.
    """
    if retry_after_ms:
        try:
            value = float(retry_after_ms) / 1000.0
        except ValueError:
            pass
        else:
            if value >= 0:
                return value
    if not retry_after:
        return None
    try:
        seconds = float(retry_after)
    except ValueError:
        # Imported here: email.utils costs ~30 ms at import, and HTTP dates are rare.
        import time
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(retry_after)
        except (TypeError, ValueError):
            return None
        current = time.time() if now is None else now
        return max(0.0, when.timestamp() - current)
    return seconds if seconds >= 0 else None
