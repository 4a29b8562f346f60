"""Context that never overflows: compaction strategies as values, decided by the turn core.

A :class:`ContextPolicy` (``AgentBuilder().context(...)``, ``run(..., context=...)``) says
what the turn does when the next request would not fit the model's window less a reserve
for the answer: its strategies run in order until the request fits.

- :class:`ClearToolResults`: older tool results are replaced by a line saying what was
  cleared (the last ``keep_last`` and the tools in ``keep_tools`` are kept).
- :class:`SlidingWindow`: the oldest messages go, never the system prompt, and never a tool
  call without its result (a cut falls only before an assistant message or a user prompt;
  the kept part starts with a user message saying that earlier messages were removed).
- :class:`Summarize`: a model call replaces the older messages with a summary; the turn
  asks its driver for that call (:class:`~kova.agent.Summarize`... the step), so a saved turn
  records it and a resumed turn never summarizes twice.

Whatever the strategies, a single tool result too large for the window is cut to fit, with a
note saying so: the turn goes on. If nothing makes the request fit (a window smaller than
the system prompt and the newest step), the turn fails with
:class:`~kova.ContextBudgetExceededError`, as without a policy.

The caller's history is never changed: compaction rewrites the turn's working copy, and
:class:`Compaction` carries the compacted history the next turn should start from.

Everything here is pure: no I/O, no clock, no trio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, TypeAlias

from .._errors import BuildError, ContextBudgetExceededError, ContextOverflow, SerializationError
from .._estimate import heuristic_count_tokens
from .._messages import Message, Role, Text, ToolResult, ToolUse
from .._record import Record, evolve
from .._requests import COMPACTION_KEYS, ChatRequest, ProviderCompaction
from ._events import Compaction, ContextCompacted

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from .._messages import JSONValue
    from .._requests import InferenceConfig, ToolDefinition
    from ..providers import Provider

    EstimateFn: TypeAlias = Callable[[Sequence[Message]], int]
    """``estimate(messages) -> tokens`` of a whole request (its tools included)."""

__all__ = [
    "ClearToolResults",
    "Compaction",
    "ContextCompacted",
    "NATIVE_COMPACTION",
    "ContextPolicy",
    "ContextStrategy",
    "ProviderCompaction",
    "SlidingWindow",
    "Summarize",
    "known_window",
]

_CLEARED: Final = "[tool result cleared to save context: {size} characters from {tool}]"
_CUT_NOTE: Final = (
    "\n\n[cut to fit the context window: {kept} of {size} characters kept; ask for less, or "
    "for a part, if you need the rest]"
)
_REMOVED_NOTE: Final = (
    "[Earlier messages of this conversation were removed to fit the context window.]"
)
_PROVIDER_NOTE: Final = "[Earlier messages of this conversation were compacted by the provider.]"
_SUMMARY_PREFIX: Final = "Summary of the earlier conversation:\n\n"
_DEFAULT_INSTRUCTIONS: Final = (
    "Summarize the conversation above for your own later use: the user's goals and "
    "constraints, decisions made, facts and results found (names, numbers, paths, ids), "
    "and what is still to do. Be concise and complete; write it as notes, not as a reply."
)


def _non_negative(owner: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BuildError(f"{owner}({name}=...) must be an int of at least 0, got {value!r}")


class ClearToolResults(Record):
    """Replace older tool results with a line that says what was cleared."""

    keep_last: int = 3
    """How many of the newest tool results stay whole."""
    keep_tools: tuple[str, ...] = ()
    """Tools whose results are never cleared (by name)."""

    def __post_init__(self) -> None:
        _non_negative("ClearToolResults", "keep_last", self.keep_last)
        keep_tools: object = self.keep_tools
        if not isinstance(keep_tools, tuple) or not all(
            isinstance(name, str) for name in keep_tools
        ):
            raise BuildError("ClearToolResults(keep_tools=...) must be a tuple of tool names")


class SlidingWindow(Record):
    """Drop the oldest messages (never the system prompt, never a call without its result)."""


class Summarize(Record):
    """Replace older messages with a summary written by a model.

    The newest ``keep_last`` messages stay (moved to the nearest point that splits no tool
    call from its result). ``provider``: the model that summarizes (default: the agent's
    own); ``instructions``: what the summary should keep (a default that asks for goals,
    decisions, facts and what is still to do).
    """

    provider: Provider | None = None
    instructions: str | None = None
    keep_last: int = 4

    def __post_init__(self) -> None:
        _non_negative("Summarize", "keep_last", self.keep_last)
        if self.instructions is not None and (
            not isinstance(self.instructions, str) or not self.instructions.strip()
        ):
            raise BuildError("Summarize(instructions=...) must be a non-empty str")


ContextStrategy: TypeAlias = ClearToolResults | SlidingWindow | Summarize | ProviderCompaction
_STRATEGIES = (ClearToolResults, SlidingWindow, Summarize, ProviderCompaction)

NATIVE_COMPACTION: Final = {"anthropic": "clear or summarize", "openai-responses": "summarize"}
"""The providers (by name) with server-side context management, and what they do of it."""


def native_compaction(
    policy: ContextPolicy, provider: str | None, limit: int
) -> ProviderCompaction | None:
    """What a request to ``provider`` asks of the provider's own context management under
    ``policy`` (its :class:`ProviderCompaction` with the trigger set), or ``None``: no such
    strategy, or a provider without it (the strategies after it do the work)."""
    for strategy in policy.strategies:
        if isinstance(strategy, ProviderCompaction):
            kind = NATIVE_COMPACTION.get(provider or "")
            if kind is None or (kind == "summarize" and not strategy.summarize):
                return None
            if strategy.trigger is not None:
                return strategy
            return evolve(strategy, trigger=max(1, limit * 3 // 4))
    return None


# Context windows of models kova knows, by name prefix (longest prefix wins). A model not
# here needs ContextPolicy(window=...).
_WINDOWS: Final = (
    ("claude-", 200_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-5", 400_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("gemini-1.5-pro", 2_097_152),
    ("gemini-", 1_048_576),
    ("anthropic.claude-", 200_000),
    ("us.anthropic.claude-", 200_000),
    ("eu.anthropic.claude-", 200_000),
    ("amazon.nova-pro", 300_000),
    ("amazon.nova-lite", 300_000),
    ("llama3", 128_000),
    ("qwen3", 40_960),
    ("mistral-large", 128_000),
)


def known_window(model: str | None) -> int | None:
    """The context window of ``model`` in tokens, if kova knows it."""
    if not model:
        return None
    best: tuple[int, int] | None = None
    for prefix, window in _WINDOWS:
        if model.startswith(prefix) and (best is None or len(prefix) > best[0]):
            best = (len(prefix), window)
    return None if best is None else best[1]


class ContextPolicy:
    """What a turn does when its next request would overflow the model's context window.

    Args:
        *strategies: tried in order until the request fits (:class:`ClearToolResults`,
            :class:`SlidingWindow`, :class:`Summarize`); a :class:`ProviderCompaction`
            among them is sent with every request to a provider that has it.
        window: the model's context size in tokens; looked up for known models when
            ``None`` (an unknown model then fails the turn at its start, naming this).
        reserve: tokens kept free for the answer (default: the call's ``max_tokens``, else a
            tenth of the window).

    Raises:
        BuildError: a strategy of another type, a window or reserve below 1, or a reserve
            not smaller than the window.
    """

    __slots__ = ("_tool_tokens", "reserve", "strategies", "window")

    def __init__(
        self, *strategies: ContextStrategy, window: int | None = None, reserve: int | None = None
    ) -> None:
        for strategy in strategies:
            if not isinstance(strategy, _STRATEGIES):
                raise BuildError(
                    "ContextPolicy takes ClearToolResults, SlidingWindow, Summarize or "
                    f"ProviderCompaction strategies, got {type(strategy).__name__}"
                )
        if strategies and all(isinstance(s, ProviderCompaction) for s in strategies):
            raise BuildError(
                "ContextPolicy(ProviderCompaction()) needs a strategy of kova's after it "
                "(SlidingWindow() or Summarize()): for providers without server-side "
                "compaction, and for what the provider's compaction keeps out of its prompt "
                "but not out of the turn's history"
            )
        for name, value in (("window", window), ("reserve", reserve)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise BuildError(f"ContextPolicy({name}=...) must be a positive int, got {value!r}")
        if window is not None and reserve is not None and reserve >= window:
            raise BuildError(
                f"ContextPolicy(reserve={reserve}) must be smaller than window={window}"
            )
        self.strategies: tuple[ContextStrategy, ...] = strategies
        self.window = window
        self.reserve = reserve
        # Each tool definition's estimate, by identity: an agent's definitions are the same
        # objects turn after turn, and counting one means printing its schema. Bounded. (A
        # plain dict: read and written between checkpoints only.)
        self._tool_tokens: dict[int, tuple[ToolDefinition, int]] = {}

    def tool_tokens(self, definition: ToolDefinition) -> int:
        """The estimate of one tool definition (remembered per definition object)."""
        known = self._tool_tokens.get(id(definition))
        if known is not None and known[0] is definition:
            return known[1]
        if len(self._tool_tokens) >= 4096:
            self._tool_tokens.clear()
        tokens = heuristic_count_tokens((), (definition,))
        self._tool_tokens[id(definition)] = (definition, tokens)
        return tokens

    def limit(self, model: str | None, max_tokens: int | None) -> int:
        """The most prompt tokens a request to ``model`` may have under this policy.

        Raises:
            BuildError: no ``window`` and ``model`` is not one kova knows.
        """
        window = self.window if self.window is not None else known_window(model)
        if window is None:
            raise BuildError(
                f"ContextPolicy needs window=... for model {model!r}: kova does not know its "
                "context size"
            )
        reserve = self.reserve
        if reserve is None:
            reserve = max_tokens if max_tokens is not None else window // 10
        return max(1, window - min(reserve, window - 1))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ContextPolicy):
            return NotImplemented
        return (self.strategies, self.window, self.reserve) == (
            other.strategies,
            other.window,
            other.reserve,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        parts = [repr(strategy) for strategy in self.strategies]
        if self.window is not None:
            parts.append(f"window={self.window}")
        if self.reserve is not None:
            parts.append(f"reserve={self.reserve}")
        return f"ContextPolicy({', '.join(parts)})"


# -- the pure transformations ---------------------------------------------------------------


def _tool_names(messages: Sequence[Message]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        if message.role is Role.ASSISTANT:
            for block in message.content:
                if isinstance(block, ToolUse):
                    names[block.id] = block.name
    return names


def clear_tool_results(
    messages: list[Message], start: int, strategy: ClearToolResults
) -> tuple[list[Message], int]:
    """``messages`` with older tool results cleared (from ``start`` on); and how many."""
    names = _tool_names(messages)
    positions = [
        (index, position)
        for index in range(start, len(messages))
        for position, block in enumerate(messages[index].content)
        if isinstance(block, ToolResult) and not block.text.startswith("[tool result cleared")
    ]
    keep = set(positions[len(positions) - strategy.keep_last :]) if strategy.keep_last else set()
    cleared = 0
    result = list(messages)
    for index, position in positions:
        if (index, position) in keep:
            continue
        message = result[index]
        block = message.content[position]
        assert isinstance(block, ToolResult)
        tool = names.get(block.tool_use_id, "a tool")
        if tool in strategy.keep_tools:
            continue
        placeholder = _CLEARED.format(size=len(block.text), tool=tool)
        content = list(message.content)
        content[position] = ToolResult(
            tool_use_id=block.tool_use_id, content=placeholder, is_error=block.is_error
        )
        result[index] = Message(role=message.role, content=content)
        cleared += 1
    return result, cleared


def _cut_points(messages: Sequence[Message], start: int) -> list[int]:
    """Indexes where the kept part may begin: an assistant message (a step whose results
    follow it), or a user message that answers no call. Never ``start`` itself (nothing would
    be removed) and never the last message."""
    points = []
    for index in range(start + 1, len(messages)):
        message = messages[index]
        if message.role is Role.ASSISTANT or (
            message.role is Role.USER
            and not any(isinstance(block, ToolResult) for block in message.content)
        ):
            points.append(index)
    return points


def _removed_note() -> Message:
    return Message.user(_REMOVED_NOTE)


def _provider_note() -> Message:
    return Message.user(_PROVIDER_NOTE)


def slide(
    messages: list[Message], start: int, over: int, estimate: EstimateFn
) -> tuple[list[Message], int]:
    """Drop the oldest messages after ``start`` until the estimate is at most ``over``;
    returns the new list and how many were removed (0: nothing could go)."""
    best: tuple[list[Message], int] | None = None
    for point in _cut_points(messages, start):
        kept = messages[point:]
        head = [] if kept[0].role is Role.USER else [_removed_note()]
        candidate = [*messages[:start], *head, *kept]
        best = (candidate, point - start)
        if estimate(candidate) <= over:
            return best
    return best if best is not None else (messages, 0)


def summary_cut(messages: Sequence[Message], start: int, keep_last: int) -> int | None:
    """Where the kept part begins when the messages before it are summarized: the latest cut
    point at or before ``len(messages) - keep_last``, or ``None`` if there is none."""
    limit = len(messages) - keep_last
    candidates = [point for point in _cut_points(messages, start) if point <= limit]
    return candidates[-1] if candidates else None


def summary_messages(
    messages: Sequence[Message], start: int, cut: int, instructions: str | None
) -> tuple[Message, ...]:
    """The conversation to summarize (``messages[start:cut]``) and the request for a summary,
    as a history a model can answer: tool calls and results are shown as text, so the summary
    call needs no tools."""
    lines: list[str] = []
    for message in messages[start:cut]:
        for block in message.content:
            if isinstance(block, Text):
                lines.append(f"{message.role.value}: {block.text}")
            elif isinstance(block, ToolUse):
                lines.append(f"{message.role.value} called {block.name}({block.input})")
            elif isinstance(block, ToolResult):
                lines.append(f"tool result: {block.text}")
    transcript = "\n\n".join(lines) or "(nothing)"
    ask = instructions or _DEFAULT_INSTRUCTIONS
    return (Message.user(f"<conversation>\n{transcript}\n</conversation>\n\n{ask}"),)


def apply_summary(
    messages: list[Message], start: int, cut: int, summary: str
) -> tuple[list[Message], int]:
    """``messages`` with ``messages[start:cut]`` replaced by the summary."""
    kept = messages[cut:]
    head = [Message.user(_SUMMARY_PREFIX + summary)]
    if kept and kept[0].role is Role.USER:
        # Two user messages in a row: the summary goes first in the same message.
        first = kept[0]
        head = [
            Message(role=Role.USER, content=(Text(text=_SUMMARY_PREFIX + summary), *first.content))
        ]
        kept = kept[1:]
    return [*messages[:start], *head, *kept], cut - start


def cut_oversized(
    messages: list[Message], start: int, over: int, estimate: EstimateFn
) -> tuple[list[Message], int]:
    """Cut the largest tool results (text) until the estimate is at most ``over`` or none is
    left to cut; returns the list and how many cuts were made."""
    result = list(messages)
    cuts = 0
    results = sum(
        isinstance(block, ToolResult) for message in result[start:] for block in message.content
    )
    for _ in range(4 * results):
        excess = estimate(result) - over
        if excess <= 0:
            break
        largest: tuple[int, int, int] | None = None
        for index in range(start, len(result)):
            for position, block in enumerate(result[index].content):
                size = len(block.text) if isinstance(block, ToolResult) else -1
                if size > _MIN_CUT and (largest is None or size > largest[2]):
                    largest = (index, position, size)
        if largest is None:
            break
        index, position, size = largest
        block = result[index].content[position]
        assert isinstance(block, ToolResult)
        # About four characters a token; the note itself takes room too.
        keep = max(0, size - excess * 4 - len(_CUT_NOTE) - 40)
        note = _CUT_NOTE.format(kept=keep, size=size)
        content = list(result[index].content)
        content[position] = ToolResult(
            tool_use_id=block.tool_use_id, content=block.text[:keep] + note, is_error=block.is_error
        )
        result[index] = Message(role=result[index].role, content=content)
        cuts += 1
    return result, cuts


_MIN_CUT: Final = 400
"""A tool result this short is never cut (the note would be most of it)."""


# -- the state a turn keeps: what was compacted, and a summary it waits for ------------------


class Compact(Record):
    """A turn step: call ``provider`` (``None``: the agent's own) with ``request`` for a
    summary of older messages, then give the answer to :meth:`Turn.compacted
    <kova.agent.Turn.compacted>`. (A :class:`Summarize` strategy asked for it.)"""

    request: ChatRequest
    provider: Provider | None = None


class Fitted(Record):
    """What :meth:`Compactor.fit` decided: the messages to send (maybe compacted), the event
    saying what was done (``None``: nothing), and a summary to ask for first (``None``: send)."""

    messages: tuple[Message, ...]
    event: ContextCompacted | None
    compact: Compact | None = None


class Compactor:
    """A turn's context policy at work: decides, before each model call, whether and how the
    working messages are compacted, and remembers what it did (for :class:`Compaction`, the
    events and a saved turn). Pure; part of the :class:`~kova.agent.Turn`."""

    __slots__ = (
        "_after",
        "_before",
        "_cache",
        "_counted",
        "_exact",
        "_overflow",
        "_overflowed_at",
        "_pending",
        "_ran",
        "_removed",
        "_scale",
        "_sent",
        "_summarized_at",
        "_tools_key",
        "_tools_tokens",
        "limit",
        "native",
        "policy",
    )

    def __init__(
        self, policy: ContextPolicy, limit: int, native: ProviderCompaction | None = None
    ) -> None:
        self.policy = policy
        self.limit = limit
        self.native = native
        """What each request asks of the provider's own context management (``None``:
        nothing)."""
        self._scale = 1.0
        self._sent: int | None = None  # the estimate of the request last sent
        self._ran: list[str] = []
        self._before: int | None = None
        self._after = 0
        self._removed = 0
        self._pending: tuple[int, int] | None = None  # (cut, strategy index) of a summary
        self._summarized_at = -1  # the request number a summary was made for
        # The working list last counted, how many of its messages and their tokens.
        self._cache: tuple[Sequence[Message], int, int] | None = None
        self._tools_key: Sequence[ToolDefinition] | None = None
        self._tools_tokens = 0
        # The provider's ContextOverflow for the request last sent, until the next fit
        # compacts for it; and the request number it came for (one retry per model call).
        self._overflow: ContextOverflow | None = None
        self._overflowed_at = -1
        # Whether the provider counts prompt tokens exactly (set by the turn), the request
        # number last counted, and a count over the limit the next fit compacts for.
        self._exact = False
        self._counted: tuple[int, int | None] = (-1, None)

    @property
    def compacted(self) -> bool:
        """Whether anything was compacted in this turn."""
        return self._before is not None

    @property
    def pending(self) -> bool:
        """Whether a summary was asked for and not yet given."""
        return self._pending is not None

    def _quick_estimate(self, messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> int:
        """The estimate of a request, counting only what is new since the last call: a turn's
        working messages only grow between compactions, so each message is counted once (each
        rounded up on its own: a little over the whole-request heuristic, never under)."""
        cache = self._cache
        if cache is None or cache[0] is not messages or cache[1] > len(messages):
            cache = (messages, 0, 0)
        counted = cache[2]
        for message in messages[cache[1] :]:
            counted += heuristic_count_tokens((message,))
        self._cache = (messages, len(messages), counted)
        if self._tools_key is not tools:
            self._tools_key = tools
            self._tools_tokens = sum(map(self.policy.tool_tokens, tools))
        return int((counted + self._tools_tokens) * self._scale + 0.999)

    def _estimator(self, tools: Sequence[ToolDefinition]) -> EstimateFn:
        scale = self._scale

        def estimate(messages: Sequence[Message]) -> int:
            return int(heuristic_count_tokens(messages, tools) * scale + 0.999)

        return estimate

    def observed(self, input_tokens: int | None) -> None:
        """The real input tokens of the request last sent: later estimates are scaled up by
        how far the heuristic fell short (up to 4x; never down: a heuristic that counts more
        than the model only compacts a little early)."""
        sent = self._sent
        if input_tokens and sent:
            self._scale = min(4.0, max(1.0, self._scale * input_tokens / sent))

    def count_exactly(self, exact: bool) -> None:
        """Whether the provider counts prompt tokens exactly: then a request estimated within
        a fifth of the limit is counted by it before it is sent (:meth:`wants_count`)."""
        self._exact = exact

    def wants_count(self, request_number: int) -> bool:
        """Whether the request about to be sent should first be counted by the provider:
        near the limit by the estimate, once per model call, with an exact counter."""
        sent = self._sent
        if not self._exact or sent is None or sent * 5 <= self.limit * 4:
            return False
        if self._counted[0] == request_number:
            return False
        self._counted = (request_number, None)
        return True

    def counted(self, tokens: int, request_number: int) -> bool:
        """The provider's count of the request :meth:`wants_count` asked for: over the
        limit, later estimates count more and the next :meth:`fit` compacts (``True``)."""
        sent = self._sent
        if tokens <= self.limit or not sent:
            return False
        self._scale = min(4.0, max(self._scale, self._scale * tokens / sent * 1.02))
        self._counted = (request_number, tokens)
        return True

    def overflowed(self, error: ContextOverflow, request_number: int) -> bool:
        """The provider answered the request last sent with ``error``: the next :meth:`fit`
        compacts (to at most three quarters of what was sent) and later estimates count
        more (the heuristic fell short). ``False``: this model call overflowed once already
        (one retry per call)."""
        if self._overflowed_at == request_number:
            return False
        self._overflowed_at = request_number
        self._overflow = error
        sent = self._sent
        if sent:
            # What was sent is over the window, which is more than the limit: count so.
            self._scale = min(4.0, max(self._scale * 1.25, self._scale * self.limit * 1.1 / sent))
        return True

    def fit(
        self,
        messages: Sequence[Message],
        start: int,
        tools: Sequence[ToolDefinition],
        config: InferenceConfig,
        request_number: int,
    ) -> Fitted | None:
        """Make the next request fit the window (``messages[:start]`` is the system prompt,
        never touched); ``None`` when it fits as it is.

        Raises:
            ContextBudgetExceededError: nothing makes the request fit.
            ContextOverflow: the provider refused the last request as over its window
                (:meth:`overflowed`) and nothing could be compacted.
        """
        overflow, self._overflow = self._overflow, None
        over = self._counted[1] if self._counted[0] == request_number else None
        tokens = self._quick_estimate(messages, tools)
        if tokens <= self.limit and overflow is None and over is None:
            self._sent = tokens
            return None
        estimate = self._estimator(tools)
        current = list(messages)
        before = estimate(current)
        # After an overflow the request must shrink, whatever the estimate says.
        target = self.limit if overflow is None else min(self.limit, before * 3 // 4)
        ran: list[str] = []
        removed = 0
        for position, strategy in enumerate(self.policy.strategies):
            if isinstance(strategy, ClearToolResults):
                current, count = clear_tool_results(current, start, strategy)
                name = "clear_tool_results"
            elif isinstance(strategy, ProviderCompaction):
                continue  # the provider's part, sent with each request (native_compaction)
            elif isinstance(strategy, SlidingWindow):
                # Down to three quarters of the limit, not just under it: the window then
                # slides every few calls rather than on every one (each slide changes the
                # prompt's prefix, which a provider's prompt cache keys on).
                current, count = slide(current, start, min(target, self.limit * 3 // 4), estimate)
                name = "sliding_window"
            else:
                cut = summary_cut(current, start, strategy.keep_last)
                if self._summarized_at == request_number or cut is None:
                    continue  # one summary per model call; or nothing old enough to summarize
                self._pending = (cut, position)
                request = ChatRequest(
                    messages=summary_messages(current, start, cut, strategy.instructions),
                    tools=(),
                    config=config,
                )
                return Fitted(
                    messages=tuple(current),
                    event=self._record(ran, before, removed, None),
                    compact=Compact(request=request, provider=strategy.provider),
                )
            if count:
                ran.append(name)
                removed += count
            if estimate(current) <= target:
                break
        if estimate(current) > target:
            current, count = cut_oversized(current, start, target, estimate)
            if count:
                ran.append("cut_tool_result")
                removed += count
        after = estimate(current)
        if overflow is not None and not ran:
            raise overflow  # nothing could go: the provider's answer stands
        if over is not None:
            self._counted = (request_number, None)  # compacted for that count
            if not ran:
                raise ContextBudgetExceededError(over, self.limit)
        if after > self.limit:
            raise ContextBudgetExceededError(after, self.limit)
        self._sent = after
        return Fitted(messages=tuple(current), event=self._record(ran, before, removed, after))

    def summarized(
        self,
        messages: Sequence[Message],
        start: int,
        summary: str,
        tools: Sequence[ToolDefinition],
        request_number: int,
    ) -> tuple[list[Message], ContextCompacted]:
        """Put the summary the :class:`Compact` step asked for in place of what it sums up."""
        assert self._pending is not None
        cut, _ = self._pending
        self._pending = None
        self._summarized_at = request_number
        estimate = self._estimator(tools)
        before = estimate(messages)
        result, removed = apply_summary(list(messages), start, cut, summary)
        after = estimate(result)
        event = self._record(["summarize"], before, removed, after)
        assert event is not None
        return result, event

    def provider_compacted(
        self, messages: list[Message], start: int, tools: Sequence[ToolDefinition]
    ) -> ContextCompacted | None:
        """The provider's own compaction in the reply just appended (``messages[-1]``, an
        assistant message holding the provider's summary block): the messages before it go
        from the working list (the provider ignores them; kova's estimate then counts what
        is sent), and the event says so. ``None`` (nothing changed): no such block."""
        reply = messages[-1]
        if not any(
            isinstance(block, Text)
            and not block.text
            and block.provider_metadata is not None
            and not COMPACTION_KEYS.isdisjoint(block.provider_metadata)
            for block in reply.content
        ):
            return None
        estimate = self._estimator(tools)
        before = estimate(messages)
        removed = len(messages) - 1 - start
        messages[start:-1] = [_provider_note()]
        self._cache = None
        return self._record(["provider_compaction"], before, removed, estimate(messages))

    def compaction(self, history: Sequence[Message]) -> Compaction | None:
        """What the turn's compaction did, with ``history`` (the compacted working messages
        without the system prompt); ``None`` if nothing was compacted."""
        if self._before is None:
            return None
        return Compaction(
            strategy="+".join(self._ran),
            tokens_before=self._before,
            tokens_after=self._after,
            removed=self._removed,
            history=tuple(history),
        )

    def _record(
        self, ran: list[str], before: int, removed: int, after: int | None
    ) -> ContextCompacted | None:
        if not ran:
            return None
        for name in ran:
            if name not in self._ran:
                self._ran.append(name)
        if self._before is None:
            self._before = before
        self._removed += removed
        if after is not None:
            self._after = after
        return ContextCompacted(
            strategy="+".join(ran),
            tokens_before=before,
            tokens_after=before if after is None else after,
            removed=removed,
        )

    def to_dict(self) -> dict[str, JSONValue]:
        """What a saved turn records (the policy itself comes from the agent)."""
        return {
            "limit": self.limit,
            "scale": self._scale,
            "sent": self._sent,
            "ran": list(self._ran),
            "before": self._before,
            "after": self._after,
            "removed": self._removed,
            "pending": None if self._pending is None else list(self._pending),
            "summarized_at": self._summarized_at,
            "overflowed_at": self._overflowed_at,
        }

    def restore(self, data: Mapping[str, object]) -> None:
        """Take back what :meth:`to_dict` recorded.

        Raises:
            SerializationError: a field of the wrong type.
        """
        try:
            scale = data["scale"]
            sent = data["sent"]
            ran = data["ran"]
            before = data["before"]
            after = data["after"]
            removed = data["removed"]
            pending = data["pending"]
            summarized_at = data["summarized_at"]
            overflowed_at = data.get("overflowed_at", -1)
        except KeyError as exc:
            raise SerializationError(f"stored compaction state lacks {exc}") from None
        if (
            not isinstance(scale, float | int)
            or isinstance(scale, bool)
            or not 1.0 <= scale <= 4.0
            or not (sent is None or _is_int(sent))
            or not isinstance(ran, list)
            or not all(isinstance(name, str) for name in ran)
            or not (before is None or _is_int(before))
            or not _is_int(after)
            or not _is_int(removed)
            or not _is_int(summarized_at)
            or not _is_int(overflowed_at)
            or not (
                pending is None
                or (isinstance(pending, list) and len(pending) == 2 and all(map(_is_int, pending)))
            )
        ):
            raise SerializationError("stored compaction state has a field of the wrong type")
        self._scale = float(scale)
        self._sent = sent  # type: ignore[assignment]
        self._ran = list(ran)
        self._before = before  # type: ignore[assignment]
        self._after = after  # type: ignore[assignment]
        self._removed = removed  # type: ignore[assignment]
        self._pending = None if pending is None else (pending[0], pending[1])
        self._summarized_at = summarized_at  # type: ignore[assignment]
        self._overflowed_at = overflowed_at  # type: ignore[assignment]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
