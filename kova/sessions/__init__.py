"""Sessions: conversations that persist (see ``docs/sessions.md``).

``store.session(id)`` is one conversation; pass it to a turn
(``await agent.run("Hi", session=session)``) and the turn runs over its history and appends
what it added when it completes. :class:`SqliteSessionStore` is the embedded default.
"""

from ._sqlite import SqliteSessionStore as SqliteSessionStore
from ._store import Session as Session
from ._store import SessionInfo as SessionInfo
from ._store import SessionState as SessionState
from ._store import SessionStore as SessionStore
from ._store import SessionWrite as SessionWrite

__all__ = [
    "Session",
    "SessionInfo",
    "SessionState",
    "SessionStore",
    "SessionWrite",
    "SqliteSessionStore",
]
