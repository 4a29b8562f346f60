"""Durable turns: a turn that survives its process.

:class:`SqliteJournal` is the embedded default, one SQLite file on one machine (see
``docs/durable.md``).
"""

from ._errors import JournalError as JournalError
from ._errors import TurnClaimedError as TurnClaimedError
from ._journal import JournalClaim as JournalClaim
from ._journal import JournalRecord as JournalRecord
from ._journal import SqliteJournal as SqliteJournal

__all__ = ["JournalClaim", "JournalError", "JournalRecord", "SqliteJournal", "TurnClaimedError"]
