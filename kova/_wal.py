"""Switching an SQLite file to WAL mode when other processes open it at the same moment.

``PRAGMA journal_mode=WAL`` needs the file to itself. Two processes opening a new session
store or journal at once (a fleet starting, a test's writers) race for that: the loser gets
"database is locked" at once, without waiting in SQLite's busy handler, so the connection's
busy timeout does not help. The switch is made once per file (WAL is then persistent), so
trying again for a moment is all it takes. Runs in a worker thread (blocking sleeps).
"""

from __future__ import annotations

import sqlite3
import time

__all__ = ["transaction", "use_wal"]


def use_wal(connection: sqlite3.Connection, timeout: float) -> str:
    """Put ``connection``'s file in WAL mode; the mode it is in afterwards (``"wal"``).

    Raises:
        sqlite3.OperationalError: still locked after ``timeout`` seconds, or another error.
    """
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        try:
            return str(connection.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


class transaction:
    """``with transaction(connection):`` ``BEGIN IMMEDIATE`` (a writer takes the file's lock
    up front, so what it read is still so when it writes), or ``BEGIN`` to read (``write=False``)
    ... ``COMMIT``, or ``ROLLBACK`` on any error. For a connection opened with
    ``isolation_level=None`` (the session store's and the journal's)."""

    __slots__ = ("_connection", "_write")

    def __init__(self, connection: sqlite3.Connection, *, write: bool = True) -> None:
        self._connection = connection
        self._write = write

    def __enter__(self) -> None:
        self._connection.execute("BEGIN IMMEDIATE" if self._write else "BEGIN")

    def __exit__(self, exc_type: object, exc: object, traceback: object) -> None:
        self._connection.execute("ROLLBACK" if exc_type is not None else "COMMIT")
