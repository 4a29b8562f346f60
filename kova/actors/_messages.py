"""Typed actor messages: a request type names its reply type.

::

    class GetCount(Record, Call[int]):
        key: str

    count = await ref.call(GetCount(key="a"))     # mypy knows: int

``Call[R]`` is a marker base (no fields, no slots of its own), so a message stays a plain
frozen :class:`~kova._record.Record`. :meth:`ActorRef.call` is typed to return ``R`` for a
``Call[R]``; other payloads still work and return ``Any``.

Every actor answers a message it does not know the same way: the request fails with
:class:`UnknownMessage` (a request error: the caller gets it, the actor carries on).
"""

from __future__ import annotations

from typing import Generic, TypeVar

from .._errors import ActorError

__all__ = ["Call", "UnknownMessage"]

R_co = TypeVar("R_co", covariant=True)


class Call(Generic[R_co]):
    """Base of a request message whose reply is an ``R_co``."""

    __slots__ = ()


class UnknownMessage(ActorError):
    """An actor was sent a message it does not handle. Fails that request only."""

    def __init__(self, actor: str, message: object, *, kind: str = "call") -> None:
        self.actor = actor
        self.message_type = type(message).__name__
        super().__init__(f"actor {actor!r} does not handle {kind} {self.message_type}")
