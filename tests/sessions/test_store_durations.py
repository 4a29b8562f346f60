"""Every duration of the session stores, the journals and the web view is checked where it is
given: a negative, zero, NaN or infinite number of seconds is refused with
``kova.ConfigError`` naming it (as every other kova duration is), before anything connects."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pytest

import kova
from kova.durable import SqliteJournal
from kova.sessions import SqliteSessionStore

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

_BAD = (-1.0, 0, math.nan, math.inf, -math.inf)

_DSN = "postgresql://nobody@127.0.0.1:1/none"


def _makers(tmp_path: Path) -> dict[str, Callable[[Any], object]]:
    from kova.durable._postgres import PostgresJournal
    from kova.sessions import PostgresSessionStore
    from kova.web import EventServer

    def web(name: str) -> Callable[[Any], object]:
        options: dict[str, Any] = {
            "token": None,
            "authorize": None,
            "allowed_origins": (),
            "chat": False,
            "page_buffer": 8,
            "flush_interval": 0.05,
            "max_message_bytes": 1024,
            "max_chat_chars": 100,
            "max_pages": 2,
            "keep_turns": 2,
            "disconnect_grace": 1.0,
        }
        return lambda value: EventServer(**{**options, name: value})

    return {
        "SqliteSessionStore.busy_timeout": lambda v: SqliteSessionStore(
            tmp_path / "s.db", busy_timeout=v
        ),
        "SqliteSessionStore.wait_timeout": lambda v: SqliteSessionStore(
            tmp_path / "s.db", wait_timeout=v
        ),
        "PostgresSessionStore.timeout": lambda v: PostgresSessionStore(_DSN, timeout=v),
        "PostgresSessionStore.wait_timeout": lambda v: PostgresSessionStore(_DSN, wait_timeout=v),
        "SqliteJournal.lease": lambda v: SqliteJournal(tmp_path / "j.db", lease=v),
        "SqliteJournal.busy_timeout": lambda v: SqliteJournal(tmp_path / "j.db", busy_timeout=v),
        "PostgresJournal.lease": lambda v: PostgresJournal(_DSN, lease=v),
        "PostgresJournal.timeout": lambda v: PostgresJournal(_DSN, timeout=v),
        "web.flush_interval": web("flush_interval"),
        "web.disconnect_grace": web("disconnect_grace"),
    }


_NAMES = (
    "SqliteSessionStore.busy_timeout",
    "SqliteSessionStore.wait_timeout",
    "PostgresSessionStore.timeout",
    "PostgresSessionStore.wait_timeout",
    "SqliteJournal.lease",
    "SqliteJournal.busy_timeout",
    "PostgresJournal.lease",
    "PostgresJournal.timeout",
    "web.flush_interval",
    "web.disconnect_grace",
)


@pytest.mark.parametrize("where", _NAMES)
@pytest.mark.parametrize("value", _BAD)
def test_a_bad_duration_is_a_config_error_naming_it(
    tmp_path: Path, where: str, value: float
) -> None:
    make = _makers(tmp_path)[where]
    with pytest.raises(kova.ConfigError, match=where.rsplit(".", 1)[1]):
        make(value)
    with pytest.raises(TypeError):
        make("5")
    make(2.5)  # a good one is taken


@pytest.mark.parametrize("value", _BAD)
def test_the_web_approval_timeout_is_checked(value: float) -> None:
    from kova.web import EventServer

    server = EventServer(
        token=None,
        authorize=None,
        allowed_origins=(),
        chat=False,
        page_buffer=8,
        flush_interval=0.05,
        max_message_bytes=1024,
        max_chat_chars=100,
        max_pages=2,
        keep_turns=2,
        disconnect_grace=1.0,
    )
    with pytest.raises(kova.ConfigError, match="timeout"):
        server.approval_handler(timeout=value)
    assert server.approval_handler(timeout=3).timeout == 3.0
