"""A lone exception out of a nursery, raised as itself.

trio wraps whatever leaves a nursery in an ``ExceptionGroup``, even a single exception, so
``pytest.raises(ProviderAuthError)`` (or ``except ProviderAuthError``) around a block that
owns a nursery would never match. kova's blocks (the agent, the fake servers, the web view)
give a lone exception back as it was raised; a group of two or more stays a group.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["lone", "lone_exceptions", "raise_lone"]


def lone(error: BaseException) -> BaseException:
    """The one exception inside ``error`` (through nested groups of one); ``error`` itself
    when it is no group, or a group of more than one."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def raise_lone(group: BaseExceptionGroup[BaseException]) -> NoReturn:
    """Re-raise the one exception inside ``group`` (through nested groups of one) as itself;
    ``group`` unchanged when it holds more than one."""
    only = lone(group)
    if only is group:
        raise group
    raise only from only.__cause__


@contextmanager
def lone_exceptions() -> Iterator[None]:
    """``with lone_exceptions(): async with trio.open_nursery() ...``: a lone exception
    leaves as itself (see :func:`raise_lone`)."""
    try:
        yield
    except BaseExceptionGroup as group:
        raise_lone(group)
