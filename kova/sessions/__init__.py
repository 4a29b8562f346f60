"""Sessions: conversations that persist (see ``docs/sessions.md``).

``store.session(id)`` is one conversation; pass it to a turn
(``await agent.run("Hi", session=session)``) and the turn runs over its history and appends
what it added when it completes. :class:`SqliteSessionStore` is the embedded default;
:class:`PostgresSessionStore` (the ``postgres`` extra) serves many processes and machines.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from .._lazy import lazy_names as _lazy_names
from ._sqlite import SqliteSessionStore as SqliteSessionStore
from ._store import Session as Session
from ._store import SessionInfo as SessionInfo
from ._store import SessionStore as SessionStore
from ._store import SessionWrite as SessionWrite
from ._view import SessionState as SessionState

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


# psycopg is imported only when it is asked for.
__getattr__, __dir__ = _lazy_names(__name__, {"PostgresSessionStore": "._postgres"})
