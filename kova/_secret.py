"""A string that never prints: API keys, tokens, passwords.

Every config, provider, transport and auth flow keeps credentials in a :class:`Secret`, so no
``repr``, ``str``, f-string, exception message or traceback rendered with local variables
(rich, structlog's ``dict_tracebacks``, ``pytest -l``) shows one. Only :meth:`Secret.reveal`
gives the value, at the one place it goes on the wire (an ``httpx2.Auth`` flow).
"""

from __future__ import annotations

import json
import re
import traceback
from collections.abc import Iterable, Iterator, Mapping
from typing import NoReturn

__all__ = ["MASK", "Secret", "SecretHeaders", "forget_locals", "mask_exception", "mask_secrets"]

MASK = "**********"
"""What a masked value shows."""


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
        return f"Secret('{MASK}')"

    def __str__(self) -> str:
        return MASK

    def __format__(self, format_spec: str) -> str:
        return MASK

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


class SecretHeaders(Mapping[str, str]):
    """HTTP headers whose values are masked in ``repr`` and ``str``, except the ones listed
    as ``public``.

    Every provider config's ``extra_headers`` is one of these (a plain mapping is converted,
    every value masked), because that is where gateway keys go (``x-portkey-api-key``,
    ``cf-aig-authorization``, ``helicone-auth``): no config, provider, ``AgentConfig``,
    request description or traceback rendered with locals shows them, and a value a server
    echoes in an error is masked like an API key. Headers that are not secret may be listed,
    case-insensitively, to show in reprs and stay unmasked in error messages::

        AnthropicConfig(
            model="claude-opus-4-8",
            extra_headers=SecretHeaders(
                {"anthropic-beta": "context-1m-2025-08-07", "x-gateway-key": key},
                public=("anthropic-beta",),
            ),
        )

    As a mapping it reads the real values (they go on the wire); equality compares the values
    like a ``dict``'s, whatever is public.

    Raises:
        TypeError: ``headers`` is not a mapping of ``str`` to ``str``, or ``public`` is not a
            collection of header names.
    """

    __slots__ = ("_public", "_values")

    def __init__(
        self,
        headers: Mapping[str, str] | None = None,
        *,
        public: Iterable[str] = (),
    ) -> None:
        if headers is None:
            headers = {}
        if not isinstance(headers, Mapping):
            raise TypeError(f"headers must be a mapping, got {type(headers).__name__}")
        values: dict[str, str] = {}
        for name, value in headers.items():
            if not isinstance(name, str) or not isinstance(value, str):
                # Neither value is shown: either may be the secret.
                raise TypeError(
                    f"headers must map str to str, got {type(name).__name__}: "
                    f"{type(value).__name__}"
                )
            values[name] = value
        if isinstance(public, str | bytes) or not isinstance(public, Iterable):
            raise TypeError(f"public must be a collection of header names, got {public!r}")
        names = tuple(public)
        if not all(isinstance(name, str) for name in names):
            raise TypeError(f"public must be a collection of header names, got {names!r}")
        inherited = headers.public if isinstance(headers, SecretHeaders) else frozenset()
        self._values = values
        self._public = inherited | frozenset(name.lower() for name in names)

    @classmethod
    def of(cls, headers: Mapping[str, str] | None) -> SecretHeaders:
        """``headers`` as :class:`SecretHeaders` (a plain mapping: every value secret)."""
        if isinstance(headers, SecretHeaders):
            return headers
        return cls(headers)

    @property
    def public(self) -> frozenset[str]:
        """The names (lower case) whose values are not secret."""
        return self._public

    def is_public(self, name: str) -> bool:
        """Whether the value of header ``name`` may be shown."""
        return name.lower() in self._public

    def secrets(self) -> tuple[Secret, ...]:
        """The values that are secret (to mask wherever a server echoes one)."""
        return tuple(
            Secret(value) for name, value in self._values.items() if not self.is_public(name)
        )

    def merged(self, headers: Mapping[str, str], *, replace: bool = True) -> SecretHeaders:
        """These headers plus ``headers``, which are public (a codec's own protocol headers:
        ``accept``, ``anthropic-version``). With ``replace=False`` a header already here wins
        over the one added."""
        values = {**self._values, **headers} if replace else {**headers, **self._values}
        merged = SecretHeaders(values)
        added = {name.lower() for name in headers}
        if not replace:
            added -= {name.lower() for name in self._values}
        merged._public = self._public | frozenset(added)
        return merged

    def __getitem__(self, name: str) -> str:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._values == dict(other.items())
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self._values.items()))

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name!r}: {value!r}" if self.is_public(name) else f"{name!r}: '{MASK}'"
            for name, value in self._values.items()
        )
        return f"SecretHeaders({{{shown}}})"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:
        raise TypeError("SecretHeaders cannot be pickled")


FRAGMENT = 8
"""The shortest run of a secret's characters that is masked on its own: a server's text
that kova cut (a 200-character preview of a body, an unreadable stream line) may end or
start in the middle of a key, leaving part of it that no longer matches the whole."""


def mask_secrets(text: str, secrets: Iterable[Secret]) -> str:
    """``text`` with every occurrence of a secret's value masked, in any letter case (servers
    sometimes echo the key they were sent in an error, and some decoders capitalize an error
    type: Bedrock's ``throttlingException`` is ``ThrottlingException``), and every run of
    :data:`FRAGMENT` or more consecutive characters of one (a key cut in half by a preview
    made before the text reached the code that knows the keys)."""
    for secret in secrets:
        value = secret.reveal()
        if len(value) < 4:
            continue
        if len(value) <= FRAGMENT:
            if value.casefold() in text.casefold():
                text = re.sub(re.escape(value), MASK, text, flags=re.IGNORECASE)
            continue
        text = _mask_fragments(text, value)
    return text


def _mask_fragments(text: str, value: str) -> str:
    """``text`` with every run of at least :data:`FRAGMENT` characters of ``value`` (any
    letter case) masked, each maximal run by one mask."""
    folded = value.casefold()
    if len(folded) != len(value):  # casefold changed the length (ß): whole matches only
        return re.sub(re.escape(value), MASK, text, flags=re.IGNORECASE)
    lowered = text.casefold()
    if len(lowered) != len(text):  # keep positions: lower() or, failing that, the text
        lowered = text.lower() if len(text.lower()) == len(text) else text
    # Every run of FRAGMENT or more characters of the value starts with one of its pieces
    # of FRAGMENT characters: find each (str.find, in C), then extend it as far as it goes.
    spans: list[tuple[int, int]] = []
    size = len(lowered)
    for offset in range(len(folded) - FRAGMENT + 1):
        piece = folded[offset : offset + FRAGMENT]
        position = lowered.find(piece)
        while position != -1:
            end = position + FRAGMENT
            while end < size and offset + end - position < len(folded):
                if lowered[end] != folded[offset + end - position]:
                    break
                end += 1
            spans.append((position, end))
            position = lowered.find(piece, position + 1)
    if not spans:
        return text
    spans.sort()
    parts: list[str] = []
    previous = 0
    for start, end in spans:
        if start < previous:  # inside the run just masked: extend it
            previous = max(previous, end)
            continue
        parts += [text[previous:start], MASK]
        previous = end
    parts.append(text[previous:])
    return "".join(parts)


def forget_locals(error: BaseException, secrets: tuple[Secret, ...] = ()) -> None:
    """Clear the local variables of the finished frames in ``error``'s traceback, and in the
    tracebacks of the errors it was raised from, keeping every frame's file and line.

    A traceback rendered with locals (rich, ``pytest -l``, Sentry, structlog's
    ``dict_tracebacks``) prints each frame's variables; the frames under a provider call hold
    the raw request headers and response bodies a server may have echoed a key into. Frames
    still running (the caller's) are left alone (:func:`traceback.clear_frames` skips them).
    The whole document a decoding error keeps (``JSONDecodeError.doc``,
    ``UnicodeDecodeError.object``: a server's body) is dropped too. Each of ``secrets`` is
    masked in the errors' arguments (:func:`mask_exception`).
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        traceback.clear_frames(current.__traceback__)
        _forget_document(current)
        if secrets:
            current.args = tuple(_masked_value(arg, secrets) for arg in current.args)
        current = current.__cause__ or current.__context__


def _forget_document(error: BaseException) -> None:
    """Drop the whole text a decoding error keeps: ``JSONDecodeError.doc`` (the document)
    and ``UnicodeError.object`` (the bytes or text), which a debugger or error tracker shows.
    Its message keeps what failed where (``line 1 column 2 (char 1)``, the byte offset)."""
    if isinstance(error, json.JSONDecodeError):
        error.doc = ""
    elif isinstance(error, UnicodeError):
        # The object is in args too (``repr`` shows those); the message keeps the offsets.
        blank: bytes | str = b"" if isinstance(error, UnicodeDecodeError) else ""
        if isinstance(error, UnicodeDecodeError | UnicodeEncodeError | UnicodeTranslateError):
            error.object = blank
            if len(error.args) == 5:  # (encoding, object, start, end, reason)
                error.args = (error.args[0], blank, *error.args[2:])


def mask_exception(error: BaseException, secrets: Iterable[Secret]) -> BaseException:
    """``error`` (and each error it was raised from) with every one of ``secrets`` masked in
    its arguments and its frames' local variables cleared (:func:`forget_locals`), returned
    for ``raise ... from mask_exception(exc, secrets)``.

    For a fault met on a server's bytes (a codec's stray ``KeyError`` or ``ValueError``) kept
    as the cause of the kova error it became: its type and traceback still say where the
    codec failed, but its text may quote the payload, and a server may have echoed a key
    there. The document a ``JSONDecodeError`` keeps and the bytes a ``UnicodeError`` keeps
    (``doc``, ``object``), which a debugger or error tracker shows, are dropped.
    """
    forget_locals(error, tuple(secrets))  # the documents a decoding error keeps go too
    return error


def _masked_value(value: object, secrets: tuple[Secret, ...]) -> object:
    """``value`` itself when no secret is in it; else its text with the secrets masked (bytes
    as bytes)."""
    if isinstance(value, bytes):
        text = value.decode("latin-1")
        masked = mask_secrets(text, secrets)
        return value if masked == text else masked.encode("latin-1")
    text = value if isinstance(value, str) else repr(value)
    masked = mask_secrets(text, secrets)
    return value if masked == text else masked
