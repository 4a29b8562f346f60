"""Sessions in one SQLite file: the embedded default, standard library only.

Every operation runs in a worker thread (``trio.to_thread.run_sync`` under a
``trio.CapacityLimiter`` of the store's own, so a burst of turns cannot take every worker
thread trio has) on a connection the store keeps open between operations, and is never
abandoned half-done: a cancelled caller waits for the commit or rollback, a matter of
milliseconds. SQLite's own API is blocking; a thread is what it takes to keep it off the
event loop.

WAL mode with ``synchronous=FULL``: a write that returned survives the process being killed
and the machine losing power; a write cut short by a crash leaves nothing (SQLite's
transaction is all or nothing). A write is ``BEGIN IMMEDIATE`` (the file's write lock up
front), then the version check, then the change, so two processes can never both append
after the same message: the second is refused with
:class:`~kova.errors.SessionConflictError`. Before that, a turn takes the session's hold
(:mod:`kova.sessions._sql`): a second turn, in this process or another, waits its turn; a
holder whose process is gone frees the session at once.

The file may be the same one a :class:`~kova.durable.SqliteJournal` uses (``store.journal()``
makes one): the tables do not overlap.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from .._errors import SessionError, check_seconds
from .._wal import transaction as _transaction
from .._wal import use_wal
from ._sql import HOLDS_INDEX, Sql, SqlSessionStore
from ._store import message_from_text, view_from_text
from ._view import SessionState

if TYPE_CHECKING:
    import builtins
    from collections.abc import Callable, Sequence
    from contextlib import AbstractContextManager
    from typing import Any

    from ..durable import SqliteJournal

__all__ = ["SqliteSessionStore"]

_T = TypeVar("_T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kova_session_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS kova_sessions (
    id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    title TEXT,
    messages INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    pending TEXT,
    view TEXT,
    view_covers INTEGER NOT NULL DEFAULT 0,
    resumed TEXT
);
CREATE TABLE IF NOT EXISTS kova_session_messages (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    turn INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS kova_sessions_updated ON kova_sessions (updated);
CREATE TABLE IF NOT EXISTS kova_session_holds (
    ticket INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    lease_until REAL NOT NULL
);
"""


class SqliteSessionStore(SqlSessionStore):
    """Sessions in one SQLite file: ``async with SqliteSessionStore("chat.db") as store``.

    Safe to share between tasks, threads and processes on one machine (not over a network
    file system: SQLite's locks need a local one). The file and its tables are made on first
    use; a file written by a newer kova is refused with :class:`~kova.errors.SessionError`.

    Args:
        path: the database file (made if missing).
        busy_timeout: seconds an operation waits for another process's write lock.
        threads: how many operations run at once (worker threads, each with a connection).
        lease: seconds a turn's hold on its session lasts unless renewed (renewed every
            third of it while the turn runs; a holder whose process is gone frees it at once).
        wait_timeout: seconds a turn waits for a busy session unless its session says
            otherwise (``store.session(id, timeout=...)``); ``None``: as long as it takes.
        clock: wall-clock seconds the leases are measured by (tests pass their own).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 30.0,
        threads: int = 4,
        lease: float = 30.0,
        wait_timeout: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(path, str | os.PathLike):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        check_seconds("busy_timeout", busy_timeout)
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive int, got {threads!r}")
        super().__init__(threads=threads, lease=lease, wait_timeout=wait_timeout)
        self.path = Path(path)
        self._busy_timeout = float(busy_timeout)
        self._clock = clock
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._ready = False
        self._closed = False

    def __repr__(self) -> str:
        return f"SqliteSessionStore({str(self.path)!r})"

    async def __aenter__(self) -> SqliteSessionStore:
        self._closed = False
        await self._run(_nothing)  # makes the file and its tables, or says why it cannot
        return self

    async def aclose(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            self._closed = True
        for connection in idle:
            connection.close()

    def journal(self, **options: Any) -> SqliteJournal:
        """A :class:`~kova.durable.SqliteJournal` on this store's file (``options`` as for
        it): sessions and journaled turns in one database."""
        from ..durable import SqliteJournal

        return SqliteJournal(self.path, **options)

    # -- worker-thread side ------------------------------------------------------------------

    def _sql(self, connection: sqlite3.Connection) -> Sql:
        return _Sqlite(connection, self._clock)

    def _connect(self) -> sqlite3.Connection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        try:
            connection = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise SessionError(f"cannot open the session store {str(self.path)!r}: {exc}") from None
        try:
            connection.execute("PRAGMA synchronous=FULL")
            if not self._ready:
                self._prepare(connection)
        except BaseException:
            connection.close()
            raise
        return connection

    def _in_thread(self, function: Callable[..., _T], args: tuple[object, ...]) -> _T:
        try:
            connection = self._connect()
            try:
                result = function(connection, *args)
            except (SessionError, ValueError):
                self._put_back(connection)  # refused, rolled back: the connection is fine
                raise
            except BaseException:
                connection.close()  # whatever state it is in: a fresh one next time
                raise
        except sqlite3.Error as exc:
            raise SessionError(f"session store {str(self.path)!r}: {exc}") from None
        self._put_back(connection)
        return result

    def _put_back(self, connection: sqlite3.Connection) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(connection)
                return
        connection.close()

    def _prepare(self, connection: sqlite3.Connection) -> None:
        mode = use_wal(connection, self._busy_timeout)
        if str(mode).lower() != "wal":
            raise SessionError(f"session store {str(self.path)!r}: cannot use WAL mode ({mode})")
        with _transaction(connection):
            for statement in (*_SCHEMA.split(";"), HOLDS_INDEX):
                if statement.strip():
                    connection.execute(statement)
            columns = {row[1] for row in connection.execute("PRAGMA table_info(kova_sessions)")}
            if "resumed" not in columns:  # a file of an earlier kova (same schema, one less)
                connection.execute("ALTER TABLE kova_sessions ADD COLUMN resumed TEXT")
            self._check_schema(self._sql(connection))
        self._ready = True

    def _read(self, connection: sqlite3.Connection, session_id: str) -> SessionState:
        with _transaction(connection, write=False):
            row = connection.execute(
                "SELECT version, pending, title, created, view, view_covers, resumed "
                "FROM kova_sessions "
                "WHERE id = ?",
                (session_id,),
            ).fetchone()
            if row is None:
                self._cache.drop(session_id)
                return SessionState(version=0)
            cached = self._cache.get(session_id, row[0], row[3])
            if cached is None:
                rows = connection.execute(
                    "SELECT turn, body FROM kova_session_messages WHERE session_id = ? "
                    "ORDER BY seq",
                    (session_id,),
                ).fetchall()
        if cached is None:
            where = f"session {session_id!r}"
            cached = (
                tuple(message_from_text(body, where) for _, body in rows),
                tuple(turn for turn, _ in rows),
            )
            self._cache.put(session_id, row[0], row[3], *cached)
        return SessionState(
            version=row[0],
            messages=cached[0],
            turns=cached[1],
            pending=row[1],
            title=row[2],
            view=view_from_text(row[4], f"session {session_id!r}"),
            view_covers=row[5],
            resumed=row[6],
        )


def _nothing(connection: sqlite3.Connection) -> None:
    return None


class _Sqlite(Sql):
    """The shared code's dialect on a SQLite connection."""

    __slots__ = ("_clock",)

    def __init__(self, connection: sqlite3.Connection, clock: Callable[[], float]) -> None:
        super().__init__(connection)
        self._clock = clock

    def run(self, statement: str, parameters: Sequence[object] = ()) -> Any:
        return self.connection.execute(statement, parameters)

    def many(self, statement: str, rows: builtins.list[tuple[object, ...]]) -> None:
        self.connection.executemany(statement, rows)

    def transaction(self, *, write: bool = True) -> AbstractContextManager[None]:
        return _transaction(self.connection, write=write)

    def now(self) -> float:
        return self._clock()

    knows_processes = True

    def insert_ticket(self, session_id: str, owner: str, until: float) -> int:
        cursor = self.connection.execute(
            "INSERT INTO kova_session_holds (session_id, owner, lease_until) VALUES (?, ?, ?)",
            (session_id, owner, until),
        )
        assert cursor.lastrowid is not None
        return int(cursor.lastrowid)

    def dead(self, owner: str) -> bool:
        from ..durable._journal import _died_on_this_machine

        return _died_on_this_machine(owner)
