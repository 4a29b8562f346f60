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
:class:`~kova.errors.SessionConflictError`. Before that, a turn takes the session's hold
(:mod:`kova.sessions._sql`), so a second turn on any machine waits its turn; a holder's
lease is measured by the database server's clock, and a holder that died frees the session
when its lease runs out (a process id means nothing across machines). The tables are made
on first use (under an advisory lock, so processes starting together do not race); a
database written by a newer kova is refused with :class:`~kova.errors.SessionError`.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from .._errors import SessionError
from .._extras import require_extra as _require_extra
from ..durable._journal import marks as _marks
from ._sql import HOLDS_INDEX, Sql, SqlSessionStore
from ._store import message_from_text, view_from_text
from ._view import SessionState

if TYPE_CHECKING:
    import builtins
    from collections.abc import Callable, Iterator, Sequence

    import psycopg
    from psycopg_pool import ConnectionPool

    from ..durable._postgres import PostgresJournal

__all__ = ["PostgresSessionStore"]

_require_extra("postgres", "kova.sessions.PostgresSessionStore")

_T = TypeVar("_T")

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
        view_covers INTEGER NOT NULL DEFAULT 0,
        resumed TEXT
    )""",
    # A database of an earlier kova (same schema, one column less):
    "ALTER TABLE kova_sessions ADD COLUMN IF NOT EXISTS resumed TEXT",
    """CREATE TABLE IF NOT EXISTS kova_session_messages (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        turn INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    )""",
    "CREATE INDEX IF NOT EXISTS kova_sessions_updated ON kova_sessions (updated)",
    """CREATE TABLE IF NOT EXISTS kova_session_holds (
        ticket BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_id TEXT NOT NULL,
        owner TEXT NOT NULL,
        lease_until DOUBLE PRECISION NOT NULL
    )""",
    HOLDS_INDEX,
)

_HOLD_KEY = 0x6B6F7661  # "kova": the first key of a session's advisory lock on its holds


class PostgresSessionStore(SqlSessionStore):
    """Sessions in PostgreSQL: ``async with PostgresSessionStore(dsn) as store``.

    Args:
        dsn: a libpq connection string or URI (``"postgresql://user@host/db"``); the store
            opens a ``psycopg_pool.ConnectionPool`` of its own and closes it at the end of
            its block.
        pool: a ``psycopg_pool.ConnectionPool`` you opened (not with ``dsn``); the store
            uses it and leaves it open.
        max_size: the store's own pool's size (how many operations run at once).
        timeout: seconds an operation waits for a connection from the pool.
        lease: seconds a turn's hold on its session lasts unless renewed (renewed every
            third of it while the turn runs; a holder that died frees it when it runs out).
        wait_timeout: seconds a turn waits for a busy session unless its session says
            otherwise (``store.session(id, timeout=...)``); ``None``: as long as it takes.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        pool: ConnectionPool[Any] | None = None,
        max_size: int = 4,
        timeout: float = 30.0,
        lease: float = 30.0,
        wait_timeout: float | None = None,
    ) -> None:
        from ..durable._postgres import PgPool  # here: the extra is checked by now

        self._pg = PgPool("PostgresSessionStore", dsn, pool, max_size, timeout)
        self.pool = self._pg.pool
        super().__init__(threads=self.pool.max_size, lease=lease, wait_timeout=wait_timeout)
        self._ready = False

    _postgres = True

    def __repr__(self) -> str:
        return f"PostgresSessionStore(pool={self.pool.name!r})"

    async def __aenter__(self) -> PostgresSessionStore:
        await self._pg.opened(self._run)
        return self

    async def aclose(self) -> None:
        await self._pg.aclose()

    def journal(self, **options: Any) -> PostgresJournal:
        """A :class:`~kova.durable.PostgresJournal` on this store's pool (``options`` as for
        it): sessions and journaled turns in one database."""
        from ..durable._postgres import PostgresJournal

        return PostgresJournal(pool=self.pool, **options)

    # -- worker-thread side ------------------------------------------------------------------

    def _sql(self, connection: psycopg.Connection[Any]) -> Sql:
        return _Postgres(connection)

    def _in_thread(self, function: Callable[..., _T], args: tuple[object, ...]) -> _T:
        try:
            with self._pg.connection() as connection:  # commits, or rolls back on an error
                if not self._ready:
                    self._prepare(connection)
                return function(connection, *args)
        except self._pg.errors as exc:
            raise SessionError(f"session store {self!r}: {exc}") from None

    def _prepare(self, connection: psycopg.Connection[Any]) -> None:
        with connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            for statement in _SCHEMA:
                connection.execute(statement)
            self._check_schema(self._sql(connection))
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
            "WHERE m.session_id = s.id) END, s.resumed "
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
            resumed=row[9],
        )


class _Postgres(Sql):
    """The shared code's dialect on a psycopg connection."""

    __slots__ = ()

    for_update = " FOR UPDATE"

    def run(self, statement: str, parameters: Sequence[object] = ()) -> Any:
        return self.connection.execute(_marks(statement), parameters)

    def many(self, statement: str, rows: builtins.list[tuple[object, ...]]) -> None:
        with self.connection.cursor() as cursor:
            cursor.executemany(_marks(statement), rows)

    @contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[None]:
        with self.connection.transaction():
            yield

    def now(self) -> float:
        row = self.connection.execute("SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8")
        return float(row.fetchone()[0])

    def insert_ticket(self, session_id: str, owner: str, until: float) -> int:
        row = self.connection.execute(
            "INSERT INTO kova_session_holds (session_id, owner, lease_until) "
            "VALUES (%s, %s, %s) RETURNING ticket",
            (session_id, owner, until),
        ).fetchone()
        return int(row[0])

    def lock_session(self, session_id: str) -> None:
        # Tickets are numbered by a sequence, which is not in commit order: taken under a
        # per-session lock, they are.
        self.connection.execute(
            "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_HOLD_KEY, session_id)
        )
