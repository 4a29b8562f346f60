"""The one error the CLI shows as one line: what was wrong and what to do."""

from __future__ import annotations

__all__ = ["CliError"]


class CliError(Exception):
    """A mistake in the command line or its surroundings (a busy port, a command that does
    not exist): printed as ``kova: MESSAGE`` with exit status 2, never a traceback."""
