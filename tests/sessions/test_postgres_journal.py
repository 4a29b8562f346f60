"""PostgresJournal: lease-only ownership, and a journaled turn on a session killed on one
"machine" (a process with its own owner id) that goes on in another from PostgreSQL alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import trio

from kova import Message
from kova.durable import JournalError, PostgresJournal, TurnClaimedError
from kova.errors import ApprovalMismatchError, SessionError
from kova.sessions import PostgresSessionStore

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("kind", [PostgresJournal, PostgresSessionStore])
def test_the_pool_arguments_are_checked_alike(kind: type) -> None:
    """One pool handler for both (durable._postgres.PgPool); nothing is opened here."""
    name = kind.__name__
    with pytest.raises(TypeError, match=f"{name} takes a dsn or a pool="):
        kind()
    with pytest.raises(TypeError, match=f"{name} takes a dsn or a pool="):
        kind("postgresql://x", pool=object())
    with pytest.raises(TypeError, match="dsn must be a str, got int"):
        kind(5)
    with pytest.raises(TypeError, match="AsyncConnectionPool runs on asyncio"):
        kind(pool=object())
    with pytest.raises(ValueError, match="max_size must be a positive int, got 0"):
        kind("postgresql://x", max_size=0)
    with pytest.raises(ValueError, match="timeout"):
        kind("postgresql://x", timeout=-1)
    made = kind("postgresql://x", max_size=3, timeout=2)
    assert made.pool.max_size == 3
    assert made.pool.timeout == 2.0
    assert made.pool.closed  # opened on first use


@pytest.mark.parametrize(
    ("kind", "error"), [(PostgresJournal, JournalError), (PostgresSessionStore, SessionError)]
)
async def test_entering_reaches_the_server_and_closes_the_pool_it_opened(
    kind: type, error: type, tmp_path: Path
) -> None:
    """``async with`` opens the pool and makes the tables at once (durable._postgres.PgPool's
    opened): an unreachable server fails the block's entry, and the pool is closed again."""
    made = kind(f"postgresql://postgres@/postgres?host={tmp_path}&connect_timeout=1", timeout=2)
    with pytest.raises(error):
        async with made:
            pass
    assert made.pool.closed


async def test_a_claim_is_a_lease_other_owners_wait_for(postgres_db: str) -> None:
    async with PostgresJournal(postgres_db, lease=0.5) as journal:
        claim = await journal.claim("t", owner="machine-a")
        with pytest.raises(TurnClaimedError, match="being run by another runner"):
            await journal.claim("t", owner="machine-b")
        await claim.save_snapshot('{"a": 1}')
        await trio.sleep(0.6)  # the lease runs out (the server's clock)
        taken = await journal.claim("t", owner="machine-b")
        with pytest.raises(TurnClaimedError, match="no longer claimed"):
            await claim.save_snapshot('{"a": 2}')
        await taken.tool_started("c1", "c2")
        await taken.tool_finished("c1", '{"ok": true}')
        record = await journal.load("t")
        assert record is not None
        assert record.snapshot == '{"a": 1}'
        assert dict(record.results) == {"c1": '{"ok": true}'}
        assert record.unfinished == frozenset({"c2"})
        await taken.release()
        again = await journal.claim("t", owner="machine-c")  # released: free at once
        await again.finish('{"done": true}')
        assert (await journal.load("t")).response == '{"done": true}'  # type: ignore[union-attr]
        await journal.forget("t")
        assert await journal.load("t") is None


async def test_decisions_resume_one_turn_id_even_after_it_is_forgotten(postgres_db: str) -> None:
    """As tests/durable/test_journal.py's for SqliteJournal: one nonce, one turn id."""
    async with PostgresJournal(postgres_db) as journal:
        async with await journal.claim("a") as claim:
            await claim.use_decisions("nonce-1")
            await claim.use_decisions("nonce-1")
        await journal.forget("a")
        async with await journal.claim("b") as other:
            with pytest.raises(ApprovalMismatchError, match="turn 'a' of this journal"):
                await other.use_decisions("nonce-1")
            await other.use_decisions("nonce-2")


PROGRAM = textwrap.dedent(
    """
    import json, os, signal, sys, time, psycopg, trio
    from kova import ToolAnnotations, ToolResult
    from kova.agent import AgentBuilder
    from kova.sessions import PostgresSessionStore
    from kova.testing import FunctionProvider, reply_text, reply_tool_calls
    from kova.tools import tool

    dsn, counts, crash = sys.argv[1], sys.argv[2], sys.argv[3] == "1"

    def count(name):
        data = json.loads(open(counts).read()) if os.path.exists(counts) else {}
        data[name] = data.get(name, 0) + 1
        open(counts, "w").write(json.dumps(data))

    @tool
    async def charge(customer: str) -> str:
        \"\"\"Charge the customer (not idempotent).\"\"\"
        count("charge")
        return f"charged {customer}"

    @tool(annotations=ToolAnnotations(read_only=True))
    async def report(month: str) -> str:
        \"\"\"The month's report (read-only).\"\"\"
        count("report")
        if crash:  # die once charge's result is committed: the machine lost power
            while True:
                with psycopg.connect(dsn) as db:
                    row = db.execute(
                        "SELECT result FROM kova_tool_calls WHERE call_id = 'call_1'"
                    ).fetchone()
                if row and row[0]:
                    os.kill(os.getpid(), signal.SIGKILL)
                await trio.sleep(0.02)
        return f"{month}: 12 orders"

    def model(request):
        results = [b for m in request.messages for b in m.content if isinstance(b, ToolResult)]
        if not results:
            return reply_tool_calls(("charge", {"customer": "ACME"}), ("report", {"month": "May"}))
        return reply_text("; ".join(r.text for r in results))

    async def main():
        async with PostgresSessionStore(dsn, lease=float(sys.argv[4])) as store:
            journal = store.journal(lease=float(sys.argv[4]))
            builder = AgentBuilder().provider(FunctionProvider(model)).tools(charge, report)
            async with builder.build() as agent:
                response = await agent.run(
                    "Charge ACME, then May's report.",
                    session=store.session("acme"),
                    journal=journal,
                    turn_id="acme-may",
                )
        print(json.dumps(response.text))

    trio.run(main)
    """
)


def _machine(
    dsn: str, counts: Path, *, crash: bool, lease: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, dsn, str(counts), "1" if crash else "0", str(lease)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


async def test_a_turn_killed_on_one_machine_goes_on_in_another(
    postgres_db: str, tmp_path: Path
) -> None:
    counts = tmp_path / "counts.json"
    crashed = await trio.to_thread.run_sync(
        lambda: _machine(postgres_db, counts, crash=True, lease=3.0)
    )
    assert crashed.returncode == -9, crashed.stderr[-2000:]
    died = time.monotonic()
    assert json.loads(counts.read_text()) == {"charge": 1, "report": 1}

    async with PostgresSessionStore(postgres_db) as store:
        assert await store.session("acme").load() == []  # nothing appended by the dead turn
        journal = store.journal()
        # Lease-only: the dead runner's lease holds the turn until it runs out, even on
        # this machine (no process-id shortcut across machines).
        if time.monotonic() - died < 2.0:
            with pytest.raises(TurnClaimedError):
                await journal.claim("acme-may", owner="machine-b-probe")

    await trio.sleep(max(0.0, 3.2 - (time.monotonic() - died)))
    resumed = await trio.to_thread.run_sync(
        lambda: _machine(postgres_db, counts, crash=False, lease=3.0)
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads(resumed.stdout) == "charged ACME; May: 12 orders"
    # The charge recorded before the crash was not run again; the read-only report was.
    assert json.loads(counts.read_text()) == {"charge": 1, "report": 2}
    async with PostgresSessionStore(postgres_db) as store:
        history = await store.session("acme").load()
    assert history[0] == Message.user("Charge ACME, then May's report.")
    assert history[-1] == Message.assistant("charged ACME; May: 12 orders")
    assert len(history) == 4  # prompt, the calls, their results, the answer: once


# -- a journal whose tables, rows or version do not match what it recorded ---------------------


async def _pg_finished_call(dsn: str) -> PostgresJournal:
    journal = PostgresJournal(dsn)
    async with await journal.claim("t") as claim:
        await claim.save_snapshot("{}")
        await claim.tool_started("charge_1")
        await claim.tool_finished("charge_1", '{"charged": 5}')
    return journal


def _sql(dsn: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        for statement in statements:
            connection.execute(statement)


def _tables(dsn: str) -> set[str]:
    import psycopg

    with psycopg.connect(dsn) as connection:
        return {
            row[0]
            for row in connection.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            )
        }


async def test_a_dropped_table_is_refused_not_read_as_work_never_done(postgres_db: str) -> None:
    journal = await _pg_finished_call(postgres_db)
    await journal.aclose()
    _sql(postgres_db, "DROP TABLE kova_tool_calls")
    with pytest.raises(JournalError, match="lost its table kova_tool_calls"):
        async with PostgresJournal(postgres_db) as fresh:  # a new process opening it
            await fresh.load("t")
    assert "kova_tool_calls" not in _tables(postgres_db)  # nothing recreated behind it


async def test_deleted_rows_are_refused(postgres_db: str) -> None:
    journal = await _pg_finished_call(postgres_db)
    _sql(postgres_db, "DELETE FROM kova_tool_calls")
    with pytest.raises(
        JournalError, match="recorded 1 finished tool calls and the journal holds 0"
    ):
        await journal.load("t")
    await journal.aclose()


@pytest.mark.parametrize(
    "emptying",
    [
        ("DROP TABLE kova_decisions",),
        ("DROP SCHEMA public CASCADE", "CREATE SCHEMA public"),
        ("DELETE FROM kova_journal_meta WHERE key = 'id'",),
        ("UPDATE kova_journal_meta SET value = 'another' WHERE key = 'id'",),
    ],
    ids=["a dropped table", "emptied", "no id", "another journal's id"],
)
async def test_a_journal_changed_under_a_running_process_is_refused(
    postgres_db: str, emptying: tuple[str, ...]
) -> None:
    journal = await _pg_finished_call(postgres_db)
    _sql(postgres_db, *emptying)
    with pytest.raises(JournalError, match="changed under this process"):
        await journal.load("t")
    with pytest.raises(JournalError, match="changed under this process"):
        await journal.claim("t")
    await journal.aclose()


@pytest.mark.parametrize(
    ("version", "message"),
    [
        ("1", r"older kova \(schema 1, this kova reads 2\)"),
        ("3", r"newer kova \(schema 3, this kova reads 2\)"),
    ],
)
async def test_a_journal_of_another_schema_version_is_refused(
    postgres_db: str, version: str, message: str
) -> None:
    await (await _pg_finished_call(postgres_db)).aclose()
    _sql(postgres_db, f"UPDATE kova_journal_meta SET value = '{version}' WHERE key = 'schema'")
    with pytest.raises(JournalError, match=message):
        async with PostgresJournal(postgres_db) as fresh:
            await fresh.load("t")
