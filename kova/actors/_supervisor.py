"""Supervisors: run child actors, restart them the OTP way, stop them in order.

A supervisor owns a nursery. Each child has a *slot* (its :class:`ChildSpec`, its mailbox and
the current instance); refs point at the slot, so they survive restarts. When an instance
exits, the supervisor decides, in one task, one exit at a time:

* restart type: ``permanent`` children are always restarted, ``transient`` ones only after an
  abnormal exit (a crash), ``temporary`` ones never;
* strategy: ``one_for_one`` restarts the child alone, ``one_for_all`` stops every other child
  and restarts them all, ``rest_for_one`` restarts the child and those started after it;
* intensity: if more than ``max_restarts`` restarts would happen within ``within`` seconds,
  the supervisor gives up: it stops every child and raises :class:`~kova.ActorFailed` (from
  the last crash) to whoever opened it. A give-up is never lost: if the block that owns the
  supervisor is ending meanwhile (its shutdown cancels the supervisor's own task), or a crash
  reported before the shutdown began is still queued, the block raises it all the same;
* backoff: the *k*-th restart inside the intensity window waits ``backoff.delay(k)`` first.

Stopping (a child, or the whole supervisor, in reverse start order) asks nicely first: the
mailbox refuses new messages, the actor serves what is queued and finishes in-flight work. If
that takes longer than the child's ``shutdown_grace``, its cancel scope is cancelled.

Strategies and restart types are plain strings (``Literal`` types), as in
``restart="transient"``; they read like the OTP terms they are. They, :class:`Backoff` and
:class:`ChildSpec` are in ``_spec``; the slot of each child in ``_child_slot``.
"""

from __future__ import annotations

import math
from collections import deque
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, NoReturn

import trio

from .._errors import ActorError, ActorFailed
from .._log import get_logger
from .._observe import ActorRestarted, SupervisorGaveUp, TelemetryHub
from .._record import evolve
from ._actor import Actor, ActorRef
from ._child_slot import ChildExited, ChildSlot, StartWatch, WatchedStatus
from ._mailbox import Mailbox
from ._spec import ActorFactory, Backoff, ChildSpec, RestartType, Strategy, check_supervisor_args

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["Supervisor", "open_supervisor"]

log = get_logger(__name__)


class Supervisor:
    """Runs child actors in its nursery. Create it with :func:`open_supervisor`.

    All methods must be called from trio tasks of the same run. Restart decisions happen in
    the supervisor's own task, one child exit at a time (so restarts are serialized).
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        name: str,
        strategy: Strategy,
        max_restarts: int,
        within: float,
        backoff: Backoff,
        telemetry: TelemetryHub | None = None,
    ) -> None:
        check_supervisor_args(strategy, max_restarts, within)
        self._telemetry = telemetry
        self.name = name
        self.strategy: Strategy = strategy
        self.max_restarts = max_restarts
        self.within = within
        self.backoff = backoff
        self._nursery = nursery
        self._children: list[ChildSlot] = []
        self._restart_times: deque[float] = deque()
        self._closing = False
        self._failure: ActorFailed | None = None
        """Set the moment the supervisor decides to give up."""
        self._failure_raised = False
        self._loop_scope = trio.CancelScope()
        self._loop_done = trio.Event()
        # Unbounded on purpose: an exit event is sent once per child instance, and instances
        # are started only by this supervisor, so the queue can hold at most one event per
        # child incarnation that is still being processed; a bound could only deadlock the
        # instance task that reports its own exit.
        self._events_send, self._events_receive = trio.open_memory_channel[ChildExited](math.inf)

    # -- public API -----------------------------------------------------------------------

    @property
    def children(self) -> tuple[str, ...]:
        """Names of the current children, in start order."""
        return tuple(slot.name for slot in self._children)

    def ref(self, name: str) -> ActorRef:
        """The ref of the child called ``name``.

        Raises:
            KeyError: no such child.
        """
        return ActorRef(mailbox=self._slot(name).mailbox)

    async def spawn(
        self,
        child: ChildSpec | ActorFactory,
        *,
        name: str | None = None,
        restart: RestartType | None = None,
        mailbox_size: int | None = None,
        shutdown_grace: float | None = None,
    ) -> ActorRef:
        """Start a child and return its ref once it has started (its ``resources()`` are
        entered).

        Args:
            child: a :class:`ChildSpec`, or a factory (an :class:`Actor` subclass or any
                callable returning a fresh actor).
            name: the child's name; defaults to the spec's, or the factory's name (made
                unique with a ``-2``, ``-3`` ... suffix).
            restart: overrides the spec's restart type (default ``"permanent"``).
            mailbox_size: overrides the mailbox size (default 16).
            shutdown_grace: overrides the grace period of an orderly stop (default 5 s).

        Raises:
            ValueError: the name is taken.
            ActorError: the supervisor is shutting down.
            Exception: whatever the factory or the actor's startup raised.
        """
        spec = self._make_spec(
            child,
            name=name,
            restart=restart,
            mailbox_size=mailbox_size,
            shutdown_grace=shutdown_grace,
        )
        if self._closing:
            raise ActorError(f"supervisor {self.name!r} is shutting down")
        if any(slot.name == spec.name for slot in self._children):
            raise ValueError(f"supervisor {self.name!r} already has a child named {spec.name!r}")
        slot = ChildSlot(spec=spec, mailbox=Mailbox(name=spec.name, size=spec.mailbox_size))
        self._children.append(slot)
        try:
            await self._start(slot)
        except BaseException:
            self._forget(slot)
            raise
        log.debug("actor.started", actor=spec.name, supervisor=self.name)
        return ActorRef(mailbox=slot.mailbox)

    async def stop_child(self, child: ActorRef | str) -> None:
        """Stop one child in an orderly way (it is not restarted). Does nothing if it is
        already gone.

        Waits up to the child's ``shutdown_grace`` for it to finish queued and in-flight
        work, then cancels it; callers still waiting get :class:`~kova.MailboxClosed`.
        """
        name = child if isinstance(child, str) else child.name
        for slot in self._children:
            if slot.name == name:
                await self._stop_gracefully(slot)
                return

    async def aclose(self) -> None:
        """Stop every child in reverse start order, each with its grace period.

        Called for you when the :func:`open_supervisor` block ends (shielded there).
        """
        self._closing = True
        self._loop_scope.cancel(reason="supervisor stopping")
        await self._loop_done.wait()
        await self._stop_all()
        self._settle_late_exits()

    def _undelivered_failure(self) -> ActorFailed | None:
        """The give-up that the supervisor's own task could not raise, if any.

        A give-up is decided in the supervisor's task, which raises :class:`~kova.ActorFailed`
        into the nursery of :func:`open_supervisor`. When the block is already ending, that
        task is cancelled by :meth:`aclose` (possibly in the middle of giving up), and crashes
        reported just before the shutdown may still be queued; :meth:`aclose` settles them,
        and this returns the failure for :func:`open_supervisor` to raise, once.
        """
        if self._failure is None or self._failure_raised:
            return None
        self._failure_raised = True
        return self._failure

    # -- the supervisor's own task --------------------------------------------------------

    async def _supervise(self) -> None:
        try:
            with self._loop_scope:
                async for event in self._events_receive:
                    await self._on_exit(event)
        except ActorFailed as exc:
            if exc is self._failure:
                self._failure_raised = True
            raise
        finally:
            self._loop_done.set()

    def _settle_late_exits(self) -> None:
        """Count the crashes that were reported before closing began but never processed
        (the supervisor's task was cancelled first): one that exceeds the restart intensity is
        a give-up, as it would have been a moment earlier. Nothing is restarted any more."""
        while self._failure is None:
            try:
                event = self._events_receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return
            if event.error is None or not event.before_close:
                continue
            self._log_crash(event)
            if event.slot.spec.restart == "temporary":
                continue
            if self._intensity_exceeded(trio.current_time()):
                self._failure = self._give_up_failure(event.slot, event.error)
                self._log_give_up(event.slot, event.error)

    def _log_crash(self, event: ChildExited) -> None:
        if event.reported:
            # The caller got the crash (ActorFailed from it) and decides what to do; a second
            # traceback on stderr would only be noise, so one line without it.
            log.warning(
                "actor.crashed",
                actor=event.slot.name,
                supervisor=self.name,
                incarnation=event.incarnation,
                error=repr(event.error),
            )
        else:
            log.error(
                "actor.crashed",
                actor=event.slot.name,
                supervisor=self.name,
                incarnation=event.incarnation,
                exc_info=event.error,
            )

    def _intensity_exceeded(self, now: float) -> bool:
        window = self._restart_times
        while window and window[0] <= now - self.within:
            window.popleft()
        return len(window) >= self.max_restarts

    async def _on_exit(self, event: ChildExited) -> None:
        slot, error = event.slot, event.error
        if error is not None:
            self._log_crash(event)
        if (
            self._closing
            or slot.stopping
            or event.incarnation != slot.incarnation
            or slot not in self._children
        ):
            return  # we stopped it on purpose, or it has been restarted already
        restart = slot.spec.restart
        if restart == "temporary" or (restart == "transient" and error is None):
            log.info("actor.exited", actor=slot.name, supervisor=self.name, normal=error is None)
            self._forget(slot)
            return
        await self._restart(slot, error)

    async def _restart(self, slot: ChildSlot, error: Exception | None) -> None:
        failed = slot
        while True:
            now = trio.current_time()
            window = self._restart_times
            if self._intensity_exceeded(now):
                await self._give_up(failed, error)
            window.append(now)
            delay = self.backoff.delay(len(window))
            affected = self._affected(failed)
            for sibling in reversed(affected):
                await self._stop_for_restart(sibling)
            if delay > 0:
                await trio.sleep(delay)
            try:
                for child in affected:
                    if child not in self._children or child.stopping or self._closing:
                        continue
                    if child is not failed and child.spec.restart == "temporary":
                        self._forget(child)  # OTP: temporary siblings are not restarted
                        continue
                    failed = child
                    await self._start(child)
                    child.restarts += 1
                    log.info(
                        "actor.restarted",
                        actor=child.name,
                        supervisor=self.name,
                        restarts=child.restarts,
                        delay=delay,
                    )
                    if self._telemetry is not None:
                        self._telemetry.emit(
                            ActorRestarted(
                                time=trio.current_time(),
                                supervisor=self.name,
                                actor=child.name,
                                restarts=child.restarts,
                                delay=delay,
                            )
                        )
            except Exception as exc:
                # The new instance failed to start: that is one more crash of this child.
                log.error(
                    "actor.crashed",
                    actor=failed.name,
                    supervisor=self.name,
                    during="start",
                    exc_info=exc,
                )
                error = exc
                continue
            return

    async def _give_up(self, slot: ChildSlot, error: Exception | None) -> NoReturn:
        # Decided before anything awaits: if the block's shutdown cancels this task while
        # the children stop, open_supervisor still raises the failure (_undelivered_failure).
        self._closing = True
        failure = self._failure = self._give_up_failure(slot, error)
        self._log_give_up(slot, error)
        await self._stop_all()
        raise failure

    def _give_up_failure(self, slot: ChildSlot, error: Exception | None) -> ActorFailed:
        failure = ActorFailed(
            self.name,
            f"child {slot.name!r} exceeded {self.max_restarts} restarts in {self.within:g}s",
        )
        failure.__cause__ = error
        return failure

    def _log_give_up(self, slot: ChildSlot, error: Exception | None) -> None:
        log.error(
            "supervisor.gave_up",
            supervisor=self.name,
            actor=slot.name,
            max_restarts=self.max_restarts,
            within=self.within,
            error=repr(error),
        )
        if self._telemetry is not None:
            self._telemetry.emit(
                SupervisorGaveUp(
                    time=trio.current_time(),
                    supervisor=self.name,
                    actor=slot.name,
                    max_restarts=self.max_restarts,
                    within=self.within,
                    error_type=None if error is None else type(error).__name__,
                )
            )

    def _affected(self, slot: ChildSlot) -> list[ChildSlot]:
        if self.strategy == "one_for_one":
            return [slot]
        if self.strategy == "one_for_all":
            return list(self._children)
        index = self._children.index(slot)
        return self._children[index:]

    # -- starting and stopping instances --------------------------------------------------

    async def _start(self, slot: ChildSlot) -> None:
        await self._nursery.start(self._run_instance, slot)

    async def _run_instance(
        self, slot: ChildSlot, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        slot.incarnation += 1
        incarnation = slot.incarnation
        exited = trio.Event()
        slot.exited = exited
        scope = trio.CancelScope()
        slot.scope = scope
        watch = StartWatch(inner=task_status, slot=slot)
        error: Exception | None = None
        actor: Actor | None = None
        try:
            actor = slot.spec.factory()
            with scope:
                await actor.run(slot.mailbox, task_status=WatchedStatus(watch))
        except Exception as exc:
            if not watch.started:
                raise  # nursery.start() hands it to whoever (re)started the child
            error = exc
        finally:
            if slot.incarnation == incarnation:
                slot.running = False
            exited.set()
        if watch.started:
            self._events_send.send_nowait(
                ChildExited(
                    slot=slot,
                    incarnation=incarnation,
                    error=error,
                    reported=actor is not None and actor.crash_reported,
                    before_close=not self._closing,
                )
            )

    async def _stop_for_restart(self, slot: ChildSlot) -> None:
        if slot.running and slot.scope is not None:
            slot.scope.cancel(reason="supervisor restarting children")
            await slot.exited.wait()

    async def _stop_gracefully(self, slot: ChildSlot) -> None:
        slot.stopping = True
        slot.mailbox.close()
        if slot.running:
            with trio.move_on_after(slot.spec.shutdown_grace):
                await slot.exited.wait()
            if not slot.exited.is_set():
                log.warning(
                    "actor.shutdown_timed_out",
                    actor=slot.name,
                    supervisor=self.name,
                    grace=slot.spec.shutdown_grace,
                )
                if slot.scope is not None:
                    slot.scope.cancel(reason="shutdown grace period expired")
                with trio.CancelScope(shield=True):
                    await slot.exited.wait()
        self._forget(slot)
        log.debug("actor.stopped", actor=slot.name, supervisor=self.name)

    async def _stop_all(self) -> None:
        for slot in reversed(list(self._children)):
            await self._stop_gracefully(slot)

    def _forget(self, slot: ChildSlot) -> None:
        slot.stopping = True
        slot.mailbox.drain()
        if slot in self._children:
            self._children.remove(slot)

    def _slot(self, name: str) -> ChildSlot:
        for slot in self._children:
            if slot.name == name:
                return slot
        raise KeyError(name)

    def _make_spec(
        self,
        child: ChildSpec | ActorFactory,
        *,
        name: str | None,
        restart: RestartType | None,
        mailbox_size: int | None,
        shutdown_grace: float | None,
    ) -> ChildSpec:
        if isinstance(child, ChildSpec):
            spec = child
        else:
            if name is None:
                base = getattr(child, "__name__", None) or "actor"
                name = base
                taken = {slot.name for slot in self._children}
                number = 1
                while name in taken:
                    number += 1
                    name = f"{base}-{number}"
            spec = ChildSpec(factory=child, name=name)
        return evolve(
            spec,
            name=spec.name if name is None else name,
            restart=spec.restart if restart is None else restart,
            mailbox_size=spec.mailbox_size if mailbox_size is None else mailbox_size,
            shutdown_grace=spec.shutdown_grace if shutdown_grace is None else shutdown_grace,
        )


async def _raise(error: BaseException) -> NoReturn:
    raise error


@asynccontextmanager
async def open_supervisor(
    *,
    name: str = "supervisor",
    strategy: Strategy = "one_for_one",
    max_restarts: int = 3,
    within: float = 5.0,
    backoff: Backoff | None = None,
    telemetry: TelemetryHub | None = None,
) -> AsyncIterator[Supervisor]:
    """``async with open_supervisor() as supervisor:`` run children for the block.

    Leaving the block stops every child in reverse start order (shielded, each bounded by its
    grace period). No child outlives the block. An exception raised by the block itself
    propagates unchanged (not wrapped in an ``ExceptionGroup``).

    Args:
        name: a label for logs and for the :class:`~kova.ActorFailed` it raises.
        strategy: ``"one_for_one"``, ``"one_for_all"`` or ``"rest_for_one"``.
        max_restarts: restarts allowed within ``within`` seconds before giving up.
        within: the intensity window, in seconds.
        backoff: delay before restarts (default :class:`Backoff()`: 0.1 s doubling to 5 s).
        telemetry: a :class:`~kova.telemetry.TelemetryHub` that receives
            :class:`~kova.telemetry.ActorRestarted` and
            :class:`~kova.telemetry.SupervisorGaveUp` events.

    Raises:
        ActorFailed: (in an ``ExceptionGroup``, as trio nurseries do) the restart intensity
            was exceeded; ``__cause__`` is the last crash. The block is cancelled first. Also
            raised when the block was ending anyway (normally or with its own exception,
            which then shares the group): a give-up is never lost.
    """
    check_supervisor_args(strategy, max_restarts, within)
    # The block's own exception passes through unwrapped (like trio-websocket's
    # open_websocket): the nursery below exists for the children, and a caller's
    # ``except MyError`` around the block should not have to know about it.
    body_error: BaseException | None = None
    passthrough: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            supervisor = Supervisor(
                nursery,
                name=name,
                strategy=strategy,
                max_restarts=max_restarts,
                within=within,
                backoff=backoff if backoff is not None else Backoff(),
                telemetry=telemetry,
            )
            nursery.start_soon(supervisor._supervise)
            try:
                yield supervisor
            except BaseException as exc:
                body_error = exc
                raise
            finally:
                with trio.CancelScope(shield=True):
                    await supervisor.aclose()
                late = supervisor._undelivered_failure()
                if late is not None:
                    # Raised from a task of the nursery, so that it joins the block's own
                    # exception (if any) in the group instead of replacing it.
                    nursery.start_soon(_raise, late)
    except BaseExceptionGroup as group:
        if (
            body_error is None
            or len(group.exceptions) != 1
            or group.exceptions[0] is not body_error
        ):
            raise
        passthrough = body_error
    if passthrough is not None:
        raise passthrough
