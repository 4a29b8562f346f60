"""The turn journal's storage: one SQLite file that several processes share safely.

A durable turn records, before it moves on, everything it would need to go on after a crash:
the turn core's state after each transition (a snapshot of :class:`~kova.agent.Turn` as its
versioned JSON), each tool call as it starts and as it finishes (its result), and the final
response. Running the turn again with the same id reads that back: a finished turn returns
its response, finished tool calls are not run again, and a call that started but never
finished is known as such (the driver decides, by the tool's annotations, whether it may run
again).

This module is the storage only, with no knowledge of turns beyond opaque JSON text, so it is
tested on its own. It uses the standard library's :mod:`sqlite3`, off the event loop (every
operation runs in a worker thread and is never abandoned half-done: a cancelled caller waits
for the commit or rollback), in WAL mode with ``synchronous=FULL``: a committed record
survives the process being killed and the machine losing power.

**One runner per turn.** :meth:`SqliteJournal.claim` gives the turn to one owner for a lease
(default 60 s, renewed by :meth:`JournalClaim.renew`); a second process claiming the same turn
while the lease is live gets :class:`TurnClaimedError`, so two processes never both run a
step, and the driver keeps the lease alive while a step runs (:meth:`JournalClaim.kept_alive`).
A lease held by a process of this machine that no longer exists (it crashed) is free at once:
the owner id names the machine's boot, the PID namespace and the process by pid and start
time, which a later process reusing the pid does not share; where liveness cannot be known
(another boot or PID namespace, another machine), the turn waits for the lease. Every write
checks the claim in the same transaction, so an owner whose lease ran out and was taken over
cannot write any more (:class:`TurnClaimedError` again). Lease times are wall-clock
(``time.time``: the processes share no other clock).
"""

from __future__ import annotations

import abc
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from .._errors import ApprovalMismatchError, check_seconds
from .._record import Record
from .._wal import transaction as _transaction
from .._wal import use_wal
from ._errors import JournalError, TurnClaimedError

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager, AbstractContextManager

    from .._models import InferenceConfig, Message
    from ..agent._approvals import PendingApprovals
    from ..agent._driver_context import DriverContext
    from ..agent._limits import UsageLimits
    from ..agent._steps import StepObserver
    from ..agent._turn import Turn

__all__ = [
    "Journal",
    "JournalClaim",
    "JournalError",
    "JournalRecord",
    "SqliteJournal",
    "TurnClaimedError",
]

_T = TypeVar("_T")

SCHEMA_VERSION = 2
"""2: the meta table names the journal (``id``) and each turn counts its finished tool calls
(``results``), so a dropped table, an emptied file or deleted rows are refused, not read as
work never done."""

_TABLES = frozenset({"kova_journal_meta", "kova_turns", "kova_decisions", "kova_tool_calls"})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kova_journal_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS kova_turns (
    turn_id TEXT PRIMARY KEY,
    owner TEXT,
    lease_until REAL NOT NULL DEFAULT 0,
    snapshot TEXT,
    response TEXT,
    updated REAL NOT NULL,
    results INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS kova_decisions (
    nonce TEXT PRIMARY KEY,
    turn_id TEXT NOT NULL,
    used REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS kova_tool_calls (
    turn_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    started REAL NOT NULL,
    result TEXT,
    PRIMARY KEY (turn_id, call_id)
);
"""


class JournalRecord(Record):
    """What the journal holds of one turn."""

    turn_id: str
    snapshot: str | None = None
    """The turn core's JSON after its last recorded transition (``None``: nothing yet)."""
    response: str | None = None
    """The finished turn's response JSON (``None``: not finished)."""
    results: Mapping[str, str] = MappingProxyType({})
    """Finished tool calls: call id -> result JSON."""
    unfinished: frozenset[str] = frozenset()
    """Tool calls recorded as started and never as finished."""


class Journal(abc.ABC):
    """What :class:`SqliteJournal` and :class:`~kova.durable.PostgresJournal` share: the
    public operations over a backend's worker-thread ones (each runs one transaction on one
    of its connections, in a worker thread, in SQL both databases run). A backend provides
    :meth:`_run`, its claim and owner check, its owner ids and its SQL dialect."""

    lease: float
    rerun_interrupted: Mapping[str, bool]

    # -- the public operations (async: each runs in a worker thread) -------------------------

    async def claim(self, turn_id: str, *, owner: str | None = None) -> JournalClaim:
        """Take ``turn_id`` for this runner (creating its record) for :attr:`lease` seconds.

        Raises:
            TurnClaimedError: another owner's lease on it is live.
        """
        _check_id(turn_id)
        me = owner or self._new_owner()
        until = await self._run(self._claim, turn_id, me)
        return self._claim_type(self, turn_id, me, until)

    async def load(self, turn_id: str) -> JournalRecord | None:
        """What is recorded of ``turn_id`` (``None``: nothing)."""
        _check_id(turn_id)
        return await self._run(self._load, turn_id)

    async def forget(self, turn_id: str) -> None:
        """Delete everything recorded of ``turn_id`` (idempotent)."""
        _check_id(turn_id)
        await self._run(self._forget, turn_id)

    def open_turn(
        self,
        context: DriverContext,
        history: tuple[Message, ...],
        overrides: InferenceConfig | None,
        limits: UsageLimits | None,
        turn_id: object,
        pending: PendingApprovals | None = None,
    ) -> AbstractAsyncContextManager[tuple[Turn, StepObserver]]:
        """What ``agent.run`` / ``agent.stream`` / ``agent.resume`` with ``journal=self`` use
        (see :mod:`kova.durable._driver`)."""
        from ._driver import open_journaled_turn

        return open_journaled_turn(context, self, history, overrides, limits, turn_id, pending)

    # -- the operations, in a worker thread on one of the backend's connections --------------

    def _write(
        self,
        connection: Any,
        turn_id: str,
        owner: str,
        statement: str,
        parameters: tuple[object, ...],
    ) -> None:
        """Run ``statement`` if ``owner`` still holds the turn (in the same transaction)."""
        with self._transaction(connection):
            self._owned(connection, turn_id, owner)
            self._execute(connection, statement, parameters)

    def _started(self, connection: Any, turn_id: str, owner: str, call_ids: list[str]) -> None:
        with self._transaction(connection):
            now = self._owned(connection, turn_id, owner)
            self._execute_many(
                connection,
                "INSERT INTO kova_tool_calls (turn_id, call_id, started) VALUES (?, ?, ?) "
                "ON CONFLICT (turn_id, call_id) DO NOTHING",
                [(turn_id, call_id, now) for call_id in call_ids],
            )

    def _finished(
        self, connection: Any, turn_id: str, owner: str, call_id: str, result: str
    ) -> None:
        with self._transaction(connection):
            now = self._owned(connection, turn_id, owner)
            self._execute(
                connection,
                "INSERT INTO kova_tool_calls (turn_id, call_id, started, result) "
                "VALUES (?, ?, ?, ?) "
                "ON CONFLICT (turn_id, call_id) DO UPDATE SET result = excluded.result",
                (turn_id, call_id, now, result),
            )
            # The turn counts its finished calls: a load that finds fewer refuses the turn.
            self._execute(
                connection,
                "UPDATE kova_turns SET results = (SELECT COUNT(*) FROM kova_tool_calls "
                "WHERE turn_id = ? AND result IS NOT NULL) WHERE turn_id = ?",
                (turn_id, turn_id),
            )

    def _renew(self, connection: Any, turn_id: str, owner: str) -> float:
        with self._transaction(connection):
            until = self._owned(connection, turn_id, owner) + self.lease
            self._execute(
                connection,
                "UPDATE kova_turns SET lease_until = ? WHERE turn_id = ?",
                (until, turn_id),
            )
        return until

    def _use_decisions(self, connection: Any, turn_id: str, owner: str, nonce: str) -> None:
        with self._transaction(connection):
            now = self._owned(connection, turn_id, owner)
            self._execute(
                connection,
                "INSERT INTO kova_decisions (nonce, turn_id, used) VALUES (?, ?, ?) "
                "ON CONFLICT (nonce) DO NOTHING",
                (nonce, turn_id, now),
            )
            row = self._execute(
                connection, "SELECT turn_id FROM kova_decisions WHERE nonce = ?", (nonce,)
            ).fetchone()
            if row is not None and row[0] != turn_id:
                raise ApprovalMismatchError(
                    f"these decisions were already used: turn {row[0]!r} of this journal was "
                    "resumed with them (a decided pause runs once; resume that turn id to go "
                    "on with it)"
                )

    def _release(self, connection: Any, turn_id: str, owner: str) -> None:
        with self._transaction(connection):
            self._execute(
                connection,
                "UPDATE kova_turns SET owner = NULL, lease_until = 0 "
                "WHERE turn_id = ? AND owner = ?",
                (turn_id, owner),
            )

    def _load(self, connection: Any, turn_id: str) -> JournalRecord | None:
        with self._transaction(connection, write=False):
            row = self._execute(
                connection,
                "SELECT snapshot, response, results FROM kova_turns WHERE turn_id = ?",
                (turn_id,),
            ).fetchone()
            if row is None:
                return None
            calls = self._execute(
                connection,
                "SELECT call_id, result FROM kova_tool_calls WHERE turn_id = ?",
                (turn_id,),
            ).fetchall()
        return journal_record(turn_id, row, calls, self._where())

    def _forget(self, connection: Any, turn_id: str) -> None:
        # The decisions it used stay used: a decided pause runs once, forgotten turn or not.
        with self._transaction(connection):
            self._execute(connection, "DELETE FROM kova_tool_calls WHERE turn_id = ?", (turn_id,))
            self._execute(connection, "DELETE FROM kova_turns WHERE turn_id = ?", (turn_id,))

    # -- what a backend provides -------------------------------------------------------------

    _claim_type: type[JournalClaim]

    @abc.abstractmethod
    def _new_owner(self) -> str:
        """This runner's owner id."""

    @abc.abstractmethod
    def _where(self) -> str:
        """The journal, as its errors name it."""

    @abc.abstractmethod
    async def _run(self, function: Callable[..., _T], *args: object) -> _T:
        """``function(connection, *args)`` on a connection, in a worker thread."""

    @abc.abstractmethod
    def _claim(self, connection: Any, turn_id: str, owner: str) -> float: ...

    @abc.abstractmethod
    def _owned(self, connection: Any, turn_id: str, owner: str) -> float:
        """Check that ``owner`` still holds the turn and keep its lease (in the operation's
        transaction; the row stays locked until it ends); the time now.

        Raises:
            TurnClaimedError: another owner took the turn.
        """

    @abc.abstractmethod
    def _transaction(self, connection: Any, *, write: bool = True) -> AbstractContextManager[None]:
        """The operation's transaction."""

    @abc.abstractmethod
    def _execute(self, connection: Any, statement: str, parameters: tuple[object, ...]) -> Any:
        """``statement`` (``?`` marks) run with ``parameters``; its cursor."""

    @abc.abstractmethod
    def _execute_many(
        self, connection: Any, statement: str, rows: list[tuple[object, ...]]
    ) -> None: ...


class SqliteJournal(Journal):
    """A turn journal in one SQLite file: ``SqliteJournal("turns.db")``.

    Safe to share between tasks, threads and processes on one machine (not over a network
    file system: SQLite's locks need a local one). The file and its tables are made on first
    use; a file written by a newer kova is refused with :class:`JournalError`.

    Args:
        path: the database file.
        lease: seconds a claim lasts unless renewed.
        busy_timeout: seconds an operation waits for another process's write lock.
        rerun_interrupted: tool name -> whether a call of that tool that was started and
            never recorded as finished (its process died) may run again, overriding its
            ``ToolAnnotations`` (by default a call runs again only if its tool is annotated
            read-only or idempotent). ``True`` for a tool you know is safe to repeat (it
            dedupes by ``ctx.idempotency_key``, say) whose annotations you do not control,
            an MCP server's; ``False`` for one annotated so that you do not trust.
        clock: wall-clock seconds (tests pass their own).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lease: float = 60.0,
        busy_timeout: float = 30.0,
        rerun_interrupted: Mapping[str, bool] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(path, str | os.PathLike):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        self.rerun_interrupted: Mapping[str, bool] = _rerun_map(rerun_interrupted)
        """Tool name -> whether its interrupted calls may run again (the host's override)."""
        check_seconds("lease", lease)
        check_seconds("busy_timeout", busy_timeout)
        self.path = Path(path)
        self.lease = float(lease)
        self._busy_timeout = float(busy_timeout)
        self._clock = clock
        self._ready = False
        self._id: str | None = None  # the journal's id in its file, read when first opened

    def __repr__(self) -> str:
        return f"SqliteJournal({str(self.path)!r})"

    _claim_type: type[JournalClaim]  # set below, once JournalClaim is defined

    def _new_owner(self) -> str:
        return _process_owner()

    # -- worker-thread side ------------------------------------------------------------------

    async def _run(self, function: Callable[..., _T], *args: object) -> _T:
        return await trio.to_thread.run_sync(self._in_thread, function, args)

    def _in_thread(self, function: Callable[..., _T], args: tuple[object, ...]) -> _T:
        try:
            connection = sqlite3.connect(
                self.path, timeout=self._busy_timeout, isolation_level=None
            )
        except sqlite3.Error as exc:
            raise JournalError(f"cannot open the journal {str(self.path)!r}: {exc}") from None
        try:
            connection.execute("PRAGMA synchronous=FULL")
            if not self._ready:
                self._prepare(connection)
            else:
                self._check_same(connection)
            return function(connection, *args)
        except sqlite3.Error as exc:
            raise JournalError(f"journal {str(self.path)!r}: {exc}") from None
        finally:
            connection.close()

    def _prepare(self, connection: sqlite3.Connection) -> None:
        mode = use_wal(connection, self._busy_timeout)
        if str(mode).lower() != "wal":
            raise JournalError(f"journal {str(self.path)!r}: cannot use WAL mode ({mode})")
        where = str(self.path)
        with _transaction(connection):
            tables = {
                row[0]
                for row in connection.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'kova_%'"
                )
            }
            present = tables & _TABLES
            if not present:  # a new journal
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        connection.execute(statement)
                connection.executemany(
                    "INSERT INTO kova_journal_meta (key, value) VALUES (?, ?)",
                    [("schema", str(SCHEMA_VERSION)), ("id", os.urandom(16).hex())],
                )
            self._id = check_opened(connection.execute, present, where)
        self._ready = True

    def _check_same(self, connection: sqlite3.Connection) -> None:
        """The file is still the journal this object opened (not emptied, replaced, or
        missing a table since): else finished work would look like work never done."""
        try:
            row = connection.execute(
                "SELECT value FROM kova_journal_meta WHERE key = 'id'"
            ).fetchone()
            count = connection.execute(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                "('kova_journal_meta', 'kova_turns', 'kova_decisions', 'kova_tool_calls')"
            ).fetchone()[0]
        except sqlite3.Error:
            row, count = None, 0
        if row is None or row[0] != self._id or count != len(_TABLES):
            raise changed_error(str(self.path))

    def _claim(self, connection: sqlite3.Connection, turn_id: str, owner: str) -> float:
        now = self._clock()
        until = now + self.lease
        with _transaction(connection):
            row = connection.execute(
                "SELECT owner, lease_until FROM kova_turns WHERE turn_id = ?", (turn_id,)
            ).fetchone()
            if row is None:
                connection.execute(
                    "INSERT INTO kova_turns (turn_id, owner, lease_until, updated) "
                    "VALUES (?, ?, ?, ?)",
                    (turn_id, owner, until, now),
                )
                return until
            holder, lease_until = row
            if (
                holder is not None
                and holder != owner
                and lease_until > now
                and not _died_on_this_machine(holder)
            ):
                raise TurnClaimedError(turn_id, lease_until)
            connection.execute(
                "UPDATE kova_turns SET owner = ?, lease_until = ?, updated = ? WHERE turn_id = ?",
                (owner, until, now, turn_id),
            )
        return until

    def _owned(self, connection: sqlite3.Connection, turn_id: str, owner: str) -> float:
        row = connection.execute(
            "SELECT owner, lease_until FROM kova_turns WHERE turn_id = ?", (turn_id,)
        ).fetchone()
        if row is None or row[0] != owner:
            raise TurnClaimedError(turn_id)
        now = self._clock()
        # Expired: the write may go on only while nobody else took the turn; it did not (the
        # owner is still us), so the lease is simply late. Renew it with the write.
        until = now + self.lease if row[1] <= now else row[1]
        connection.execute(
            "UPDATE kova_turns SET lease_until = ?, updated = ? WHERE turn_id = ?",
            (until, now, turn_id),
        )
        return now

    def _where(self) -> str:
        return str(self.path)

    def _transaction(
        self, connection: sqlite3.Connection, *, write: bool = True
    ) -> AbstractContextManager[None]:
        return _transaction(connection, write=write)

    def _execute(
        self, connection: sqlite3.Connection, statement: str, parameters: tuple[object, ...]
    ) -> sqlite3.Cursor:
        return connection.execute(statement, parameters)

    def _execute_many(
        self, connection: sqlite3.Connection, statement: str, rows: list[tuple[object, ...]]
    ) -> None:
        connection.executemany(statement, rows)


_MARKED: dict[str, str] = {}


def marks(statement: str) -> str:
    """A statement written with ``?`` marks (the SQL kova's SQLite and PostgreSQL code
    share) as psycopg's ``%s``: the journal's and the session store's."""
    marked = _MARKED.get(statement)
    if marked is None:
        marked = _MARKED[statement] = statement.replace("?", "%s")
    return marked


def check_opened(
    execute: Callable[[str], Any], present: set[str] | frozenset[str], where: str
) -> str:
    """At the first operation on a journal whose tables ``present`` (of :data:`_TABLES`)
    were found: refuse one of another schema version or one that lost a table; its id."""
    if present and "kova_journal_meta" in present:
        row = execute("SELECT value FROM kova_journal_meta WHERE key = 'schema'").fetchone()
        found = row[0] if row is not None else None
        if found is not None and found.isdigit() and int(found) > SCHEMA_VERSION:
            raise JournalError(
                f"journal {where!r} was written by a newer kova "
                f"(schema {found}, this kova reads {SCHEMA_VERSION})"
            )
        if found != str(SCHEMA_VERSION):
            raise JournalError(
                f"journal {where!r} was written by an older kova (schema {found}, this kova "
                f"reads {SCHEMA_VERSION}): finish its turns with that kova, or start a new "
                "journal"
            )
    missing = sorted(_TABLES - present) if present else []
    if missing:
        raise JournalError(
            f"journal {where!r} has lost its table {', '.join(missing)} (dropped, or "
            "the database was damaged): refused, since finished work would run again; "
            "restore it from a backup or use a new one"
        )
    row = execute("SELECT value FROM kova_journal_meta WHERE key = 'id'").fetchone()
    if row is None:
        raise JournalError(f"journal {where!r} has no id in kova_journal_meta: refused")
    return str(row[0])


def changed_error(where: str) -> JournalError:
    """A journal found not to be the one this object opened."""
    return JournalError(
        f"journal {where!r} changed under this process (emptied, replaced, or a table "
        "dropped since it was opened): refused, since finished work would run again"
    )


def journal_record(
    turn_id: str, row: tuple[Any, ...], calls: list[tuple[str, str | None]], where: str
) -> JournalRecord:
    """A turn's record from its row (snapshot, response, finished-call count) and its tool
    calls' rows; refused if fewer calls are recorded as finished than the turn counted."""
    finished = sum(1 for _, result in calls if result is not None)
    if finished != row[2]:
        raise JournalError(
            f"turn {turn_id!r} in journal {where!r} recorded {row[2]} finished "
            f"tool calls and the journal holds {finished}: rows were deleted or changed; "
            "refused, since finished work would run again"
        )
    return JournalRecord(
        turn_id=turn_id,
        snapshot=row[0],
        response=row[1],
        results=MappingProxyType(
            {call_id: result for call_id, result in calls if result is not None}
        ),
        unfinished=frozenset(call_id for call_id, result in calls if result is None),
    )


class JournalClaim:
    """One runner's hold on one turn: every write goes through it, checked against the
    lease in the same transaction. ``async with`` releases it at the end."""

    __slots__ = ("journal", "lease_until", "owner", "turn_id")

    def __init__(self, journal: Journal, turn_id: str, owner: str, until: float) -> None:
        self.journal = journal
        self.turn_id = turn_id
        self.owner = owner
        self.lease_until = until

    def __repr__(self) -> str:
        return f"{type(self).__name__}(turn_id={self.turn_id!r}, owner={self.owner!r})"

    async def __aenter__(self) -> JournalClaim:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        # Shielded: a cancelled turn still gives its turn up (one short transaction), so the
        # next run need not wait for the lease to run out.
        with trio.CancelScope(shield=True):
            await self.release()

    def kept_alive(self) -> AbstractAsyncContextManager[None]:
        """``async with claim.kept_alive():`` renews the lease every third of it while the
        block runs (a task beside it), so a step that outlasts the lease keeps its turn; a
        claim found lost cancels the block, which raises :class:`TurnClaimedError`."""
        from ._lease import keep_alive

        return keep_alive(self, self.journal.lease)

    async def renew(self) -> None:
        """Extend the lease by the journal's :attr:`~SqliteJournal.lease` from now."""
        self.lease_until = await self._as_owner(self.journal._renew)

    async def save_snapshot(self, snapshot: str) -> None:
        """Record the turn core's state after a transition."""
        await self._write("snapshot", snapshot)

    async def tool_started(self, *call_ids: str) -> None:
        """Record that tool calls are about to run (before they run; one commit for all)."""
        for call_id in call_ids:
            _check_id(call_id, "call_id")
        await self._as_owner(self.journal._started, list(call_ids))

    async def tool_finished(self, call_id: str, result: str) -> None:
        """Record a tool call's result (after it ran)."""
        _check_id(call_id, "call_id")
        _check_text(result, "result")
        await self._as_owner(self.journal._finished, call_id, result)

    async def tool_deferred(self, call_id: str) -> None:
        """Undo :meth:`tool_started` for a call that did not run (left to a person)."""
        _check_id(call_id, "call_id")
        await self._as_owner(
            self.journal._write,
            "DELETE FROM kova_tool_calls WHERE turn_id = ? AND call_id = ? AND result IS NULL",
            (self.turn_id, call_id),
        )

    async def use_decisions(self, nonce: str) -> None:
        """Record that a paused turn's decisions (their nonce) resume this turn.

        Raises:
            ApprovalMismatchError: they already resumed another turn id of this journal
                (resuming the same turn id again goes on with it).
        """
        _check_id(nonce, "nonce")
        await self._as_owner(self.journal._use_decisions, nonce)

    async def finish(self, response: str) -> None:
        """Record the finished turn's response."""
        await self._write("response", response)

    async def release(self) -> None:
        """Give the turn up (idempotent; a claim taken over is left as it is)."""
        await self._as_owner(self.journal._release)

    async def _write(self, column: str, text: str) -> None:
        _check_text(text, "the record")
        statement = f"UPDATE kova_turns SET {column} = ? WHERE turn_id = ?"
        await self._as_owner(self.journal._write, statement, (text, self.turn_id))

    async def _as_owner(self, operation: Callable[..., _T], *args: object) -> _T:
        """``operation(connection, turn_id, owner, *args)``: one of the journal's, for this
        claim's turn as its owner, in a worker thread."""
        return await self.journal._run(operation, self.turn_id, self.owner, *args)


SqliteJournal._claim_type = JournalClaim


def _process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), which tells a live process
    from a later one that reuses its pid; ``None`` where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return fields[19].decode()
    except (OSError, IndexError, UnicodeDecodeError):
        return None


def _boot_id() -> str:
    """This boot of this machine (Linux), ``-`` where it cannot be read: a pid and a start
    time mean something only within one boot."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as file:
            return file.read().strip() or "-"
    except OSError:
        return "-"


def _pid_namespace() -> str:
    """This process's PID namespace (its inode, Linux), ``-`` where it cannot be read: a
    pid means something only within its namespace (containers on one host share the host
    name, often, and a boot, but not their pids)."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "-"


def _process_owner() -> str:
    """This runner's owner id: the machine (host name, boot), the PID namespace, the process
    (pid and start time), and a nonce."""
    pid = os.getpid()
    return "|".join(
        (
            socket.gethostname(),
            _boot_id(),
            _pid_namespace(),
            str(pid),
            _process_start(pid) or "-",
            uuid.uuid4().hex[:12],
        )
    )


def _died_on_this_machine(owner: str) -> bool:
    """Whether ``owner`` was a process of this boot of this machine, in this PID namespace,
    that is gone (its turn is free at once, without waiting for its lease: a crashed runner's
    turn resumes on restart). Where that cannot be known (another machine, boot or
    namespace, an owner id of another form, nothing readable in /proc), ``False``: the turn
    waits for the lease."""
    parts = owner.split("|")
    if len(parts) != 6:
        return False
    host, boot, namespace, pid_text, start, _ = parts
    if (
        host != socket.gethostname()
        or "-" in (boot, namespace, start)
        or boot != _boot_id()
        or namespace != _pid_namespace()
    ):
        return False
    try:
        pid = int(pid_text)
    except ValueError:
        return False
    return _process_start(pid) != start


def _rerun_map(value: object) -> Mapping[str, bool]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise TypeError(
            f"rerun_interrupted must be a mapping of tool name to bool, got {type(value).__name__}"
        )
    for name, allowed in value.items():
        if not isinstance(name, str) or not isinstance(allowed, bool):
            raise TypeError(
                f"rerun_interrupted maps tool names to True or False, got {name!r}: {allowed!r}"
            )
    return MappingProxyType(dict(value))


def _check_id(value: object, name: str = "turn_id") -> None:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    if not value or len(value) > 512:
        raise ValueError(f"{name} must be 1 to 512 characters, got {len(value)}")
    _check_text(value, name)


def _check_text(value: object, name: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str (JSON text), got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{name} holds a lone surrogate; it cannot be stored as UTF-8") from None
