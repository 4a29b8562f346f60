"""The turn journal in PostgreSQL: a turn that survives its machine (the ``postgres`` extra).

The same journal as :class:`~kova.durable.SqliteJournal` (the same records, the same driver:
``agent.run(history, journal=journal, turn_id=...)``), in a database that many machines
share, so a turn whose process or machine died goes on in another one from PostgreSQL alone.

**Lease-only ownership.** A claim is a lease on the turn's row (default 60 s, renewed with
every write and by :meth:`PostgresJournalClaim.renew`); another runner may take the turn only
once the lease has run out. Unlike the SQLite journal there is no "that process is gone"
shortcut: a process id means nothing on another machine. Lease times come from the database
server's clock (``clock_timestamp()``), the one clock every runner shares. Every write locks
the turn's row and checks the claim in the same transaction, so a runner whose lease was
taken over cannot write any more (:class:`~kova.durable.TurnClaimedError`).

As for :class:`~kova.sessions.PostgresSessionStore`, psycopg's blocking API runs in worker
threads (its async API is asyncio's), one short transaction per operation, never abandoned
half-done; the two can share one pool (``store.journal()``) and one database.
"""

from __future__ import annotations

import os
import socket
import uuid
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from .._errors import check_seconds
from .._extras import require_extra as _require_extra
from ._errors import JournalError, TurnClaimedError
from ._journal import (
    _TABLES,
    SCHEMA_VERSION,
    Journal,
    JournalClaim,
    _rerun_map,
    changed_error,
    check_opened,
    marks,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from contextlib import AbstractContextManager

    import psycopg
    from psycopg_pool import ConnectionPool


__all__ = ["PgPool", "PostgresJournal", "PostgresJournalClaim"]

_require_extra("postgres", "kova.durable.PostgresJournal")

_T = TypeVar("_T")

_LOCK_KEY = 0x6B6F76615F6A6F75  # "kova_jou": the advisory lock taken to make the tables

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS kova_journal_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS kova_turns (
        turn_id TEXT PRIMARY KEY,
        owner TEXT,
        lease_until DOUBLE PRECISION NOT NULL DEFAULT 0,
        snapshot TEXT,
        response TEXT,
        updated DOUBLE PRECISION NOT NULL,
        results INTEGER NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE IF NOT EXISTS kova_tool_calls (
        turn_id TEXT NOT NULL,
        call_id TEXT NOT NULL,
        started DOUBLE PRECISION NOT NULL,
        result TEXT,
        PRIMARY KEY (turn_id, call_id)
    )""",
    """CREATE TABLE IF NOT EXISTS kova_decisions (
        nonce TEXT PRIMARY KEY,
        turn_id TEXT NOT NULL,
        used DOUBLE PRECISION NOT NULL
    )""",
)

_NOW = "EXTRACT(EPOCH FROM clock_timestamp())::float8"

_PRESENT = (
    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename = ANY(%s)"
)
"""Which of the journal's tables the database holds."""


def _owner() -> str:
    """This runner's owner id: the machine, the process and a nonce (for people reading the
    table: ownership is the lease alone)."""
    return f"{socket.gethostname()}|{os.getpid()}|{uuid.uuid4().hex[:12]}"


class PgPool:
    """The pool of a PostgreSQL journal or session store (``what``, as errors name it): its
    own, made from ``dsn``, opened on first use and closed by :meth:`aclose`, or ``pool``,
    the host's, left open. Each operation takes a connection in a worker thread."""

    __slots__ = ("errors", "own", "pool", "timeout")

    def __init__(
        self,
        what: str,
        dsn: str | None,
        pool: ConnectionPool[Any] | None,
        max_size: int,
        timeout: float,
    ) -> None:
        import psycopg
        import psycopg_pool

        if (dsn is None) == (pool is None):
            raise TypeError(f"{what} takes a dsn or a pool= (one of them)")
        if dsn is not None and not isinstance(dsn, str):
            raise TypeError(f"dsn must be a str, got {type(dsn).__name__}")
        if pool is not None and not isinstance(pool, psycopg_pool.ConnectionPool):
            raise TypeError(
                f"pool must be a psycopg_pool.ConnectionPool, got {type(pool).__name__} "
                "(psycopg's AsyncConnectionPool runs on asyncio, not trio)"
            )
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise ValueError(f"max_size must be a positive int, got {max_size!r}")
        check_seconds("timeout", timeout)
        self.own = pool is None
        self.timeout = float(timeout)
        if dsn is not None:
            pool = psycopg_pool.ConnectionPool(
                dsn, min_size=1, max_size=max_size, open=False, timeout=self.timeout
            )
        assert pool is not None  # one of them, checked above
        self.pool: ConnectionPool[Any] = pool
        self.errors = (psycopg.Error, psycopg_pool.PoolTimeout)
        """What a failed operation raises (its user makes its own kova error of it)."""

    def connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """One operation's connection (it commits, or rolls back on an error)."""
        if self.own and self.pool.closed:
            self.pool.open(wait=True, timeout=self.timeout)
        return self.pool.connection()

    async def aclose(self) -> None:
        if self.own and not self.pool.closed:
            await trio.to_thread.run_sync(self.pool.close)

    async def opened(self, run: Callable[[Callable[[object], None]], Awaitable[None]]) -> None:
        """Open the pool and make the tables now, through ``run`` (its user's operation
        runner), or say why not, closing what was opened."""
        try:
            await run(_nothing)
        except BaseException:
            with trio.CancelScope(shield=True):
                await self.aclose()
            raise


class PostgresJournal(Journal):
    """A turn journal in PostgreSQL: ``PostgresJournal("postgresql://app@db/turns")``.

    Use it as :class:`~kova.durable.SqliteJournal` is used (``agent.run(..., journal=journal,
    turn_id=...)``); ``async with`` closes its own pool at the end (it works without one).

    Args:
        dsn: a libpq connection string or URI; the journal opens a pool of its own.
        pool: a ``psycopg_pool.ConnectionPool`` to use instead (left open).
        lease: seconds a claim lasts unless renewed (a crashed runner's turn can be taken
            over once it runs out).
        rerun_interrupted: as for :class:`~kova.durable.SqliteJournal`.
        max_size: the size of the journal's own pool.
        timeout: seconds an operation waits for a connection.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        pool: ConnectionPool[Any] | None = None,
        lease: float = 60.0,
        rerun_interrupted: Mapping[str, bool] | None = None,
        max_size: int = 4,
        timeout: float = 30.0,
    ) -> None:
        check_seconds("lease", lease)
        self._pg = PgPool("PostgresJournal", dsn, pool, max_size, timeout)
        self.pool = self._pg.pool
        self.rerun_interrupted: Mapping[str, bool] = _rerun_map(rerun_interrupted)
        """Tool name -> whether its interrupted calls may run again (the host's override)."""
        self.lease = float(lease)
        self._limiter: trio.CapacityLimiter | None = None
        self._ready = False
        self._id: str | None = None  # the journal's id in its database, read when first used

    def __repr__(self) -> str:
        return f"PostgresJournal(pool={self.pool.name!r})"

    async def __aenter__(self) -> PostgresJournal:
        await self._pg.opened(self._run)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the journal's own pool (idempotent; a pool given to it is left open)."""
        await self._pg.aclose()

    _claim_type: type[JournalClaim]  # set below

    def _new_owner(self) -> str:
        return _owner()

    # -- worker-thread side ------------------------------------------------------------------

    async def _run(self, function: Callable[..., _T], *args: object) -> _T:
        limiter = self._limiter
        if limiter is None:
            limiter = self._limiter = trio.CapacityLimiter(self.pool.max_size)
        return await trio.to_thread.run_sync(self._in_thread, function, args, limiter=limiter)

    def _in_thread(self, function: Callable[..., _T], args: tuple[object, ...]) -> _T:
        try:
            with self._pg.connection() as connection:
                if not self._ready:
                    self._prepare(connection)
                with connection.transaction():
                    self._check_same(connection)
                    return function(connection, *args)
        except self._pg.errors as exc:
            raise JournalError(f"journal {self!r}: {exc}") from None

    def _prepare(self, connection: psycopg.Connection[Any]) -> None:
        with connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            present = {row[0] for row in connection.execute(_PRESENT, (sorted(_TABLES),))}
            if not present:  # a new journal
                for statement in _SCHEMA:
                    connection.execute(statement)
                with connection.cursor() as cursor:
                    cursor.executemany(
                        "INSERT INTO kova_journal_meta (key, value) VALUES (%s, %s)",
                        [("schema", str(SCHEMA_VERSION)), ("id", os.urandom(16).hex())],
                    )
            self._id = check_opened(connection.execute, present, repr(self))
        self._ready = True

    def _check_same(self, connection: psycopg.Connection[Any]) -> None:
        """The database still holds the journal this object opened (not emptied, replaced,
        or missing a table since): else finished work would look like work never done."""
        import psycopg

        try:  # a missing table fails the transaction, which the refusal rolls back
            row = connection.execute(
                f"SELECT (SELECT value FROM kova_journal_meta WHERE key = 'id'), "
                f"(SELECT COUNT(*) FROM ({_PRESENT}) AS present)",
                (sorted(_TABLES),),
            ).fetchone()
        except psycopg.errors.UndefinedTable:
            row = None
        if row is None or row[0] != self._id or row[1] != len(_TABLES):
            raise changed_error(repr(self))

    def _locked(
        self, connection: psycopg.Connection[Any], turn_id: str
    ) -> tuple[str | None, float, float] | None:
        """The turn's owner and lease, locked for this transaction, and the server's now."""
        row = connection.execute(
            f"SELECT owner, lease_until, {_NOW} FROM kova_turns WHERE turn_id = %s FOR UPDATE",
            (turn_id,),
        ).fetchone()
        return None if row is None else (row[0], float(row[1]), float(row[2]))

    def _claim(self, connection: psycopg.Connection[Any], turn_id: str, owner: str) -> float:
        row = self._locked(connection, turn_id)
        if row is None:
            created = connection.execute(
                f"INSERT INTO kova_turns (turn_id, owner, lease_until, updated) "
                f"VALUES (%s, %s, {_NOW} + %s, {_NOW}) ON CONFLICT (turn_id) DO NOTHING "
                "RETURNING lease_until",
                (turn_id, owner, self.lease),
            ).fetchone()
            if created is not None:
                return float(created[0])
            row = self._locked(connection, turn_id)  # made meanwhile: claim it as it is
            assert row is not None
        holder, lease_until, now = row
        if holder is not None and holder != owner and lease_until > now:
            raise TurnClaimedError(turn_id, _local_time(lease_until, now))
        until = now + self.lease
        connection.execute(
            "UPDATE kova_turns SET owner = %s, lease_until = %s, updated = %s WHERE turn_id = %s",
            (owner, until, now, turn_id),
        )
        return until

    def _owned(self, connection: psycopg.Connection[Any], turn_id: str, owner: str) -> float:
        row = self._locked(connection, turn_id)
        if row is None or row[0] != owner:
            raise TurnClaimedError(turn_id)
        # Still ours (nobody took it, even if the lease ran out): the write renews it.
        now = row[2]
        connection.execute(
            "UPDATE kova_turns SET lease_until = %s, updated = %s WHERE turn_id = %s",
            (now + self.lease, now, turn_id),
        )
        return now

    def _where(self) -> str:
        return repr(self)

    def _transaction(
        self, connection: psycopg.Connection[Any], *, write: bool = True
    ) -> AbstractContextManager[None]:
        return nullcontext()  # _in_thread runs every operation in one transaction

    def _execute(
        self, connection: psycopg.Connection[Any], statement: str, parameters: tuple[object, ...]
    ) -> Any:
        return connection.execute(marks(statement), parameters)

    def _execute_many(
        self, connection: psycopg.Connection[Any], statement: str, rows: list[tuple[object, ...]]
    ) -> None:
        with connection.cursor() as cursor:
            cursor.executemany(marks(statement), rows)


class PostgresJournalClaim(JournalClaim):
    """One runner's hold on one turn in a :class:`PostgresJournal` (as
    :class:`~kova.durable.JournalClaim` is in a SQLite one; its ``lease_until`` is by the
    database server's clock)."""

    __slots__ = ()


PostgresJournal._claim_type = PostgresJournalClaim


def _local_time(server_time: float, server_now: float) -> float:
    """A server-clock time as this machine's ``time.time()`` (what TurnClaimedError shows)."""
    import time

    return time.time() + (server_time - server_now)


def _nothing(connection: object) -> None:
    return None
