"""One trio guest run per asyncio loop: where kova lives inside an asyncio application.

kova is trio code. Under asyncio it runs as a trio *guest* (``trio.lowlevel.start_guest_run``):
trio's scheduler takes turns with asyncio's on the loop's own thread, and only trio's wait
for I/O runs in a helper thread. Every caller on one loop shares one guest run,
:class:`AsyncioRuntime`; it starts on first use (or in ``async with open_runtime():``) and
ends before the loop stops.

**Crossing over.** asyncio code and trio code run on the same thread, one at a time, so they
share plain Python objects without locks. asyncio starts work on the trio side by calling
trio's synchronous API directly (``nursery.start_soon``, ``CancelScope.cancel``,
``Event.set``): trio supports this in guest mode (a reschedule or a deadline change made by
the host wakes the guest, see ``Runner.force_guest_tick_asap``), and it costs no round trip
through trio's entry queue. The trio side answers by resolving an asyncio future, which is
equally safe on the loop's thread.

**Cancellation, both ways.** An asyncio caller that is cancelled cancels its job's trio
cancel scope and then waits, deaf to further cancellation, until the trio task has stopped
everything it started; only then does it see ``CancelledError``. A trio task awaiting an
asyncio coroutine (:meth:`AsyncioRuntime.run_on_host`, for ``@tool(runs_on="asyncio")``)
cancels the asyncio task the same way and waits for it.

**Errors** cross as themselves: a nursery's group of one is unwrapped (recursively), and
``trio.Cancelled`` never reaches asyncio (a call cancelled from the trio side, because the
runtime or the agent closed under it, raises :class:`~kova.TurnCancelled`).

**Shutdown.** A runtime started on first use is kept by an asyncio task that does nothing
until it is cancelled. ``asyncio.run`` (and uvicorn, and ``asyncio.Runner``) cancel every
task left when the main coroutine ends and run the loop until they finish, so the keeper's
cancellation closes the guest run before the loop closes: no "guest run got abandoned". A
program that closes its loop without cancelling its tasks should use
``async with kova.asyncio.open_runtime():`` around its work instead. If it does not (the loop
closed by hand under a running guest run), the run's callbacks are kept (:class:`_Host`), and
the thread's next start ends that run from the new loop (:func:`_end_orphan`), so that trio
can run in the thread again.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import weakref
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import trio

from ._door import ASYNCIO_HOST
from ._errors import TurnCancelled
from ._groups import lone
from ._log import get_logger

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from contextlib import AbstractAsyncContextManager

    import outcome

__all__ = ["AsyncioRuntime", "current_runtime", "held_open", "open_runtime"]

log = get_logger(__name__)

T = TypeVar("T")

_RUNTIMES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncioRuntime] = (
    weakref.WeakKeyDictionary()
)
"""The guest run of each loop. The one module-level registry in kova, and it has to be one:
"one guest run per loop, shared by every caller" is state of the loop, and a loop has no
place of its own to keep it. An entry lives while its guest run does (removed when the run
finishes); the weak key only matters for a loop dropped with its run unfinished."""


def _split_cancelled(error: BaseException) -> tuple[BaseException | None, BaseException | None]:
    """``error`` split into its trio.Cancelled part and the rest (either may be None)."""
    if isinstance(error, BaseExceptionGroup):
        return error.split(trio.Cancelled)
    if isinstance(error, trio.Cancelled):
        return error, None
    return None, error


def _cancelled_inside(error: BaseException) -> bool:
    """Whether ``error`` is trio.Cancelled, alone or in a group of only Cancelled."""
    if isinstance(error, BaseExceptionGroup):
        return all(_cancelled_inside(inner) for inner in error.exceptions)
    return isinstance(error, trio.Cancelled)


async def wait_to_the_end(future: asyncio.Future[Any]) -> bool:
    """Wait until ``future`` is done, not giving up when the waiting task is cancelled.

    Returns whether the task was cancelled meanwhile (the caller raises ``CancelledError``
    once its own cleanup is over). Used where stopping halfway would leave trio work behind.
    """
    cancelled = False
    while not future.done():
        try:
            await asyncio.wait((future,))
        except asyncio.CancelledError:
            cancelled = True
    return cancelled


class Job(Generic[T]):
    """One piece of trio work started from asyncio: its cancel scope and its outcome."""

    __slots__ = ("done", "finished", "on_finish", "scope", "stopped")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.done: asyncio.Future[T] = loop.create_future()
        """The result or error, for the asyncio side (cancelled if the caller was)."""
        self.scope = trio.CancelScope()
        self.finished = False
        """The trio task has ended: nothing it started is still running."""
        self.stopped: asyncio.Future[None] | None = None
        """Made by an asyncio caller that waits for the end after cancelling."""
        self.on_finish: Callable[[], None] | None = None

    def cancel(self) -> None:
        self.scope.cancel(reason="the asyncio caller was cancelled")

    async def wait(self) -> T:
        """The job's result, as its asyncio caller sees it.

        Raises:
            CancelledError: the caller was cancelled; by then the trio work has stopped.
        """
        try:
            return await self.done
        except asyncio.CancelledError:
            if not self.finished:
                self.cancel()
                await self.until_finished()
            raise

    async def until_finished(self) -> bool:
        """Wait (through cancellation) until the trio task ended; whether it was cancelled."""
        if self.finished:
            return False
        if self.stopped is None:
            self.stopped = self.done.get_loop().create_future()
        return await wait_to_the_end(self.stopped)


class _Host:
    """Where the guest run's callbacks go: onto its loop, and, if that loop was closed under
    the run (``loop.close()`` by hand), kept until :meth:`move_to` another loop of the thread,
    so that the run can be ended there and the thread can run trio again. (``close()`` drops
    the callbacks it had not run yet: kova keeps each until it has run.)"""

    __slots__ = ("_keys", "_lock", "_loop", "_pending")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()  # the I/O wait's thread against move_to
        self._pending: dict[int, Callable[[], object]] = {}
        self._keys = itertools.count()

    def soon(self, callback: Callable[[], object]) -> None:
        """trio's ``run_sync_soon_not_threadsafe``: from the loop's thread, as move_to is."""
        self._schedule(callback, threadsafe=False)

    def soon_threadsafe(self, callback: Callable[[], object]) -> None:
        """trio's ``run_sync_soon_threadsafe``."""
        with self._lock:
            self._schedule(callback, threadsafe=True)

    def _schedule(self, callback: Callable[[], object], *, threadsafe: bool) -> None:
        key = next(self._keys)
        self._pending[key] = callback
        loop = self._loop
        try:
            if threadsafe:
                loop.call_soon_threadsafe(self._run, key)
            else:
                loop.call_soon(self._run, key)
        except RuntimeError:
            if not loop.is_closed():
                del self._pending[key]
                raise
            # Closed: kept for move_to.

    def _run(self, key: int) -> None:
        callback = self._pending.pop(key, None)
        if callback is not None:
            callback()

    def move_to(self, loop: asyncio.AbstractEventLoop) -> None:
        """From now on callbacks go to ``loop`` (the running one, of the same thread), and
        those the closed loop dropped run there."""
        with self._lock:
            self._loop = loop
            for key in list(self._pending):
                loop.call_soon(self._run, key)


def _settle(future: asyncio.Future[Any], error: BaseException | None = None) -> None:
    """Resolve ``future`` (with ``None``, or ``error``), if its loop can still take it: a
    loop closed by hand cannot run the callbacks of its futures any more."""
    if future.done():
        return
    try:
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)
    except RuntimeError:
        if not future.get_loop().is_closed():
            raise


class AsyncioRuntime:
    """The trio guest run kova lives in on one asyncio loop.

    Get it from :func:`open_runtime`, or let :func:`~kova.asyncio.open_agent` start it on
    first use. Agents opened with ``open_agent`` run in it, and :meth:`run` runs any trio
    function there from asyncio.
    """

    __slots__ = (
        "__weakref__",
        "_abandoned",
        "_closing",
        "_finished",
        "_host",
        "_keeper",
        "_loop",
        "_nursery",
        "_ready",
        "_thread",
        "_token",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._thread = threading.get_ident()  # the thread whose trio run this is
        self._ready: asyncio.Future[None] = loop.create_future()
        self._finished: asyncio.Future[None] = loop.create_future()
        self._nursery: trio.Nursery | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._closing = False
        self._host = _Host(loop)
        self._abandoned: asyncio.Future[None] | None = None
        """Set when the run is ended on another loop, its own having been closed by hand."""

    def __repr__(self) -> str:
        state = "closed" if self._finished.done() else "closing" if self._closing else "running"
        return f"<kova.asyncio runtime {state} on {self._loop!r}>"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def closed(self) -> bool:
        """The guest run has finished (or is finishing): no new work is accepted."""
        return self._closing or self._finished.done()

    # -- the guest run -----------------------------------------------------------------

    def _start(self) -> None:
        trio.lowlevel.start_guest_run(
            self._main,
            run_sync_soon_threadsafe=self._host.soon_threadsafe,
            run_sync_soon_not_threadsafe=self._host.soon,
            done_callback=self._done,
            # asyncio owns signal.set_wakeup_fd (for its own signal handlers): trio must
            # not take it over.
            host_uses_signal_set_wakeup_fd=True,
        )

    async def _main(self) -> None:
        ASYNCIO_HOST.set(self)
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._token = trio.lowlevel.current_trio_token()
            if not self._ready.done():
                self._ready.set_result(None)
            await trio.sleep_forever()

    def _done(self, result: outcome.Outcome[None]) -> None:
        if _RUNTIMES.get(self._loop) is self:
            del _RUNTIMES[self._loop]
        self._closing = True
        error = getattr(result, "error", None)
        if self._abandoned is not None:
            # Ended on another loop, its own closed by hand: what its work raised meanwhile
            # (futures of the closed loop refuse their results) is of no one's concern.
            _settle(self._abandoned)
            error = None
        elif error is not None and not _cancelled_inside(error):
            # Only a fault of kova's own reaches here (every job catches what its work
            # raises): say so once, loudly, and fail whoever waits.
            log.error("asyncio.runtime.crashed", error=repr(error))
        for future in (self._ready, self._finished):
            if error is not None and not _cancelled_inside(error):
                _settle(future, RuntimeError(f"the kova guest run crashed: {error!r}"))
                if future.done() and not future.cancelled():
                    future.exception()  # reported above; nobody has to retrieve it
            else:
                _settle(future)

    async def _started(self) -> None:
        if await wait_to_the_end(self._ready):
            raise asyncio.CancelledError
        self._ready.result()

    async def aclose(self) -> None:
        """Cancel whatever still runs in the guest run and wait until it has finished.

        Agents opened in it are closed (their turns cancelled first). Safe to call twice.
        Cancelling the caller does not cut the shutdown short: it is seen once it is over.
        """
        self._closing = True
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel(reason="kova.asyncio runtime closing")
        cancelled = await wait_to_the_end(self._finished)
        if cancelled:
            raise asyncio.CancelledError

    async def _abandon(self, loop: asyncio.AbstractEventLoop) -> bool:
        """End this run from ``loop`` (the running one, of the same thread), its own loop
        having been closed by hand under it: its callbacks move to ``loop``, its work is
        cancelled, and this returns once the run has finished (whether it did within
        :data:`ABANDON_WAIT` seconds)."""
        first = self._abandoned is None
        self._abandoned = finished = loop.create_future()  # on this loop: a later try's own
        self._host.move_to(loop)
        if first:
            self._closing = True
            if self._keeper is not None:
                # It can never run again (its loop is closed): not worth a warning at exit.
                self._keeper._log_destroy_pending = False  # type: ignore[attr-defined]
            if self._nursery is not None:
                self._nursery.cancel_scope.cancel(reason="its asyncio loop was closed by hand")
        done, _ = await asyncio.wait((finished,), timeout=ABANDON_WAIT)
        return bool(done)

    async def _keep(self) -> None:
        """Held by a runtime started on first use: closes it when the loop's owner cancels
        the tasks left at the end (``asyncio.run``, ``asyncio.Runner``, uvicorn)."""
        try:
            await asyncio.shield(self._finished)
        except asyncio.CancelledError:
            await self.aclose()
            raise

    # -- jobs -------------------------------------------------------------------------

    def nursery(self) -> trio.Nursery:
        """Where jobs start (the guest run's root nursery)."""
        if self._nursery is None or self.closed:
            raise RuntimeError("this kova.asyncio runtime is closed")
        return self._nursery

    def spawn(
        self,
        nursery: trio.Nursery,
        function: Callable[..., Awaitable[T]],
        *args: Any,
    ) -> Job[T]:
        """Start ``function(*args)`` as a trio task in ``nursery`` (of this run); from asyncio."""
        job: Job[T] = Job(self._loop)
        nursery.start_soon(_drive, job, function, args, name=function)
        return job

    async def run(self, function: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Await the trio function ``function(*args)`` in this guest run, from asyncio.

        Returns:
            What it returned.

        Raises:
            Whatever it raised, as itself (a group of one unwrapped).
            TurnCancelled: the runtime closed while it ran.
            CancelledError: the caller was cancelled; the trio work was cancelled and has
                stopped by then.
        """
        return await self.spawn(self.nursery(), function, *args).wait()

    # -- asyncio coroutines awaited from trio -----------------------------------------

    async def run_on_host(self, function: Callable[[], Awaitable[T]]) -> T:
        """Await ``function()`` as an asyncio task on this loop, from a trio task.

        Cancelling the trio caller cancels the asyncio task and waits until it ended.

        Raises:
            Whatever the coroutine raised. RuntimeError if it was cancelled by someone else
            than this caller (the loop shutting down, say).
        """
        task: asyncio.Task[T] = self._loop.create_task(_as_coroutine(function))
        ended = trio.Event()
        task.add_done_callback(lambda _: ended.set())
        try:
            await ended.wait()
        except trio.Cancelled:
            if self._loop.is_closed():
                raise  # closed by hand: the task can never run again, nothing to wait for
            task.cancel()
            with trio.CancelScope(shield=True):
                await ended.wait()
            if not task.cancelled():
                task.exception()  # the call is cancelled; its late error goes nowhere
            raise
        if task.cancelled():
            raise RuntimeError("the asyncio task was cancelled by something other than kova")
        try:
            return task.result()
        except _Exited as exited:
            raise exited.error from None


class _Exited(Exception):
    """A ``SystemExit`` or ``GeneratorExit`` the host's coroutine raised, carried as an
    ``Exception``: asyncio re-raises those two out of the event loop when a task raises them
    (ending ``asyncio.run``, and the application), where kova contains them as it does on
    trio (``sys.exit()`` in an approval handler or a tool ends that call, in-band).
    :meth:`AsyncioRuntime.run_on_host` raises the original again on the trio side."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = error


async def _as_coroutine(function: Callable[[], Awaitable[T]]) -> T:
    try:
        return await function()
    except (SystemExit, GeneratorExit) as exc:
        raise _Exited(exc) from None


async def _drive(job: Job[T], function: Callable[..., Awaitable[T]], args: tuple[Any, ...]) -> None:
    """The trio side of a :class:`Job`: run it, hand its outcome to asyncio."""
    done = job.done
    try:
        with job.scope:
            value = await function(*args)
            if not done.done():
                done.set_result(value)
        if job.scope.cancelled_caught and not done.done():
            done.cancel()  # the asyncio caller asked for this; it raises CancelledError
    except BaseException as exc:
        # trio.Cancelled (alone or in a group) here is the runtime or the agent closing
        # under the job: the caller is told so, and the cancellation goes on up.
        cancelled, rest = _split_cancelled(exc)
        if not done.done():
            if rest is None:
                done.set_exception(TurnCancelled("kova.asyncio: the agent or runtime closed"))
            elif isinstance(rest, Exception):
                done.set_exception(lone(rest))
            else:  # KeyboardInterrupt, SystemExit: asyncio cannot hold them in a future
                done.set_exception(RuntimeError(f"the call was interrupted by {rest!r}"))
            # Marked as retrieved: the caller is awaiting it (or reads it when it comes
            # back, a stream's consumer), and a stream dropped by its consumer would
            # otherwise log "Future exception was never retrieved" for an error nobody lost.
            done.exception()
        if cancelled is not None or not isinstance(rest, Exception):
            raise
    finally:
        job.finished = True
        if job.stopped is not None and not job.stopped.done():
            job.stopped.set_result(None)
        if job.on_finish is not None:
            job.on_finish()


def current_runtime(loop: asyncio.AbstractEventLoop | None = None) -> AsyncioRuntime | None:
    """The running guest run of ``loop`` (default: the running loop), if one is up."""
    if loop is None:
        loop = asyncio.get_running_loop()
    runtime = _RUNTIMES.get(loop)
    if runtime is None or runtime.closed:
        return None
    return runtime


async def ensure_runtime() -> AsyncioRuntime:
    """The running loop's guest run, started (and kept until the loop's end) if needed."""
    loop = asyncio.get_running_loop()
    runtime = _RUNTIMES.get(loop)
    if runtime is None or runtime.closed:
        await _end_orphan(loop)
        runtime = _begin(loop)
        keeper = loop.create_task(runtime._keep(), name="kova.asyncio runtime keeper")
        runtime._keeper = keeper  # a strong reference: asyncio keeps only weak ones
    await runtime._started()
    return runtime


def _begin(loop: asyncio.AbstractEventLoop) -> AsyncioRuntime:
    if trio.lowlevel.in_trio_run():
        orphan = _orphaned_here()
        if orphan is not None:
            raise RuntimeError(_orphaned_message(orphan))
        raise RuntimeError(
            "kova.asyncio cannot start: a trio run is already active in this thread "
            "(under trio, use kova directly, without the asyncio bridge)"
        )
    runtime = AsyncioRuntime(loop)
    _RUNTIMES[loop] = runtime
    try:
        runtime._start()
    except BaseException:
        del _RUNTIMES[loop]
        raise
    return runtime


ABANDON_WAIT = 10.0
"""Seconds a run whose loop was closed by hand gets to finish its cancelled work on the new
loop before kova gives up on the thread (its work is stuck: a thread that does not stop)."""


async def _end_orphan(loop: asyncio.AbstractEventLoop) -> None:
    """Before a run starts on ``loop``: if this thread's trio run is a guest run whose loop
    was closed by hand (it can never finish there, and trio allows one run per thread), end
    it here, its work cancelled, so that the thread runs kova (and ``trio.run``) again."""
    if not trio.lowlevel.in_trio_run():
        return
    orphan = _orphaned_here()
    if orphan is None:
        return  # a real trio run: _begin says so
    if not await orphan._abandon(loop):
        raise RuntimeError(_orphaned_message(orphan))
    log.warning("asyncio.runtime.abandoned", loop=repr(orphan.loop))


def _orphaned_here() -> AsyncioRuntime | None:
    """A guest run of this thread whose asyncio loop was closed while it ran (by hand,
    ``loop.close()``, before kova was closed): it can never finish, and trio keeps the
    thread marked as running it."""
    thread = threading.get_ident()
    for runtime in list(_RUNTIMES.values()):
        if runtime._thread == thread and runtime._loop.is_closed() and not runtime._finished.done():
            return runtime
    return None


def _orphaned_message(runtime: AsyncioRuntime) -> str:
    return (
        f"kova.asyncio cannot start: the asyncio loop kova ran on in this thread "
        f"({runtime._loop!r}) was closed while kova was running on it (loop.close() by hand, "
        "before kova's agents on it were closed), and the work it left did not stop within "
        f"{ABANDON_WAIT:g}s of being cancelled (a worker thread that does not return). trio "
        "allows one run per thread, so neither kova.asyncio nor trio.run() works in this "
        "thread until it does: run the new loop in another thread (threading.Thread, or a "
        "new process). To avoid it, close kova before the loop: leave `async with "
        "open_agent(...)` (or await the runtime's aclose()), or let asyncio.run() end the "
        "loop, which closes kova in order."
    )


@asynccontextmanager
async def open_runtime() -> AsyncIterator[AsyncioRuntime]:
    """kova's trio guest run on the running asyncio loop, for the block's duration.

    Use it where an application's lifetime is, e.g. a FastAPI lifespan::

        @contextlib.asynccontextmanager
        async def lifespan(app):
            async with kova.asyncio.open_runtime():
                yield

    Without it, the runtime starts on first use and ends when the loop's owner cancels the
    remaining tasks (``asyncio.run`` does). If a runtime is already up on this loop, the
    block shares it and leaves it running; otherwise leaving the block closes it: agents
    still open in it are closed and their turns cancelled, and the guest run has finished
    when the block exits.

    Raises:
        RuntimeError: no asyncio loop is running, or a trio run is already active in this
            thread.
    """
    loop = asyncio.get_running_loop()
    runtime = current_runtime(loop)
    if runtime is not None:
        await runtime._started()
        yield runtime
        return
    await _end_orphan(loop)
    runtime = _begin(loop)
    try:
        await runtime._started()
        yield runtime
    finally:
        await runtime.aclose()


def run_sync_in(runtime: AsyncioRuntime, callback: Callable[[], object]) -> None:
    """Run ``callback`` in the guest run soon, from any thread (a finalizer, say); nothing
    happens if the run has finished."""
    token = runtime._token
    if token is None:
        return
    with suppress(trio.RunFinishedError):
        token.run_sync_soon(callback)


@asynccontextmanager
async def held_open(
    runtime: AsyncioRuntime, enter: Callable[[], AbstractAsyncContextManager[T]], what: str
) -> AsyncIterator[T]:
    """From asyncio: ``enter()`` entered by a trio task of ``runtime`` and held open for the
    block, which gets what it gave (kova.asyncio's agent, the Temporal worker's agents);
    left when the block ends, before this returns.

    Raises:
        What entering raised, as it was raised (``what`` names it if it ended without one);
        what leaving raised. CancelledError: the caller was cancelled (entering or leaving);
        by then the trio task has stopped.
    """
    entered: asyncio.Future[T] = runtime.loop.create_future()
    leaving = trio.Event()

    async def hold() -> None:
        async with enter() as value:
            if entered.done():  # the caller was cancelled while it entered
                return
            entered.set_result(value)
            await leaving.wait()

    job = runtime.spawn(runtime.nursery(), hold)
    try:
        await asyncio.wait((entered, job.done), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        entered.cancel()  # the task sees it and leaves at once
        leaving.set()
        await job.until_finished()
        raise
    if not entered.done():  # entering failed: its error, as it was raised
        entered.cancel()
        await job.until_finished()
        error = None if job.done.cancelled() else job.done.exception()
        raise error if error is not None else RuntimeError(f"{what} closed as it opened")
    try:
        yield entered.result()
    finally:
        leaving.set()
        cancelled = await job.until_finished()
        error = None if not job.done.done() or job.done.cancelled() else job.done.exception()
        if cancelled:
            raise asyncio.CancelledError
        if error is not None:
            raise error
