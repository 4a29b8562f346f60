"""Many connections putting a new SQLite file in WAL mode at the same moment (a fleet of
session-store or journal processes starting): none fails with "database is locked"."""

from __future__ import annotations

import sqlite3
import threading
from typing import TYPE_CHECKING

from kova._wal import use_wal

if TYPE_CHECKING:
    from pathlib import Path


def _race(path: Path, switch: object, count: int = 12) -> list[BaseException]:
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def opener() -> None:
        connection = sqlite3.connect(path, timeout=5.0, isolation_level=None)
        try:
            barrier.wait()
            mode = switch(connection)  # type: ignore[operator]
            assert mode == "wal", mode
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("CREATE TABLE IF NOT EXISTS t (x)")
            connection.execute("COMMIT")
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=opener) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_connections_switching_a_new_file_to_wal_at_once_all_succeed(tmp_path: Path) -> None:
    for round_number in range(60):  # the race is lost ~1 round in 10 without the retry
        errors = _race(tmp_path / f"s{round_number}.db", lambda c: use_wal(c, 5.0))
        assert errors == []
