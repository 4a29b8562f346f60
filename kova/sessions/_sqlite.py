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
:class:`~kova.errors.SessionConflictError`.

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

import trio

from .._errors import SessionConflictError, SessionError
from .._wal import use_wal
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
    from typing import Any

    from ..agent import Budget
    from ..durable import SqliteJournal

__all__ = ["SqliteSessionStore"]

_T = TypeVar("_T")

SCHEMA_VERSION = 1

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
    view_covers INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS kova_session_messages (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    turn INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS kova_sessions_updated ON kova_sessions (updated);
"""


class SqliteSessionStore(SessionStore):
    """Sessions in one SQLite file: ``async with SqliteSessionStore("chat.db") as store``.

    Safe to share between tasks, threads and processes on one machine (not over a network
    file system: SQLite's locks need a local one). The file and its tables are made on first
    use; a file written by a newer kova is refused with :class:`~kova.errors.SessionError`.

    Args:
        path: the database file (made if missing).
        busy_timeout: seconds an operation waits for another process's write lock.
        threads: how many operations run at once (worker threads, each with a connection).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0, threads: int = 4
    ) -> None:
        if not isinstance(path, str | os.PathLike):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, int | float):
            raise TypeError(f"busy_timeout must be a number of seconds, got {busy_timeout!r}")
        if not 0 < busy_timeout < float("inf"):
            raise ValueError("busy_timeout must be a positive, finite number of seconds")
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive int, got {threads!r}")
        self.path = Path(path)
        self._busy_timeout = float(busy_timeout)
        self._threads = threads
        self._limiter: trio.CapacityLimiter | None = None
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._ready = False
        self._closed = False
        self._cache = MessageCache()

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

    def budget(
        self,
        amount: Decimal | int | str | float,
        *,
        window: object = None,
        name: str = "default",
    ) -> Budget:
        """A :class:`~kova.agent.Budget` kept in this store's file under ``name``: shared by
        every process that makes it from the same file and name (docs/cost.md)."""
        from ._budget import sqlite_budget

        return sqlite_budget(self, amount, window=window, name=name)

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
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    connection.execute(statement)
            row = connection.execute(
                "SELECT value FROM kova_session_meta WHERE key = 'schema'"
            ).fetchone()
            if row is None:
                connection.execute(
                    "INSERT INTO kova_session_meta (key, value) VALUES ('schema', ?)",
                    (str(SCHEMA_VERSION),),
                )
            elif int(row[0]) > SCHEMA_VERSION:
                raise SessionError(
                    f"session store {str(self.path)!r} was written by a newer kova "
                    f"(schema {row[0]}, this kova reads {SCHEMA_VERSION})"
                )
        self._ready = True

    def _read(self, connection: sqlite3.Connection, session_id: str) -> SessionState:
        with _transaction(connection, write=False):
            row = connection.execute(
                "SELECT version, pending, title, created, view, view_covers FROM kova_sessions "
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
        )

    def _write(
        self,
        connection: sqlite3.Connection,
        session_id: str,
        change: SessionWrite,
        rows: builtins.list[str],
    ) -> int:
        now = time.time()
        with _transaction(connection):
            row = connection.execute(
                "SELECT version, messages, created, view_covers FROM kova_sessions WHERE id = ?",
                (session_id,),
            ).fetchone()
            version, count, created, covers = (0, 0, now, 0) if row is None else row
            if version != change.version:
                raise SessionConflictError(session_id, change.version, version)
            keep = change.keep
            if not 0 <= keep <= count:
                raise ValueError(f"keep must be between 0 and {count}, got {keep}")
            if keep < count:
                connection.execute(
                    "DELETE FROM kova_session_messages WHERE session_id = ? AND seq >= ?",
                    (session_id, keep),
                )
            connection.executemany(
                "INSERT INTO kova_session_messages (session_id, seq, turn, body) "
                "VALUES (?, ?, ?, ?)",
                [(session_id, keep + index, change.turn, body) for index, body in enumerate(rows)],
            )
            total = keep + len(rows)
            replace, view, view_covers = view_update(change, covers)
            if row is None:
                connection.execute(
                    "INSERT INTO kova_sessions (id, version, created, updated, title, messages, "
                    "input_tokens, output_tokens, pending, view, view_covers) "
                    "VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                    ),
                )
            else:
                connection.execute(
                    "UPDATE kova_sessions SET version = version + 1, updated = ?, "
                    "title = COALESCE(?, title), messages = ?, "
                    "input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, "
                    "pending = ?, view = CASE WHEN ? THEN ? ELSE view END, "
                    "view_covers = CASE WHEN ? THEN ? ELSE view_covers END WHERE id = ?",
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
                        session_id,
                    ),
                )
        self._cache.wrote(session_id, version, created, change)
        return version + 1

    def _list(self, connection: sqlite3.Connection) -> builtins.list[SessionInfo]:
        with _transaction(connection, write=False):
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

    def _delete(self, connection: sqlite3.Connection, session_id: str) -> None:
        self._cache.drop(session_id)
        with _transaction(connection):
            connection.execute(
                "DELETE FROM kova_session_messages WHERE session_id = ?", (session_id,)
            )
            connection.execute("DELETE FROM kova_sessions WHERE id = ?", (session_id,))


def _nothing(connection: sqlite3.Connection) -> None:
    return None


class _transaction:
    """``BEGIN IMMEDIATE`` (or ``BEGIN`` to read) ... ``COMMIT``, or ``ROLLBACK`` on any
    error."""

    __slots__ = ("_connection", "_write")

    def __init__(self, connection: sqlite3.Connection, *, write: bool = True) -> None:
        self._connection = connection
        self._write = write

    def __enter__(self) -> None:
        self._connection.execute("BEGIN IMMEDIATE" if self._write else "BEGIN")

    def __exit__(self, exc_type: object, exc: object, traceback: object) -> None:
        self._connection.execute("ROLLBACK" if exc_type is not None else "COMMIT")
