"""Sessions in PostgreSQL, for many processes and machines (the ``postgres`` extra:
psycopg 3 and psycopg_pool).

**Threads, not psycopg's async API.** psycopg's async connections and its async pool are
built on asyncio (they wait on the socket through the asyncio loop and keep asyncio tasks
and locks), so they cannot run on trio. kova uses psycopg's blocking API and its
``ConnectionPool`` instead, each operation one short transaction run in a worker thread
(``trio.to_thread.run_sync``, under a ``trio.CapacityLimiter`` as large as the pool, so no
thread waits for a connection while holding one of trio's). A thread hop costs tens of
microseconds against a database round trip of about as much or more; the bench
(``bench/sessions.py``) measures the whole against raw psycopg doing the same statements.
An operation is never abandoned half-done: a cancelled caller waits for the commit or
rollback.

A write locks the session's row (``SELECT ... FOR UPDATE``; a new session is inserted with
``ON CONFLICT DO NOTHING``) and checks its version in the same transaction, so two writers,
wherever they run, never both append after the same message: the second gets
:class:`~kova.errors.SessionConflictError`. The tables are made on first use (under an
advisory lock, so processes starting together do not race); a database written by a newer
kova is refused with :class:`~kova.errors.SessionError`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from .._errors import SessionConflictError, SessionError
from .._extras import require_extra as _require_extra
from ._store import (
    MessageCache,
    SessionInfo,
    SessionState,
    SessionStore,
    SessionWrite,
    check_session_id,
    message_from_text,
    message_to_text,
    view_from_text,
    view_update,
)

if TYPE_CHECKING:
    import builtins
    from collections.abc import Callable
    from decimal import Decimal

    import psycopg
    from psycopg_pool import ConnectionPool

    from ..agent import Budget
    from ..durable._postgres import PostgresJournal

__all__ = ["PostgresSessionStore"]

_require_extra("postgres", "kova.sessions.PostgresSessionStore")

_T = TypeVar("_T")

SCHEMA_VERSION = 1

_LOCK_KEY = 0x6B6F76615F736573  # "kova_ses": the advisory lock taken to make the tables

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS kova_session_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS kova_sessions (
        id TEXT PRIMARY KEY,
        version BIGINT NOT NULL,
        created DOUBLE PRECISION NOT NULL,
        updated DOUBLE PRECISION NOT NULL,
        title TEXT,
        messages INTEGER NOT NULL,
        input_tokens BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        pending TEXT,
        view TEXT,
        view_covers INTEGER NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE IF NOT EXISTS kova_session_messages (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        turn INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    )""",
    "CREATE INDEX IF NOT EXISTS kova_sessions_updated ON kova_sessions (updated)",
)


def _imports() -> tuple[Any, Any]:
    import psycopg
    import psycopg_pool

    return psycopg, psycopg_pool


class PostgresSessionStore(SessionStore):
    """Sessions in PostgreSQL: ``async with PostgresSessionStore(dsn) as store``.

    Args:
        dsn: a libpq connection string or URI (``"postgresql://user@host/db"``); the store
            opens a ``psycopg_pool.ConnectionPool`` of its own and closes it at the end of
            its block.
        pool: a ``psycopg_pool.ConnectionPool`` you opened (not with ``dsn``); the store
            uses it and leaves it open.
        max_size: the store's own pool's size (how many operations run at once).
        timeout: seconds an operation waits for a connection from the pool.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        pool: ConnectionPool[Any] | None = None,
        max_size: int = 4,
        timeout: float = 30.0,
    ) -> None:
        _, psycopg_pool = _imports()
        if (dsn is None) == (pool is None):
            raise TypeError("PostgresSessionStore takes a dsn or a pool= (one of them)")
        if dsn is not None and not isinstance(dsn, str):
            raise TypeError(f"dsn must be a str, got {type(dsn).__name__}")
        if pool is not None and not isinstance(pool, psycopg_pool.ConnectionPool):
            raise TypeError(
                f"pool must be a psycopg_pool.ConnectionPool, got {type(pool).__name__} "
                "(psycopg's AsyncConnectionPool runs on asyncio, not trio)"
            )
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise ValueError(f"max_size must be a positive int, got {max_size!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._own = pool is None
        if pool is None:
            pool = psycopg_pool.ConnectionPool(
                dsn,
                min_size=1,
                max_size=max_size,
                open=False,
                timeout=float(timeout),
            )
        self.pool: ConnectionPool[Any] = pool
        self._timeout = float(timeout)
        self._threads = pool.max_size
        self._limiter: trio.CapacityLimiter | None = None
        self._ready = False
        self._cache = MessageCache()

    def __repr__(self) -> str:
        return f"PostgresSessionStore(pool={self.pool.name!r})"

    async def __aenter__(self) -> PostgresSessionStore:
        try:
            await self._run(_nothing)  # opens the pool, makes the tables, or says why not
        except BaseException:
            with trio.CancelScope(shield=True):
                await self.aclose()
            raise
        return self

    async def aclose(self) -> None:
        if self._own and not self.pool.closed:
            await trio.to_thread.run_sync(self.pool.close)

    def journal(self, **options: Any) -> PostgresJournal:
        """A :class:`~kova.durable.PostgresJournal` on this store's pool (``options`` as for
        it): sessions and journaled turns in one database."""
        from ..durable._postgres import PostgresJournal

        return PostgresJournal(pool=self.pool, **options)

    def budget(
        self,
        amount: Decimal | int | str | float,
        *,
        window: object = None,
        name: str = "default",
    ) -> Budget:
        """A :class:`~kova.agent.Budget` kept in this store's database under ``name``:
        shared by every process, on any machine, that makes it from the same database and
        name (docs/cost.md)."""
        from ._budget import postgres_budget

        return postgres_budget(self, amount, window=window, name=name)

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

    # -- worker-thread side ------------------------------------------------------------------

    async def _run(self, function: Callable[..., _T], *args: object) -> _T:
        limiter = self._limiter
        if limiter is None:
            limiter = self._limiter = trio.CapacityLimiter(self._threads)
        return await trio.to_thread.run_sync(self._in_thread, function, args, limiter=limiter)

    def _in_thread(self, function: Callable[..., _T], args: tuple[object, ...]) -> _T:
        psycopg, psycopg_pool = _imports()
        pool = self.pool
        try:
            if self._own and pool.closed:
                pool.open(wait=True, timeout=self._timeout)
            with pool.connection() as connection:  # commits, or rolls back on an error
                if not self._ready:
                    self._prepare(connection)
                return function(connection, *args)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise SessionError(f"session store {self!r}: {exc}") from None

    def _prepare(self, connection: psycopg.Connection[Any]) -> None:
        with connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            for statement in _SCHEMA:
                connection.execute(statement)
            row = connection.execute(
                "SELECT value FROM kova_session_meta WHERE key = 'schema'"
            ).fetchone()
            if row is None:
                connection.execute(
                    "INSERT INTO kova_session_meta (key, value) VALUES ('schema', %s)",
                    (str(SCHEMA_VERSION),),
                )
            elif int(row[0]) > SCHEMA_VERSION:
                raise SessionError(
                    f"session store {self!r}: the database was written by a newer kova "
                    f"(schema {row[0]}, this kova reads {SCHEMA_VERSION})"
                )
        self._ready = True

    def _read(self, connection: psycopg.Connection[Any], session_id: str) -> SessionState:
        # One statement, so one snapshot and one round trip: the session's row, and its
        # messages unless this store holds them already for the version found.
        cached = self._cache.entry(session_id)
        version, created = (-1, -1.0) if cached is None else cached[:2]
        row = connection.execute(
            "SELECT s.version, s.pending, s.title, s.created, s.view, s.view_covers, "
            "s.version = %s AND s.created = %s, "
            "CASE WHEN s.version = %s AND s.created = %s THEN NULL ELSE "
            "(SELECT array_agg(m.turn ORDER BY m.seq) FROM kova_session_messages m "
            "WHERE m.session_id = s.id) END, "
            "CASE WHEN s.version = %s AND s.created = %s THEN NULL ELSE "
            "(SELECT array_agg(m.body ORDER BY m.seq) FROM kova_session_messages m "
            "WHERE m.session_id = s.id) END "
            "FROM kova_sessions s WHERE s.id = %s",
            (version, created, version, created, version, created, session_id),
        ).fetchone()
        if row is None:
            self._cache.drop(session_id)
            return SessionState(version=0)
        if row[6] and cached is not None:
            messages, turns = cached[2], cached[3]
        else:
            where = f"session {session_id!r}"
            messages = tuple(message_from_text(body, where) for body in row[8] or ())
            turns = tuple(row[7] or ())
            self._cache.put(session_id, row[0], row[3], messages, turns)
        return SessionState(
            version=row[0],
            messages=messages,
            turns=turns,
            pending=row[1],
            title=row[2],
            view=view_from_text(row[4], f"session {session_id!r}"),
            view_covers=row[5],
        )

    def _write(
        self,
        connection: psycopg.Connection[Any],
        session_id: str,
        change: SessionWrite,
        rows: builtins.list[str],
    ) -> int:
        now = time.time()
        with connection.transaction():
            row = connection.execute(
                "SELECT version, messages, created, view_covers FROM kova_sessions "
                "WHERE id = %s FOR UPDATE",
                (session_id,),
            ).fetchone()
            created = now if row is None else row[2]
            replace, view, view_covers = view_update(change, 0 if row is None else row[3])
            if row is None:
                if change.version != 0:
                    raise SessionConflictError(session_id, change.version, 0)
                if change.keep != 0:
                    raise ValueError(f"keep must be between 0 and 0, got {change.keep}")
                made = connection.execute(
                    "INSERT INTO kova_sessions (id, version, created, updated, title, messages, "
                    "input_tokens, output_tokens, pending, view, view_covers) "
                    "VALUES (%s, 1, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (id) DO NOTHING RETURNING version",
                    (
                        session_id,
                        now,
                        now,
                        change.title,
                        len(rows),
                        change.input_tokens,
                        change.output_tokens,
                        change.pending,
                        view,
                        view_covers,
                    ),
                ).fetchone()
                if made is None:  # another writer made it first
                    raise SessionConflictError(session_id, 0, 1)
                version, keep = 0, 0
            else:
                version, count, _, _ = row
                if version != change.version:
                    raise SessionConflictError(session_id, change.version, version)
                keep = change.keep
                if not 0 <= keep <= count:
                    raise ValueError(f"keep must be between 0 and {count}, got {keep}")
                if keep < count:
                    connection.execute(
                        "DELETE FROM kova_session_messages WHERE session_id = %s AND seq >= %s",
                        (session_id, keep),
                    )
                connection.execute(
                    "UPDATE kova_sessions SET version = version + 1, updated = %s, "
                    "title = COALESCE(%s, title), messages = %s, "
                    "input_tokens = input_tokens + %s, output_tokens = output_tokens + %s, "
                    "pending = %s, view = CASE WHEN %s THEN %s ELSE view END, "
                    "view_covers = CASE WHEN %s THEN %s ELSE view_covers END WHERE id = %s",
                    (
                        now,
                        change.title,
                        keep + len(rows),
                        change.input_tokens,
                        change.output_tokens,
                        change.pending,
                        replace,
                        view,
                        replace,
                        view_covers,
                        session_id,
                    ),
                )
            if rows:
                with connection.cursor() as cursor:
                    cursor.executemany(
                        "INSERT INTO kova_session_messages (session_id, seq, turn, body) "
                        "VALUES (%s, %s, %s, %s)",
                        [
                            (session_id, keep + index, change.turn, body)
                            for index, body in enumerate(rows)
                        ],
                    )
        self._cache.wrote(session_id, int(version), created, change)
        return int(version) + 1

    def _list(self, connection: psycopg.Connection[Any]) -> builtins.list[SessionInfo]:
        rows = connection.execute(
            "SELECT id, created, updated, title, messages, input_tokens, output_tokens, "
            "pending IS NOT NULL FROM kova_sessions ORDER BY updated DESC, id"
        ).fetchall()
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

    def _delete(self, connection: psycopg.Connection[Any], session_id: str) -> None:
        self._cache.drop(session_id)
        with connection.transaction():
            connection.execute(
                "DELETE FROM kova_session_messages WHERE session_id = %s", (session_id,)
            )
            connection.execute("DELETE FROM kova_sessions WHERE id = %s", (session_id,))


def _nothing(connection: object) -> None:
    return None
