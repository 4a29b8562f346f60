"""A string that never prints: API keys, tokens, passwords.

Every config, provider, transport and auth flow keeps credentials in a :class:`Secret`, so no
``repr``, ``str``, f-string, exception message or traceback rendered with local variables
(rich, structlog's ``dict_tracebacks``, ``pytest -l``) shows one. Only :meth:`Secret.reveal`
gives the value, at the one place it goes on the wire (an ``httpx2.Auth`` flow).
"""

from __future__ import annotations

from typing import NoReturn

__all__ = ["Secret", "mask_secrets"]

_MASK = "**********"


class Secret:
    """A secret value whose ``repr`` and ``str`` are masked.

    Equality compares the values (so configs holding the same key compare equal) without
    revealing them; hashing is by value too. Pickling is refused: a secret does not leave the
    process by accident.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"a Secret holds a str, got {type(value).__name__}")
        self._value = value

    def reveal(self) -> str:
        """The value. Call it only where the value goes on the wire."""
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __repr__(self) -> str:
        return f"Secret('{_MASK}')"

    def __str__(self) -> str:
        return _MASK

    def __format__(self, format_spec: str) -> str:
        return _MASK

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Secret):
            return self._value == other._value
        return NotImplemented

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Secret cannot be pickled")

    @classmethod
    def of(cls, value: str | Secret | None) -> Secret | None:
        """``value`` as a :class:`Secret` (``None`` and ``""`` stay "no secret")."""
        if value is None or isinstance(value, Secret):
            return value or None
        return cls(value) if value else None


def mask_secrets(text: str, secrets: tuple[Secret, ...]) -> str:
    """``text`` with every occurrence of a secret's value masked (servers sometimes echo the
    key they were sent in an error message)."""
    for secret in secrets:
        value = secret.reveal()
        if len(value) >= 4 and value in text:
            text = text.replace(value, _MASK)
    return text
