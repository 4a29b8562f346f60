"""Actors and the refs that reach them.

An :class:`Actor` is a task that owns its state and serves messages from its
:class:`~kova.actors.Mailbox`. Other tasks never touch that state: they hold an
:class:`ActorRef` and ``call`` (request/reply), ``cast`` / ``send`` (fire-and-forget) or
``stream`` (a reply that is a sequence of items).

Two rules shape everything here:

* **Cancellation crosses the boundary.** Every call or stream carries its own
  :class:`trio.CancelScope`, which the actor enters while serving it. When the caller is
  cancelled it cancels that scope and waits (shielded) until the actor-side work has unwound,
  so ``call()`` re-raises :class:`trio.Cancelled` only after the handler's ``finally`` blocks
  ran. A request the actor has not started yet is simply abandoned.
* **Request errors are not crashes.** A handler that raises a :class:`~kova.KovaError` (see
  :meth:`Actor.is_request_error`) fails that one request; the actor carries on. Anything else
  is a bug or a broken resource: the actor crashes, every caller still waiting gets
  :class:`~kova.ActorFailed` raised from the original error, and the supervisor decides what
  happens next (it logs the crash, once).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, overload

import outcome
import trio

from .._errors import ActorError, ActorFailed, KovaError, MailboxClosed
from .._log import get_logger
from .._record import Record, set_field
from ._mailbox import Mailbox, Request, RequestKind
from ._messages import Call, UnknownMessage

__all__ = ["LATER", "Actor", "ActorRef", "StreamReceiver"]

log = get_logger(__name__)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from contextlib import AbstractAsyncContextManager


_BURST = 256
"""Queued messages an actor takes in a row before it yields to the scheduler."""


class _Later:
    __slots__ = ()

    def __repr__(self) -> str:
        return "kova.actors.LATER"


LATER: Any = _Later()
"""What :meth:`Actor.handle_now` returns for a call it cannot answer at once: the call is then
served by :meth:`Actor.handle_call` as usual."""


class _RunState:
    """What one incarnation of an actor knows about itself while it runs."""

    __slots__ = (
        "background_scope",
        "crash",
        "crash_reported",
        "in_flight",
        "loop_scope",
        "name",
        "nursery",
        "receiving",
        "stopping",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.nursery: trio.Nursery | None = None
        self.loop_scope = trio.CancelScope()
        self.background_scope = trio.CancelScope()
        self.receiving = False
        self.stopping = False
        self.crash: Exception | None = None
        self.crash_reported = False  # the crash was handed to a caller (as ActorFailed)
        self.in_flight: set[Request] = set()

    def __repr__(self) -> str:
        return f"_RunState(name={self.name!r})"


class Actor:
    """Base class of every actor. Override the hooks you need.

    Subclasses keep their state in ordinary attributes: only the actor's own tasks touch it.
    A supervisor builds a fresh instance for every (re)start through a factory, so state does
    not survive a crash.

    Class attributes:
        concurrent: when true (the default), each call and stream is served in its own child
            task of the actor's nursery, so a slow request never blocks the mailbox. When
            false, messages are served one at a time in mailbox order. Casts are always
            served in mailbox order by the actor's main task; keep them quick.
    """

    concurrent: ClassVar[bool] = True

    _kova_state: _RunState | None = None

    # -- hooks ----------------------------------------------------------------------------

    async def handle_call(self, message: Any) -> Any:
        """Answer one ``ref.call(message)``. Runs inside the request's cancel scope."""
        raise UnknownMessage(self.name, message)

    def handle_now(self, message: Any) -> Any:
        """Answer one ``ref.call(message)`` at once, in the actor's own task, or return
        :data:`LATER`.

        The quick path for calls that need no waiting (a lookup, an admission decision):
        the reply goes back without a task or a cancel scope of its own, which is most of
        what a call costs. It is plain (not async), so it must not block; whatever it
        returns other than :data:`LATER` is the reply. It raises like
        :meth:`handle_call`: a request error fails this call only, anything else crashes
        the actor. Not called unless overridden (then for every call, before
        :meth:`handle_call`).
        """
        return LATER

    async def handle_cast(self, message: Any) -> None:
        """Handle one ``ref.cast(message)`` / ``ref.send(message)``; nobody waits for it."""
        raise UnknownMessage(self.name, message, kind="cast")

    async def handle_stream(self, message: Any, send: trio.MemorySendChannel[Any]) -> None:
        """Produce the items of one ``ref.stream(message)`` into ``send``.

        ``await send.send(item)`` waits while the consumer is behind (backpressure). The
        framework closes ``send`` when this returns. If the consumer leaves early, this is
        cancelled.
        """
        raise UnknownMessage(self.name, message, kind="stream")

    def resources(self) -> AbstractAsyncContextManager[None]:
        """Resources held for the life of this incarnation (an HTTP pool, a session...).

        Entered in the actor's own task before it reports started, left when it stops.
        """
        return contextlib.nullcontext()

    async def background(self) -> None:
        """Optional work that runs for the life of the incarnation, beside the mailbox
        (watching a connection, a periodic flush). Started after the actor reports started;
        returning is fine, raising anything crashes the actor. Cancelled when the actor stops
        reading its mailbox. Not started unless overridden."""

    def is_request_error(self, exc: BaseException) -> bool:
        """Whether ``exc`` fails only the request that raised it (default: any
        :class:`~kova.KovaError`, or an exception group made only of them)."""
        if isinstance(exc, KovaError):
            return True
        if isinstance(exc, BaseExceptionGroup):
            _matched, rest = exc.split(KovaError)
            return rest is None
        return False

    @property
    def crash_reported(self) -> bool:
        """Whether this incarnation's crash already reached a caller as
        :class:`~kova.ActorFailed` (so a supervisor need not print its traceback again)."""
        state = self._kova_state
        return state is not None and state.crash_reported

    # -- running --------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The name of the mailbox this instance serves (the class name before it runs)."""
        state = self._kova_state
        return state.name if state is not None else type(self).__name__

    def request_stop(self) -> None:
        """Stop reading the mailbox; ``run`` returns normally once in-flight work is done.

        Call it from a handler. A ``transient`` child that stops this way is not restarted.
        """
        state = self._kova_state
        if state is None:
            return
        state.stopping = True
        if state.receiving:
            state.loop_scope.cancel(reason="actor requested stop")

    async def run(
        self,
        mailbox: Mailbox,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve ``mailbox`` until its senders are closed (or :meth:`request_stop`).

        Enters :meth:`resources`, reports started, then serves messages. On a crash the
        original exception is raised (after every waiting caller got ``ActorFailed``).
        The mailbox is not closed here: the supervisor owns it, and a restarted instance
        reads it next.

        Raises:
            Exception: whatever crashed a handler (not a request error).
        """
        state = _RunState(name=mailbox.name)
        # object.__setattr__: subclasses may be frozen attrs classes.
        object.__setattr__(self, "_kova_state", state)
        escaped: Exception | None = None
        try:
            async with self.resources(), trio.open_nursery() as nursery:
                state.nursery = nursery
                task_status.started()
                if type(self).background is not Actor.background:
                    nursery.start_soon(self._run_background, state)
                with state.loop_scope:
                    await self._serve_mailbox(mailbox.receive_channel, state)
                # The mailbox is done: in-flight requests may finish, background work stops.
                state.background_scope.cancel(reason="actor stopping")
        except Exception as exc:
            # A failure outside any handler (resources, a nursery error): still a crash.
            escaped = exc
            raise
        finally:
            cause = state.crash if state.crash is not None else escaped
            for request in list(state.in_flight):
                failure: ActorError
                if cause is not None:
                    failure = ActorFailed(state.name, f"{type(cause).__name__}: {cause}")
                    failure.__cause__ = cause
                    state.crash_reported = True
                else:
                    failure = MailboxClosed(state.name)
                request.fail(failure)
            state.in_flight.clear()
        if state.crash is not None:
            raise state.crash

    async def _serve_mailbox(
        self, receive: trio.MemoryReceiveChannel[Request], state: _RunState
    ) -> None:
        nursery = state.nursery
        assert nursery is not None
        concurrent = self.concurrent
        now = self.handle_now if type(self).handle_now is not Actor.handle_now else None
        burst = 0
        while not state.stopping and state.crash is None:
            # Take what is already queued without a checkpoint (trio's receive() yields to
            # the scheduler even when a message is waiting): a burst of requests is admitted
            # in one scheduler pass instead of one per pass. With 1,000 streams starting at
            # once, one admission per pass let only about 32 run at a time, since each pass
            # also serves every running stream. A real checkpoint every _BURST messages
            # keeps the actor fair to the rest of the program.
            request = None
            if burst < _BURST:
                # Without yielding: raises Cancelled only if the actor is being stopped or
                # restarted, so that what is still queued stays queued for the next instance.
                await trio.lowlevel.checkpoint_if_cancelled()
                try:
                    request = receive.receive_nowait()
                    burst += 1
                except trio.WouldBlock:
                    pass
                except (trio.EndOfChannel, trio.ClosedResourceError):
                    return
            if request is None:
                burst = 0
                state.receiving = True
                try:
                    request = await receive.receive()
                except (trio.EndOfChannel, trio.ClosedResourceError):
                    return
                finally:
                    state.receiving = False
            if not request.start():
                continue  # the caller gave up before we got to it
            if request.kind is RequestKind.CAST:
                await self._serve_cast(request, state)
                continue
            if now is not None and request.kind is RequestKind.CALL:
                try:
                    value = now(request.payload)
                except Exception as exc:
                    if self.is_request_error(exc):
                        request.fail(exc)
                        continue
                    # ``run`` fails it with ActorFailed once the actor has unwound.
                    state.in_flight.add(request)
                    self._crash(exc, state)
                    return
                if value is not LATER:
                    request.finish(outcome.Value(value))
                    continue
            state.in_flight.add(request)
            if concurrent:
                nursery.start_soon(self._serve_request, request, state)
            else:
                await self._serve_request(request, state)

    async def _run_background(self, state: _RunState) -> None:
        try:
            with state.background_scope:
                await self.background()
        except Exception as exc:
            self._crash(exc, state)

    def _crash(self, exc: Exception, state: _RunState) -> None:
        if state.crash is None:
            state.crash = exc
        assert state.nursery is not None
        state.nursery.cancel_scope.cancel(reason=f"actor {state.name!r} crashed")

    async def _serve_cast(self, request: Request, state: _RunState) -> None:
        try:
            await self.handle_cast(request.payload)
        except Exception as exc:
            if not self.is_request_error(exc):
                self._crash(exc, state)
                return
            # Nobody waits for a cast, so this is the one place that can report it.
            log.warning("actor.cast_failed", actor=state.name, exc_info=exc)
        request.finish(outcome.Value(None))

    async def _serve_request(self, request: Request, state: _RunState) -> None:
        value: Any = None
        try:
            with request.scope:
                if request.kind is RequestKind.CALL:
                    value = await self.handle_call(request.payload)
                else:
                    assert request.stream_send is not None
                    await self.handle_stream(request.payload, request.stream_send)
        except Exception as exc:
            if request.consumer_gone and isinstance(exc, trio.BrokenResourceError):
                pass  # the consumer left between our checkpoints: a normal end
            elif self.is_request_error(exc):
                state.in_flight.discard(request)
                request.fail(exc)
                return
            else:
                if request.stream_send is not None:
                    request.stream_send.close()
                # Left in ``in_flight``: ``run`` fails it with ActorFailed once all
                # sibling handlers have unwound.
                self._crash(exc, state)
                return
        # A trio.Cancelled from the actor's own nursery (crash or stop) propagates and leaves
        # the request in ``in_flight``. If only the request's scope was cancelled, the caller
        # is waiting just for ``done`` and re-raises its own Cancelled, ignoring the value.
        state.in_flight.discard(request)
        request.finish(outcome.Value(value))


class StreamReceiver(trio.abc.ReceiveChannel[Any]):
    """The consumer's end of :meth:`ActorRef.stream`: a receive channel whose iteration
    raises the producer's request error (or :class:`~kova.ActorFailed`) instead of ending
    quietly."""

    def __init__(self, channel: trio.MemoryReceiveChannel[Any], request: Request) -> None:
        self._channel = channel
        self._request = request

    async def receive(self) -> Any:
        """The next item.

        Raises:
            trio.EndOfChannel: the producer finished normally.
            KovaError: the producer's request error; ``ActorFailed`` if the actor crashed.
        """
        try:
            return await self._channel.receive()
        except trio.EndOfChannel:
            await self._request.done.wait()
            result = self._request.result
            if not isinstance(result, outcome.Error):
                raise
        # Raised outside the ``except`` so the error does not drag EndOfChannel along as
        # its context; its own ``__cause__`` (the crash, for ActorFailed) is kept.
        raise result.error

    def receive_nowait(self) -> Any:
        return self._channel.receive_nowait()

    def statistics(self) -> trio.MemoryChannelStatistics:
        return self._channel.statistics()

    def close(self) -> None:
        self._channel.close()

    async def aclose(self) -> None:
        self._channel.close()
        await trio.lowlevel.checkpoint()


_R = TypeVar("_R")


class ActorRef(Record):
    """The handle to an actor. Cheap to copy; valid across restarts of the actor (it names
    the supervisor's child slot and its mailbox, not one instance)."""

    _mailbox: Mailbox

    def __init__(self, mailbox: Mailbox) -> None:
        set_field(self, "_mailbox", mailbox)

    @property
    def name(self) -> str:
        return self._mailbox.name

    @property
    def queued(self) -> int:
        """Messages waiting in the actor's mailbox now (the mailbox depth metric)."""
        return self._mailbox.statistics().current_buffer_used

    @overload
    async def call(self, message: Call[_R]) -> _R: ...

    @overload
    async def call(self, message: object) -> Any: ...

    async def call(self, message: object) -> Any:
        """Send ``message`` and wait for the reply (typed ``R`` for a :class:`Call` ``[R]``).

        Waits for mailbox room first (backpressure).

        On cancellation: if the actor has not started the request it is dropped; otherwise
        the actor-side work is cancelled (its request scope) and ``trio.Cancelled`` is
        re-raised only after that work has finished, its ``finally`` blocks included.

        Raises:
            MailboxClosed: the actor is stopped, or stopped before replying.
            ActorFailed: the actor crashed while serving it (``__cause__`` is the crash).
            KovaError: the handler's own request error.
        """
        request = Request(kind=RequestKind.CALL, payload=message)
        # Queued without a scheduler pass when there is room (waiting for the reply is the
        # checkpoint); a caller already cancelled does not queue it at all.
        await trio.lowlevel.checkpoint_if_cancelled()
        if not self._mailbox.offer(request):
            await self._mailbox.put(request)
        await _wait_for(request)
        assert request.result is not None
        return request.result.unwrap()

    def cast(self, message: Any) -> None:
        """Queue ``message`` without waiting; nobody hears how it went.

        Raises:
            trio.WouldBlock: the mailbox is full (use :meth:`send` to wait for room).
            MailboxClosed: the actor is stopped.
        """
        self._mailbox.put_nowait(Request(kind=RequestKind.CAST, payload=message))

    async def send(self, message: Any) -> None:
        """Like :meth:`cast`, but waits for mailbox room instead of raising.

        Raises:
            MailboxClosed: the actor is stopped.
        """
        await self._mailbox.put(Request(kind=RequestKind.CAST, payload=message))

    @contextlib.asynccontextmanager
    async def stream(self, message: Any, *, buffer: int = 8) -> AsyncIterator[StreamReceiver]:
        """``async with ref.stream(msg) as items: async for item in items: ...``

        The actor's :meth:`Actor.handle_stream` produces into a channel of ``buffer`` items,
        so a slow consumer slows the producer down. Leaving the block early, or cancelling
        the consumer, cancels the producer; the block exits only after it has stopped.

        Raises:
            MailboxClosed: the actor is stopped (on entry), or stopped mid-stream.
            ActorFailed: the actor crashed mid-stream (from iteration).
            KovaError: the producer's request error (from iteration).
        """
        send, receive = trio.open_memory_channel[Any](buffer)
        request = Request(kind=RequestKind.STREAM, payload=message, stream_send=send)
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            if not self._mailbox.offer(request):
                await self._mailbox.put(request)
        except BaseException:
            send.close()
            receive.close()
            raise
        try:
            yield StreamReceiver(receive, request)
        finally:
            request.consumer_gone = True
            if not request.abandon() and not request.done.is_set():
                request.scope.cancel(reason="stream consumer left")
                receive.close()
                with trio.CancelScope(shield=True):
                    await request.done.wait()
            receive.close()


async def _wait_for(request: Request) -> None:
    try:
        await request.done.wait()
    except trio.Cancelled:
        if not request.abandon():
            request.scope.cancel(reason="caller cancelled")
            with trio.CancelScope(shield=True):
                await request.done.wait()
        raise
