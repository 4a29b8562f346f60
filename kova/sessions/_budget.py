"""A :class:`~kova.agent.Budget` shared by processes, kept in a session store:
``store.budget(amount, window=None, name="default")`` on a :class:`SqliteSessionStore` (the
processes of one machine) or a :class:`PostgresSessionStore` (of many machines).

Every process (and every agent of each) that makes the same budget from the same store and
name shares its figures: each reservation and settlement is one transaction (SQLite's
``BEGIN IMMEDIATE``, PostgreSQL's advisory lock on the budget's name), so calls in flight in
any process never together hold more than the budget has left.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from decimal import Decimal
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

from .._errors import BuildError
from .._wal import transaction
from ..agent import Budget

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Iterator
    from typing import Any

    import psycopg

__all__ = ["store_budget"]

_ZERO: Final = Decimal(0)

_HOLD_SECONDS: Final = 3_600.0
"""A hold not settled this long after it was made (its process died mid-call) counts as
spent: the call may have been billed up to it."""

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS kova_budget_holds ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, budget TEXT NOT NULL, amount TEXT NOT NULL,"
    " spent INTEGER NOT NULL, at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS kova_budget_holds_by_budget ON kova_budget_holds (budget)",
    "CREATE TABLE IF NOT EXISTS kova_budgets (name TEXT PRIMARY KEY, spent TEXT NOT NULL)",
)


_T = TypeVar("_T")


class _Store(Protocol):
    """What a ledger needs of its store (kova.sessions._sql.SqlSessionStore, which makes the
    budgets: typed by shape, so that module and this one import each other in one way)."""

    _postgres: bool

    async def _run(self, function: Callable[..., _T], *args: object) -> _T: ...


class _Ledger:
    """A budget's figures in a session store's database, shared by every process using it.
    In a :class:`~kova.sessions.SqliteSessionStore`'s file each reservation and settlement
    is one write transaction (``BEGIN IMMEDIATE``: SQLite serializes them across processes)
    and times are the machine's wall clock (``time.time()``, the one clock processes share);
    in a :class:`~kova.sessions.PostgresSessionStore`'s database each takes a
    transaction-scoped advisory lock on the budget's name, and times are the database
    server's clock (the one the machines share).

    Rows of ``kova_budget_holds`` are the calls in flight (``spent = 0``, ``at``: when the
    hold was made) and, for a budget with a window, the settled calls (``spent = 1``, ``at``:
    when settled). A budget without one keeps its settled total in ``kova_budgets``.
    """

    __slots__ = ("_name", "_ready", "_store", "where")

    def __init__(self, store: _Store, where: str, name: str) -> None:
        self._store = store
        self._name = name
        self._ready = not store._postgres  # SQLite makes the tables in each transaction
        self.where = f"{where}:{name}"

    async def reserve(self, budget: Budget, needed: Decimal) -> tuple[int | None, Decimal, Decimal]:
        run, name, amount, window = self._store._run, self._name, budget._amount, budget._window
        if not self._ready:
            await run(_pg_prepare)
            self._ready = True
        if self._store._postgres:
            return await run(_pg_reserve, name, amount, window, needed)
        return await run(_reserve, name, amount, window, needed, time.time())

    async def settle(
        self, budget: Budget, entry: int, held: Decimal, cost: Decimal
    ) -> tuple[Decimal, Decimal]:
        run, name, window = self._store._run, self._name, budget._window
        if self._store._postgres:
            return await run(_pg_settle, name, window, entry, cost)
        return await run(_settle, name, window, entry, cost, time.time())


@contextmanager
def _transaction(connection: sqlite3.Connection) -> Iterator[None]:
    """One write transaction that makes the tables first (in it: one write lock, and cheap
    once made)."""
    with transaction(connection):
        for statement in _SCHEMA:
            connection.execute(statement)
        yield


def _figures(
    connection: Any, name: str, window: float | None, now: float, mark: str = "?"
) -> tuple[Decimal, Decimal]:
    """(spent, reserved) of budget ``name`` now, inside the caller's transaction (on SQLite
    or PostgreSQL: ``mark`` is the database's parameter mark)."""
    spent = _ZERO
    reserved = _ZERO
    if window is None:
        row = connection.execute(
            f"SELECT spent FROM kova_budgets WHERE name = {mark}", (name,)
        ).fetchone()
        if row is not None:
            spent = Decimal(row[0])
    else:
        connection.execute(
            f"DELETE FROM kova_budget_holds WHERE budget = {mark} AND at <= {mark}"
            f" AND (spent OR at <= {mark})",
            (name, now - window, now - window - _HOLD_SECONDS),
        )
    rows = connection.execute(
        f"SELECT amount, spent, at FROM kova_budget_holds WHERE budget = {mark}", (name,)
    ).fetchall()
    for amount, settled, at in rows:
        if settled or at + _HOLD_SECONDS <= now:  # settled, or its process died mid-call
            spent += Decimal(amount)
        else:
            reserved += Decimal(amount)
    return spent, reserved


def _settled(
    connection: Any,
    name: str,
    window: float | None,
    entry: int,
    cost: Decimal,
    now: float,
    mark: str = "?",
) -> None:
    """Hold ``entry`` settled at ``cost``, inside the caller's transaction: a budget with a
    window keeps the call as a row until it leaves the window, one without adds it to its
    total."""
    if window is not None and cost:
        connection.execute(
            f"UPDATE kova_budget_holds SET amount = {mark}, spent = true, at = {mark}"
            f" WHERE id = {mark}",
            (str(cost), now, entry),
        )
        return
    connection.execute(f"DELETE FROM kova_budget_holds WHERE id = {mark}", (entry,))
    if window is None and cost:
        row = connection.execute(
            f"SELECT spent FROM kova_budgets WHERE name = {mark}", (name,)
        ).fetchone()
        total = cost + (Decimal(row[0]) if row is not None else _ZERO)
        connection.execute(
            f"INSERT INTO kova_budgets (name, spent) VALUES ({mark}, {mark})"
            " ON CONFLICT (name) DO UPDATE SET spent = excluded.spent",
            (name, str(total)),
        )


def _reserve(
    connection: sqlite3.Connection,
    name: str,
    amount: Decimal,
    window: float | None,
    needed: Decimal,
    now: float,
) -> tuple[int | None, Decimal, Decimal]:
    with _transaction(connection):
        spent, reserved = _figures(connection, name, window, now)
        if needed > amount - spent - reserved:
            return None, spent, reserved
        cursor = connection.execute(
            "INSERT INTO kova_budget_holds (budget, amount, spent, at) VALUES (?, ?, 0, ?)",
            (name, str(needed), now),
        )
    entry = cursor.lastrowid
    assert entry is not None
    return entry, spent, reserved + needed


def _settle(
    connection: sqlite3.Connection,
    name: str,
    window: float | None,
    entry: int,
    cost: Decimal,
    now: float,
) -> tuple[Decimal, Decimal]:
    with _transaction(connection):
        _settled(connection, name, window, entry, cost, now)
        return _figures(connection, name, window, now)


# -- PostgreSQL ---------------------------------------------------------------------------

_PG_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS kova_budget_holds ("
    " id BIGSERIAL PRIMARY KEY, budget TEXT NOT NULL, amount TEXT NOT NULL,"
    " spent BOOLEAN NOT NULL, at DOUBLE PRECISION NOT NULL)",
    "CREATE INDEX IF NOT EXISTS kova_budget_holds_by_budget ON kova_budget_holds (budget)",
    "CREATE TABLE IF NOT EXISTS kova_budgets (name TEXT PRIMARY KEY, spent TEXT NOT NULL)",
)
_PG_TABLES_KEY: Final = 0x6B6F76615F627564  # "kova_bud": the lock taken to make the tables


def _pg_prepare(connection: psycopg.Connection[Any]) -> None:
    """Make the tables (once per ledger; the lock keeps two processes from racing on it)."""
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_TABLES_KEY,))
        for statement in _PG_SCHEMA:
            connection.execute(statement)


def _pg_begin(connection: psycopg.Connection[Any], name: str) -> float:
    """Lock budget ``name`` for this transaction; the database server's time now."""
    row = connection.execute(
        "SELECT pg_advisory_xact_lock(hashtext(%s)), extract(epoch FROM clock_timestamp())",
        ("kova-budget:" + name,),
    ).fetchone()
    assert row is not None
    return float(row[1])


def _pg_reserve(
    connection: psycopg.Connection[Any],
    name: str,
    amount: Decimal,
    window: float | None,
    needed: Decimal,
) -> tuple[int | None, Decimal, Decimal]:
    now = _pg_begin(connection, name)
    spent, reserved = _figures(connection, name, window, now, "%s")
    if needed > amount - spent - reserved:
        return None, spent, reserved
    row = connection.execute(
        "INSERT INTO kova_budget_holds (budget, amount, spent, at)"
        " VALUES (%s, %s, false, %s) RETURNING id",
        (name, str(needed), now),
    ).fetchone()
    assert row is not None
    return int(row[0]), spent, reserved + needed


def _pg_settle(
    connection: psycopg.Connection[Any],
    name: str,
    window: float | None,
    entry: int,
    cost: Decimal,
) -> tuple[Decimal, Decimal]:
    now = _pg_begin(connection, name)
    _settled(connection, name, window, entry, cost, now, "%s")
    return _figures(connection, name, window, now, "%s")


def store_budget(
    store: _Store, amount: Decimal | int | str | float, window: object, name: str
) -> Budget:
    """A :class:`~kova.agent.Budget` of ``amount`` kept in ``store`` under ``name``, in its
    SQLite file or PostgreSQL database."""
    if not isinstance(name, str) or not name:
        raise BuildError(f"a budget's name must be a non-empty str, got {name!r}")
    budget = Budget(amount, window=window)
    budget._ledger = _Ledger(store, repr(store), name)
    return budget
