"""Validators and converters the provider configs share, so a wrong value fails where the
config is built, with a message naming the field, instead of deep inside a call (an
``AttributeError`` in the codec, or a retried "connection failed" for a URL without a scheme).

They are attrs ``validator=`` / ``converter=`` callables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeVar

from .._secret import SecretHeaders

if TYPE_CHECKING:
    import attrs

    from .._models import JSONValue

_T = TypeVar("_T")

__all__ = [
    "check_bool",
    "check_http_url",
    "check_int",
    "check_non_empty_str",
    "check_number",
    "header_map",
    "options_map",
]


def check_non_empty_str(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    """A non-empty ``str``."""
    if not isinstance(value, str):
        raise TypeError(f"{attribute.name} must be a string, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{attribute.name} must not be empty")


def check_http_url(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    """An ``http://`` or ``https://`` URL with a host."""
    if not isinstance(value, str):
        raise TypeError(f"{attribute.name} must be a string, got {type(value).__name__}")
    scheme, _, rest = value.partition("://")
    if scheme.lower() not in ("http", "https") or not rest.strip("/"):
        raise ValueError(f"{attribute.name} must be an http(s) URL, got {value!r}")


def check_number(_instance: object, attribute: attrs.Attribute[_T], value: _T) -> None:
    """An ``int`` or ``float`` (not a ``bool``), or ``None``. Put it before range checks."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise TypeError(f"{attribute.name} must be a number, got {value!r}")


def check_int(_instance: object, attribute: attrs.Attribute[_T], value: _T) -> None:
    """An ``int`` (not a ``bool``), or ``None``. Put it before range checks."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"{attribute.name} must be an int, got {value!r}")


def check_bool(_instance: object, attribute: attrs.Attribute[_T], value: _T) -> None:
    """A ``bool``, or ``None``."""
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"{attribute.name} must be a bool or None, got {value!r}")


def header_map(value: Mapping[str, str]) -> SecretHeaders:
    """Extra headers as :class:`~kova.SecretHeaders`: every name and value a ``str``, every
    value masked in reprs unless the caller listed it as public (a ``SecretHeaders`` given
    is kept as it is)."""
    if isinstance(value, SecretHeaders):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"extra_headers must be a mapping, got {type(value).__name__}")
    try:
        return SecretHeaders(value)
    except TypeError as exc:
        raise TypeError(f"extra_{exc}") from None


def options_map(value: Mapping[str, JSONValue]) -> Mapping[str, JSONValue]:
    """A copy of a provider's extra options, every key a ``str``."""
    if not isinstance(value, Mapping):
        raise TypeError(f"extra_options must be a mapping, got {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise TypeError(f"extra_options keys must be strings, got {key!r}")
    return dict(value)
