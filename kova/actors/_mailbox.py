"""Mailboxes and the one-shot request envelopes that travel through them.

A :class:`Mailbox` is a bounded trio memory channel plus the actor's name. It belongs to the
supervisor's *child slot*, not to one actor instance: a restarted instance reads the same
mailbox, which is why an :class:`~kova.actors.ActorRef` stays valid across restarts.

Requests carry their own reply slot (:class:`Request`): an event, the outcome, and a
:class:`trio.CancelScope` the actor enters while serving it. The caller cancels that scope when
it is itself cancelled, which is how cancellation crosses the actor boundary.
"""

from __future__ import annotations

import enum
from typing import Any

import outcome
import trio

from .._errors import MailboxClosed

__all__ = ["DEFAULT_MAILBOX_SIZE", "Mailbox", "Request", "RequestKind"]

DEFAULT_MAILBOX_SIZE = 16
"""Messages a mailbox holds before senders wait (``send``) or fail (``cast``)."""


class RequestKind(enum.Enum):
    CALL = "call"
    CAST = "cast"
    STREAM = "stream"


class _State(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    ABANDONED = "abandoned"
    DONE = "done"


class Request:
    """One message in a mailbox, with its reply slot. Internal to the actor runtime.

    The caller and the serving actor task share this object, and only in a fixed protocol:
    the actor moves it ``QUEUED -> RUNNING -> DONE``; a caller cancelled while it is still
    ``QUEUED`` marks it ``ABANDONED`` and the actor skips it. Both run on one trio thread, so
    each step is atomic between checkpoints and no lock is needed.

    A plain slotted class, and its cancel scope made on first use: every call builds one, and
    a call answered by ``handle_now`` (or abandoned) never needs the scope.
    """

    __slots__ = (
        "_scope",
        "consumer_gone",
        "done",
        "kind",
        "payload",
        "result",
        "state",
        "stream_send",
    )

    def __init__(
        self,
        kind: RequestKind,
        payload: Any,
        stream_send: trio.MemorySendChannel[Any] | None = None,
    ) -> None:
        self.kind = kind
        self.payload = payload
        self.stream_send = stream_send
        self._scope: trio.CancelScope | None = None
        self.done = trio.Event()
        self.result: outcome.Outcome[Any] | None = None
        self.state = _State.QUEUED
        # The stream consumer left; a BrokenResourceError from stream_send is expected.
        self.consumer_gone = False

    @property
    def scope(self) -> trio.CancelScope:
        """The scope the actor serves the request in, made on first use (a call answered at
        once never needs one); the caller cancels it to cancel the work, before or after the
        actor entered it."""
        scope = self._scope
        if scope is None:
            scope = self._scope = trio.CancelScope()
        return scope

    def __repr__(self) -> str:
        return f"Request(kind={self.kind!r}, payload={self.payload!r}, state={self.state!r})"

    def start(self) -> bool:
        """Claim the request for serving. False if the caller already gave up on it."""
        if self.state is not _State.QUEUED:
            return False
        self.state = _State.RUNNING
        return True

    def abandon(self) -> bool:
        """Caller side: give up on a request the actor has not started. True if abandoned."""
        if self.state is _State.QUEUED:
            self.state = _State.ABANDONED
            if self.stream_send is not None:
                self.stream_send.close()
            return True
        return False

    def finish(self, result: outcome.Outcome[Any]) -> None:
        """Deliver the reply (first one wins) and wake the caller."""
        if self.state is _State.DONE:
            return
        self.state = _State.DONE
        self.result = result
        if self.stream_send is not None:
            self.stream_send.close()
        self.done.set()

    def fail(self, error: BaseException) -> None:
        self.finish(outcome.Error(error))


class Mailbox:
    """A bounded mailbox: the send side used by refs, the receive side read by the actor.

    Closing the mailbox closes the *send* side only: senders get
    :class:`~kova.MailboxClosed`, while the actor still receives what was queued and then sees
    the end of the channel. That is the "ask nicely" half of an orderly stop.
    """

    __slots__ = ("_closed", "_receive", "_send", "name", "size")

    def __init__(self, name: str, size: int = DEFAULT_MAILBOX_SIZE) -> None:
        if size < 0:
            raise ValueError(f"mailbox size must be >= 0, got {size}")
        self.name = name
        self.size = size
        self._send, self._receive = trio.open_memory_channel[Request](size)
        self._closed = False

    def __repr__(self) -> str:
        return f"Mailbox(name={self.name!r}, size={self.size})"

    @property
    def receive_channel(self) -> trio.MemoryReceiveChannel[Request]:
        """The actor's side. Not closed by actors: the next incarnation reads it too."""
        return self._receive

    @property
    def closed(self) -> bool:
        return self._closed

    async def put(self, request: Request) -> None:
        """Queue ``request``, waiting for room.

        Raises:
            MailboxClosed: the actor is stopped or stopping.
        """
        try:
            await self._send.send(request)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise MailboxClosed(self.name) from None

    def offer(self, request: Request) -> bool:
        """Queue ``request`` if there is room now; False if the mailbox is full. Never a
        checkpoint: the caller must await something (the reply) right after.

        Raises:
            MailboxClosed: the actor is stopped or stopping.
        """
        try:
            self._send.send_nowait(request)
        except trio.WouldBlock:
            return False
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise MailboxClosed(self.name) from None
        return True

    def put_nowait(self, request: Request) -> None:
        """Queue ``request`` now.

        Raises:
            trio.WouldBlock: the mailbox is full.
            MailboxClosed: the actor is stopped or stopping.
        """
        if not self.offer(request):
            raise trio.WouldBlock

    def statistics(self) -> trio.MemoryChannelStatistics:
        return self._send.statistics()

    def close(self) -> None:
        """Refuse new messages; queued ones are still delivered to the actor."""
        self._closed = True
        self._send.close()

    def drain(self) -> int:
        """Fail every queued request with :class:`~kova.MailboxClosed`; return how many.

        Called by the supervisor once no instance will read the mailbox again.
        """
        self.close()
        count = 0
        while True:
            try:
                request = self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break
            count += 1
            if request.start():
                request.fail(MailboxClosed(self.name))
        self._receive.close()
        return count
