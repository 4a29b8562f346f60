"""Sessions: conversations that persist (see ``docs/sessions.md``).

``store.session(id)`` is one conversation; pass it to a turn
(``await agent.run("Hi", session=session)``) and the turn runs over its history and appends
what it added when it completes. :class:`SqliteSessionStore` is the embedded default;
:class:`PostgresSessionStore` (the ``postgres`` extra) serves many processes and machines.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from ._sqlite import SqliteSessionStore as SqliteSessionStore
from ._store import Session as Session
from ._store import SessionInfo as SessionInfo
from ._store import SessionState as SessionState
from ._store import SessionStore as SessionStore
from ._store import SessionWrite as SessionWrite

if _TYPE_CHECKING:
    from ._postgres import PostgresSessionStore as PostgresSessionStore

__all__ = [
    "PostgresSessionStore",
    "Session",
    "SessionInfo",
    "SessionState",
    "SessionStore",
    "SessionWrite",
    "SqliteSessionStore",
]


def __getattr__(name: str) -> _Any:
    if name == "PostgresSessionStore":  # psycopg is imported only when it is asked for
        from ._postgres import PostgresSessionStore

        return PostgresSessionStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
