"""What the SQLite and PostgreSQL session stores share: the store protocol over SQL, and the
**holds** that keep two turns on one session apart across processes and machines.

Each backend keeps only what differs: how it connects and runs an operation in a worker
thread, its schema's types, its reading of a session (PostgreSQL's is one statement), and a
small dialect (:class:`Sql`: the parameter mark, ``FOR UPDATE``, the clock, a per-session
lock). The rest -- a versioned write, the listing, a delete, the hold queue -- is written
once, here, in SQL both databases run.

**Holds.** A turn on a session (and every change through :class:`~kova.sessions.Session`)
first takes a ticket in ``kova_session_holds``: an increasing number, the session, the
taker's owner id, and a lease. The session belongs to its lowest live ticket; the others
wait in ticket order (first come, first served, across every process using the store),
polling the table (their own ticket's lease renewed with each poll) and woken at once when
the ticket ahead was in this process. The holder's lease is renewed every third of it, for
as long as it holds, by one task per store (a trio system task), so a holder lives as long
as its process: a ticket whose lease ran out (its process died or stalled) is removed by the
next taker, and on SQLite a ticket of a process of this machine that is gone is removed at
once. A turn that waited longer than its ``timeout`` gives its ticket up and raises
:class:`~kova.errors.SessionBusyError`; ``wait=False`` raises it at once when any live
ticket is ahead. The versioned write stays the last guard: a holder that lost its hold
(stalled past its lease while another took it) cannot append after the same message.
"""

from __future__ import annotations

import abc
import math
import time
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from .._errors import SessionBusyError, SessionConflictError, SessionError, check_seconds
from .._log import get_logger
from ._store import (
    MessageCache,
    SessionInfo,
    SessionStore,
    SessionWrite,
    check_session_id,
    message_to_text,
    view_update,
)

if TYPE_CHECKING:
    import builtins
    from collections.abc import Callable, Sequence
    from contextlib import AbstractContextManager
    from decimal import Decimal

    from ..agent import Budget
    from ._view import SessionState

__all__ = ["HOLDS_INDEX", "SCHEMA_VERSION", "Sql", "SqlSessionStore"]

SCHEMA_VERSION = 1
"""The version of the session tables (columns added since are made where missing)."""

_T = TypeVar("_T")

_log = get_logger("kova.sessions")

HOLDS_INDEX = (
    "CREATE INDEX IF NOT EXISTS kova_session_holds_by_session "
    "ON kova_session_holds (session_id, ticket)"
)

_POLL = 0.1
"""The longest a waiting turn sleeps between looks at the hold queue (a holder in another
process is seen gone within this; one in this process wakes its next taker at once)."""


class Sql(abc.ABC):
    """One connection of a backend, in the shape the shared code speaks: statements written
    with ``?`` marks, a transaction, the clock leases are measured by."""

    __slots__ = ("connection",)

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    for_update = ""
    """What ``SELECT`` appends to lock the rows it read for the transaction."""

    @abc.abstractmethod
    def run(self, statement: str, parameters: Sequence[object] = ()) -> Any:
        """Execute one statement; its cursor."""

    @abc.abstractmethod
    def many(self, statement: str, rows: builtins.list[tuple[object, ...]]) -> None:
        """Execute one statement for each row."""

    @abc.abstractmethod
    def transaction(self, *, write: bool = True) -> AbstractContextManager[None]:
        """A transaction (``write``: one that will write, so SQLite takes the file's lock up
        front): committed at the end, rolled back on an error."""

    @abc.abstractmethod
    def now(self) -> float:
        """Seconds since the epoch, by the clock every process of the store shares."""

    def lock_session(self, session_id: str) -> None:  # noqa: B027 (SQLite locks the file)
        """Serialize this transaction with others on ``session_id``'s holds."""

    knows_processes = False
    """Whether :meth:`dead` can tell a gone process (SQLite: on one machine)."""

    def dead(self, owner: str) -> bool:
        """Whether ``owner``'s process is known to be gone (where that can be known)."""
        return False

    @abc.abstractmethod
    def insert_ticket(self, session_id: str, owner: str, until: float) -> int:
        """Add a hold ticket; its number."""

    def one(self, statement: str, parameters: Sequence[object] = ()) -> Any:
        return self.run(statement, parameters).fetchone()

    def all(self, statement: str, parameters: Sequence[object] = ()) -> builtins.list[Any]:
        return list(self.run(statement, parameters).fetchall())


class SqlSessionStore(SessionStore):
    """A session store on SQL (the base of :class:`~kova.sessions.SqliteSessionStore` and
    :class:`~kova.sessions.PostgresSessionStore`)."""

    def __init__(self, *, threads: int, lease: float, wait_timeout: float | None) -> None:
        check_seconds("lease", lease)
        check_seconds("wait_timeout", wait_timeout, optional=True)
        self.lease = float(lease)
        """Seconds a hold on a session lasts unless renewed (a crashed holder's session is
        free once it runs out)."""
        self.wait_timeout = None if wait_timeout is None else float(wait_timeout)
        """Seconds a turn waits for a busy session by default (``None``: as long as it
        takes)."""
        self._threads = threads
        self._limiter: trio.CapacityLimiter | None = None
        self._cache = MessageCache()
        self._tickets: dict[int, str] = {}  # this store's tickets (held or waiting) -> session
        self._held: set[int] = set()  # those that hold their session
        self._keeper: object = None  # the trio run whose system task renews them
        self._wakeups: dict[str, trio.Event] = {}
        self._owner: str | None = None

    # -- the store protocol ----------------------------------------------------------------

    async def read(self, session_id: str) -> SessionState:
        check_session_id(session_id)
        return await self._run(self._read, session_id)

    async def write(self, session_id: str, change: SessionWrite) -> int:
        check_session_id(session_id)
        if not isinstance(change, SessionWrite):
            raise TypeError(f"change must be a SessionWrite, got {type(change).__name__}")
        rows = [message_to_text(message) for message in change.messages]
        return await self._run(self._write, session_id, change, rows)

    async def list(self) -> builtins.list[SessionInfo]:
        return await self._run(self._list)

    async def delete(self, session_id: str) -> None:
        check_session_id(session_id)
        await self._run(self._delete, session_id)

    def budget(
        self, amount: Decimal | int | str | float, *, window: object = None, name: str = "default"
    ) -> Budget:
        """A :class:`~kova.agent.Budget` kept in this store under ``name``: shared by every
        process that makes it from the same store (the same SQLite file, on one machine; the
        same PostgreSQL database, on any) and name (docs/cost.md)."""
        from ._budget import store_budget

        return store_budget(self, amount, window, name)

    # -- what each backend provides --------------------------------------------------------

    _postgres = False
    """Whether the store is PostgreSQL's (its budgets' ledger, :mod:`kova.sessions._budget`)."""

    @abc.abstractmethod
    def _in_thread(self, function: Callable[..., _T], args: tuple[object, ...]) -> _T:
        """Run ``function(connection, *args)`` on a connection of the store (worker thread)."""

    @abc.abstractmethod
    def _sql(self, connection: Any) -> Sql:
        """The dialect over one of the backend's connections."""

    @abc.abstractmethod
    def _read(self, connection: Any, session_id: str) -> SessionState: ...

    async def _run(self, function: Callable[..., _T], *args: object) -> _T:
        limiter = self._limiter
        if limiter is None:
            limiter = self._limiter = trio.CapacityLimiter(self._threads)
        return await trio.to_thread.run_sync(self._in_thread, function, args, limiter=limiter)

    # -- worker-thread side, shared ----------------------------------------------------------

    def _write(
        self,
        connection: Any,
        session_id: str,
        change: SessionWrite,
        rows: builtins.list[str],
    ) -> int:
        sql = self._sql(connection)
        now = time.time()
        with sql.transaction():
            row = sql.one(
                "SELECT version, messages, created, view_covers FROM kova_sessions "
                f"WHERE id = ?{sql.for_update}",
                (session_id,),
            )
            version, count, created, covers = (0, 0, now, 0) if row is None else row
            version, count = int(version), int(count)
            if version != change.version:
                raise SessionConflictError(session_id, change.version, version)
            keep = change.keep
            if not 0 <= keep <= count:
                raise ValueError(f"keep must be between 0 and {count}, got {keep}")
            replace, view, view_covers = view_update(change, covers)
            total = keep + len(rows)
            if row is None:
                made = sql.run(
                    "INSERT INTO kova_sessions (id, version, created, updated, title, messages, "
                    "input_tokens, output_tokens, pending, view, view_covers, resumed) "
                    "VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                    (
                        session_id,
                        now,
                        now,
                        change.title,
                        total,
                        change.input_tokens,
                        change.output_tokens,
                        change.pending,
                        view,
                        view_covers,
                        change.resumed,
                    ),
                )
                if made.rowcount != 1:  # another writer made it first
                    raise SessionConflictError(session_id, 0, 1)
            else:
                if keep < count:
                    sql.run(
                        "DELETE FROM kova_session_messages WHERE session_id = ? AND seq >= ?",
                        (session_id, keep),
                    )
                sql.run(
                    "UPDATE kova_sessions SET version = version + 1, updated = ?, "
                    "title = COALESCE(?, title), messages = ?, "
                    "input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, "
                    "pending = ?, view = CASE WHEN ? THEN ? ELSE view END, "
                    "view_covers = CASE WHEN ? THEN ? ELSE view_covers END, resumed = ? "
                    "WHERE id = ?",
                    (
                        now,
                        change.title,
                        total,
                        change.input_tokens,
                        change.output_tokens,
                        change.pending,
                        replace,
                        view,
                        replace,
                        view_covers,
                        change.resumed,
                        session_id,
                    ),
                )
            if rows:
                sql.many(
                    "INSERT INTO kova_session_messages (session_id, seq, turn, body) "
                    "VALUES (?, ?, ?, ?)",
                    [
                        (session_id, keep + index, change.turn, body)
                        for index, body in enumerate(rows)
                    ],
                )
        self._cache.wrote(session_id, version, created, change)
        return version + 1

    def _check_schema(self, sql: Sql) -> None:
        """Record the tables' version in a new store; refuse one of a newer kova."""
        row = sql.one("SELECT value FROM kova_session_meta WHERE key = 'schema'")
        if row is None:
            sql.run(
                "INSERT INTO kova_session_meta (key, value) VALUES ('schema', ?)",
                (str(SCHEMA_VERSION),),
            )
        elif int(row[0]) > SCHEMA_VERSION:
            raise SessionError(
                f"session store {self!r} was written by a newer kova "
                f"(schema {row[0]}, this kova reads {SCHEMA_VERSION})"
            )

    def _list(self, connection: Any) -> builtins.list[SessionInfo]:
        sql = self._sql(connection)
        with sql.transaction(write=False):
            rows = sql.all(
                "SELECT id, created, updated, title, messages, input_tokens, output_tokens, "
                "pending IS NOT NULL FROM kova_sessions ORDER BY updated DESC, id"
            )
        return [
            SessionInfo(
                id=row[0],
                created=row[1],
                updated=row[2],
                title=row[3],
                messages=row[4],
                input_tokens=row[5],
                output_tokens=row[6],
                pending=bool(row[7]),
            )
            for row in rows
        ]

    def _delete(self, connection: Any, session_id: str) -> None:
        self._cache.drop(session_id)
        sql = self._sql(connection)
        with sql.transaction():
            sql.run("DELETE FROM kova_session_messages WHERE session_id = ?", (session_id,))
            sql.run("DELETE FROM kova_sessions WHERE id = ?", (session_id,))

    # -- holds -----------------------------------------------------------------------------

    def _gate(self, session_id: str, wait: bool, timeout: float | None = None) -> _Hold:
        return _Hold(self, session_id, wait, self.wait_timeout if timeout is None else timeout)

    def _clear_ahead(self, sql: Sql, session_id: str, now: float) -> None:
        """Remove the session's tickets whose lease ran out or whose process is gone."""
        sql.run(
            "DELETE FROM kova_session_holds WHERE session_id = ? AND lease_until <= ?",
            (session_id, now),
        )
        if not sql.knows_processes:
            return
        for ticket, owner in sql.all(
            "SELECT ticket, owner FROM kova_session_holds WHERE session_id = ?", (session_id,)
        ):
            if sql.dead(owner):
                sql.run("DELETE FROM kova_session_holds WHERE ticket = ?", (ticket,))

    def _first(self, sql: Sql, session_id: str) -> int:
        row = sql.one(
            "SELECT MIN(ticket) FROM kova_session_holds WHERE session_id = ?", (session_id,)
        )
        return int(row[0])

    def _hold_enter(
        self, connection: Any, session_id: str, owner: str, wait: bool
    ) -> tuple[int, int]:
        """Take a ticket for ``session_id`` (unless ``wait`` is false and one is ahead):
        (the ticket, the session's first ticket: its holder's)."""
        sql = self._sql(connection)
        with sql.transaction():
            sql.lock_session(session_id)
            now = sql.now()
            self._clear_ahead(sql, session_id, now)
            if not wait and sql.one(
                "SELECT 1 FROM kova_session_holds WHERE session_id = ?", (session_id,)
            ):
                raise SessionBusyError(session_id)
            ticket = self._take(sql, session_id, owner, now)
            return ticket, self._first(sql, session_id)

    def _take(self, sql: Sql, session_id: str, owner: str, now: float) -> int:
        return sql.insert_ticket(session_id, owner, now + self.lease)

    def _hold_poll(
        self, connection: Any, session_id: str, owner: str, ticket: int
    ) -> tuple[int, int]:
        """A waiting ticket's look at the queue (renewing its lease): (its ticket -- a new
        one, last in line, if it was removed as run out --, the session's first ticket)."""
        sql = self._sql(connection)
        with sql.transaction():
            sql.lock_session(session_id)
            now = sql.now()
            kept = sql.run(
                "UPDATE kova_session_holds SET lease_until = ? WHERE ticket = ?",
                (now + self.lease, ticket),
            )
            self._clear_ahead(sql, session_id, now)
            if kept.rowcount != 1:
                ticket = self._take(sql, session_id, owner, now)
            return ticket, self._first(sql, session_id)

    def _hold_renew(self, connection: Any, tickets: builtins.list[int]) -> builtins.list[int]:
        """Renew held tickets' leases; the ones no longer there (lost)."""
        sql = self._sql(connection)
        lost = []
        with sql.transaction():
            until = sql.now() + self.lease
            for ticket in tickets:
                renewed = sql.run(
                    "UPDATE kova_session_holds SET lease_until = ? WHERE ticket = ?",
                    (until, ticket),
                )
                if renewed.rowcount != 1:
                    lost.append(ticket)
        return lost

    def _hold_leave(self, connection: Any, ticket: int) -> None:
        sql = self._sql(connection)
        with sql.transaction():
            sql.run("DELETE FROM kova_session_holds WHERE ticket = ?", (ticket,))

    def _owner_id(self) -> str:
        if self._owner is None:
            from ..durable._journal import _process_owner

            self._owner = _process_owner()
        return self._owner

    def _wakeup(self, session_id: str) -> trio.Event:
        event = self._wakeups.get(session_id)
        if event is None:
            event = self._wakeups[session_id] = trio.Event()
        return event

    def _woken(self, session_id: str) -> None:
        event = self._wakeups.pop(session_id, None)
        if event is not None:
            event.set()

    def _ticket_taken(self, ticket: int, session_id: str) -> None:
        """Renew ``ticket`` from now on (while it waits and while it holds)."""
        self._tickets[ticket] = session_id
        run = trio.lowlevel.current_trio_token()
        if self._keeper is not run:
            self._keeper = run
            trio.lowlevel.spawn_system_task(self._keep, name="kova.sessions hold keeper")

    def _ticket_left(self, ticket: int) -> None:
        self._tickets.pop(ticket, None)
        self._held.discard(ticket)

    async def _keep(self) -> None:
        """Renew this store's tickets every third of the lease while it has any."""
        interval = self.lease / 3
        while True:
            await trio.sleep(interval)
            if not self._tickets:
                self._keeper = None
                return
            tickets = list(self._tickets)
            try:
                lost = await self._run(self._hold_renew, tickets)
            except Exception as exc:  # a system task must not raise: the next try may do
                _log.warning("sessions.hold.renew_failed", store=repr(self), error=str(exc))
                continue
            for ticket in lost:
                session_id = self._tickets.get(ticket)
                if session_id is not None and ticket in self._held:
                    _log.warning("sessions.hold.lost", store=repr(self), session=session_id)


class _Hold:
    """``async with``: this task holds the session (its ticket first in line) for the block."""

    __slots__ = ("_session", "_store", "_ticket", "_timeout", "_wait")

    def __init__(
        self, store: SqlSessionStore, session_id: str, wait: bool, timeout: float | None
    ) -> None:
        self._store = store
        self._session = session_id
        self._wait = wait
        self._timeout = timeout
        self._ticket: int | None = None

    async def __aenter__(self) -> None:
        store, session_id = self._store, self._session
        owner = store._owner_id()
        ticket, first = await store._run(store._hold_enter, session_id, owner, self._wait)
        store._ticket_taken(ticket, session_id)
        try:
            if first != ticket:
                ticket = await self._queue(ticket, first)
        except BaseException:
            store._ticket_left(ticket)
            with trio.CancelScope(shield=True):
                await store._run(store._hold_leave, ticket)
            raise
        store._held.add(ticket)
        self._ticket = ticket

    async def _queue(self, ticket: int, first: int) -> int:
        """Wait until ``ticket`` is first: woken at once by a holder of this store, or
        looking again every so often for a holder elsewhere."""
        store, session_id = self._store, self._session
        owner = store._owner_id()
        delay = min(0.01, store.lease / 3)
        timeout = math.inf if self._timeout is None else self._timeout
        with trio.move_on_after(timeout):
            while True:
                # A holder of this store wakes its next takers as it leaves (and the keeper
                # renews their tickets meanwhile): no need to look before.
                with trio.move_on_after(math.inf if first in store._held else delay):
                    await store._wakeup(session_id).wait()
                delay = min(delay * 2, _POLL, store.lease / 3)
                taken, first = await store._run(store._hold_poll, session_id, owner, ticket)
                if taken != ticket:  # it ran out while this process stalled: a new one
                    store._ticket_left(ticket)
                    store._ticket_taken(taken, session_id)
                    ticket = taken
                if first == ticket:
                    return ticket
        raise SessionBusyError(
            session_id,
            f"session {session_id!r} is busy: another turn held it for the whole "
            f"{timeout:g} s this turn waited (its timeout); nothing was run",
        )

    async def __aexit__(self, *exc_info: object) -> None:
        store, ticket, self._ticket = self._store, self._ticket, None
        assert ticket is not None
        store._ticket_left(ticket)
        with trio.CancelScope(shield=True):  # a cancelled turn still frees its session
            await store._run(store._hold_leave, ticket)
        store._woken(self._session)
