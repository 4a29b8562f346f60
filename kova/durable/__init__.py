"""Durable turns: a turn that survives its process.

:class:`SqliteJournal` is the embedded default, one SQLite file on one machine;
:class:`PostgresJournal` (the ``postgres`` extra) is shared by many machines (see
``docs/durable.md``).
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from .._lazy import lazy_names as _lazy_names
from ._errors import JournalError as JournalError
from ._errors import TurnClaimedError as TurnClaimedError
from ._journal import JournalClaim as JournalClaim
from ._journal import JournalRecord as JournalRecord
from ._journal import SqliteJournal as SqliteJournal

if _TYPE_CHECKING:
    from ._postgres import PostgresJournal as PostgresJournal
    from ._postgres import PostgresJournalClaim as PostgresJournalClaim

__all__ = [
    "JournalClaim",
    "JournalError",
    "JournalRecord",
    "PostgresJournal",
    "PostgresJournalClaim",
    "SqliteJournal",
    "TurnClaimedError",
]


# psycopg is imported only when these are asked for.
__getattr__, __dir__ = _lazy_names(
    __name__, {"PostgresJournal": "._postgres", "PostgresJournalClaim": "._postgres"}
)
