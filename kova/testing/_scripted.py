"""Scripted providers: deterministic models for tests, with no network.

:class:`ScriptedProvider` answers from a :class:`~kova.testing.Script` (replies in order, or a
function of the request); :class:`FunctionProvider` is the same over a function, like
pydantic-ai's ``FunctionModel``. Both implement the :class:`~kova.providers.Provider`
protocol, so they run through the same provider actor as real providers::

    provider = ScriptedProvider([reply_tool_calls(("add", {"a": 1, "b": 2})), reply_text("3")])
    async with AgentBuilder().provider(provider).build() as agent:
        response = await agent.run([Message.user("1 + 2?")])
    assert provider.requests[1].messages[-1].content[0].content == "3"  # the tool result
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

from .._errors import KovaConnectionError, ProviderError, StreamError
from .._models import (
    ChatRequest,
    ErrorEvent,
    ModelInfo,
    ModelResponse,
    StreamEvent,
)
from ..providers._base import heuristic_count_tokens
from ._script import (
    ErrorReply,
    Script,
    ScriptFunction,
    ScriptLike,
    ScriptRequest,
    StreamReply,
    as_script,
    stream_events,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from ..providers._base import EventBatches

__all__ = ["FunctionProvider", "ScriptedProvider"]


class ScriptedProvider:
    """A provider that answers from a script.

    Replies map to behaviour as a real provider would show it:

    * a :class:`~kova.providers.ModelResponse` is returned, or streamed as the events
      :func:`~kova.testing.stream_events` derives from it;
    * an :class:`~kova.testing.ErrorReply` raises ``ProviderError.from_status(...)`` (so a 429
      is a :class:`~kova.RateLimited` carrying ``retry_after``); for a stream, on entering;
    * a :class:`~kova.testing.StreamReply` streams its events; with ``cut_after=n`` the
      stream raises :class:`~kova.StreamError` after ``n`` events (a non-streaming call with a
      cut raises :class:`~kova.KovaConnectionError`). An :class:`~kova.providers.ErrorEvent` in the
      events raises :class:`~kova.StreamError` where it occurs.

    Streams arrive in batches of ``batch_size`` events, like events decoded from one network
    read. Every request is recorded, in order, in :attr:`requests`.

    Args:
        script: a :class:`~kova.testing.Script`, a list of replies, or a function of a
            :class:`~kova.testing.ScriptRequest` returning the reply (sync or async).
        name: the provider's name (in errors and logs).
        model: the id :meth:`list_models` reports.
        batch_size: events per streamed batch.
        latency: virtual seconds to wait before answering each request.
        batch_delay: virtual seconds to wait before each streamed batch.
    """

    def __init__(
        self,
        script: ScriptLike,
        *,
        name: str = "scripted",
        model: str = "scripted",
        batch_size: int = 4,
        latency: float = 0.0,
        batch_delay: float = 0.0,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.script = as_script(script)
        self._name = name
        self.model = model
        self.batch_size = batch_size
        self.latency = latency
        self.batch_delay = batch_delay
        self.open_count = 0
        """How many ``open()`` blocks are active right now."""

    @property
    def name(self) -> str:
        return self._name

    @property
    def requests(self) -> list[ScriptRequest]:
        """Every request so far, in order (shared with :attr:`script`)."""
        return self.script.requests

    @asynccontextmanager
    async def open(self) -> AsyncIterator[None]:
        """No resources to hold; counts active blocks in :attr:`open_count`."""
        self.open_count += 1
        try:
            yield
        finally:
            self.open_count -= 1

    async def _reply(self, request: ChatRequest, *, stream: bool) -> ModelResponse | StreamReply:
        reply = await self.script.next_reply(ScriptRequest(request=request, stream=stream))
        if self.latency:
            await trio.sleep(self.latency)
        else:
            await trio.lowlevel.checkpoint()
        if isinstance(reply, ErrorReply):
            raise ProviderError.from_status(
                reply.status_code,
                reply.message,
                retry_after=reply.retry_after,
                provider=self.name,
                error_type=reply.error_type,
            )
        return reply

    async def chat_completion(self, request: ChatRequest) -> ModelResponse:
        """The next scripted reply.

        Raises:
            ProviderError: the reply is an ``ErrorReply``.
            KovaConnectionError: the reply is a ``StreamReply`` with a cut.
        """
        reply = await self._reply(request, stream=False)
        if isinstance(reply, StreamReply):
            if reply.cut_after is not None:
                raise KovaConnectionError(f"{self.name}: connection dropped (scripted cut)")
            return reply.response
        return reply

    @asynccontextmanager
    async def chat_completion_stream(self, request: ChatRequest) -> AsyncIterator[EventBatches]:
        """The next scripted reply as batches of events.

        Raises:
            ProviderError: on entering, the reply is an ``ErrorReply``.
            StreamError: from iteration, at a scripted cut or error event.
        """
        reply = await self._reply(request, stream=True)
        events = stream_events(reply)
        cut_after = reply.cut_after if isinstance(reply, StreamReply) else None
        yield _ScriptedBatches(
            events,
            cut_after=cut_after,
            batch_size=self.batch_size,
            batch_delay=self.batch_delay,
            provider=self.name,
        )

    async def list_models(self) -> list[ModelInfo]:
        await trio.lowlevel.checkpoint()
        return [ModelInfo(id=self.model, owned_by=self.name)]

    async def count_tokens(self, request: ChatRequest) -> int:
        await trio.lowlevel.checkpoint()
        return heuristic_count_tokens(request.messages, request.tools)


class _ScriptedBatches:
    """An async iterator of event batches that honours cuts and error events."""

    def __init__(
        self,
        events: Sequence[StreamEvent],
        *,
        cut_after: int | None,
        batch_size: int,
        batch_delay: float,
        provider: str,
    ) -> None:
        self._events = events
        self._end = len(events) if cut_after is None else min(cut_after, len(events))
        self._cut = cut_after is not None
        self._position = 0
        self._batch_size = batch_size
        self._batch_delay = batch_delay
        self._provider = provider

    def __aiter__(self) -> _ScriptedBatches:
        return self

    async def __anext__(self) -> Sequence[StreamEvent]:
        if self._batch_delay:
            await trio.sleep(self._batch_delay)
        else:
            await trio.lowlevel.checkpoint()
        start = self._position
        if start >= self._end:
            if self._cut:
                self._cut = False
                raise StreamError(f"{self._provider}: stream cut after {self._end} events")
            raise StopAsyncIteration
        stop = min(start + self._batch_size, self._end)
        batch = list(self._events[start:stop])
        for offset, event in enumerate(batch):
            if isinstance(event, ErrorEvent):
                if offset:
                    # deliver what came before the error first, then raise on the next read
                    self._position = start + offset
                    return batch[:offset]
                self._position = self._end
                self._cut = False
                raise StreamError(event.message, error_type=event.error_type or None)
        self._position = stop
        return batch


class FunctionProvider(ScriptedProvider):
    """A scripted provider whose every reply comes from ``function(request)``.

    ``function`` takes a :class:`~kova.testing.ScriptRequest` (messages, tools, config,
    whether it streams) and returns a reply (a ``ModelResponse``, ``ErrorReply`` or
    ``StreamReply``), or an awaitable of one.
    """

    def __init__(
        self,
        function: ScriptFunction,
        *,
        name: str = "function",
        model: str = "scripted",
        batch_size: int = 4,
        latency: float = 0.0,
        batch_delay: float = 0.0,
    ) -> None:
        if not callable(function):
            raise TypeError(
                f"FunctionProvider takes a function of a ScriptRequest, not "
                f"{type(function).__name__}; use ScriptedProvider for a list of replies"
            )
        super().__init__(
            Script(function),
            name=name,
            model=model,
            batch_size=batch_size,
            latency=latency,
            batch_delay=batch_delay,
        )
