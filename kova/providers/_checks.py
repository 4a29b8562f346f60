"""Validators and converters the provider configs share, so a wrong value fails where the
config is built, with a message naming the field, instead of deep inside a call (an
``AttributeError`` in the codec, or a retried "connection failed" for a URL without a scheme).

They are attrs ``validator=`` / ``converter=`` callables.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from .._json import check_depth, dumps
from .._secret import SecretHeaders

if TYPE_CHECKING:
    import attrs

    from .._models import JSONValue

_T = TypeVar("_T")

__all__ = [
    "at_least",
    "check_bool",
    "check_flag",
    "check_http_url",
    "check_int",
    "check_json_object",
    "check_non_empty_str",
    "check_number",
    "check_optional_str",
    "check_path",
    "check_header_text",
    "header_map",
    "options_map",
]


def check_non_empty_str(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    """A non-empty ``str``."""
    if not isinstance(value, str):
        raise TypeError(f"{attribute.name} must be a string, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{attribute.name} must not be empty")


def check_optional_str(_instance: object, attribute: attrs.Attribute[_T], value: _T) -> None:
    """A non-empty ``str``, or ``None``."""
    if value is None:
        return
    if not isinstance(value, str):
        raise TypeError(f"{attribute.name} must be a string or None, got {value!r}")
    if not value:
        raise ValueError(f"{attribute.name} must not be empty (None leaves it unset)")


def check_path(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    """A URL path: a ``str`` starting with ``/``."""
    if not isinstance(value, str):
        raise TypeError(f"{attribute.name} must be a string, got {value!r}")
    if not value.startswith("/"):
        raise ValueError(f"{attribute.name} must be a path starting with '/', got {value!r}")


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


def at_least(minimum: int) -> Callable[[object, attrs.Attribute[Any], Any], None]:
    """A validator: an ``int`` (not a ``bool``) of at least ``minimum``, or ``None``."""

    def check(_instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        check_int(_instance, attribute, value)
        if value is not None and value < minimum:
            raise ValueError(f"{attribute.name} must be at least {minimum}, got {value}")

    return check


def check_bool(_instance: object, attribute: attrs.Attribute[_T], value: _T) -> None:
    """A ``bool``, or ``None``."""
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"{attribute.name} must be a bool or None, got {value!r}")


def check_flag(_instance: object, attribute: attrs.Attribute[_T], value: _T) -> None:
    """A ``bool`` (``None`` is refused: the field has no "unset")."""
    if not isinstance(value, bool):
        raise TypeError(f"{attribute.name} must be True or False, got {value!r}")


def check_json_object(_instance: object, attribute: attrs.Attribute[_T], value: _T) -> None:
    """A mapping JSON can carry (``str`` keys, JSON values, at most
    :data:`~kova._json.MAX_JSON_DEPTH` deep), or ``None``: sent as given in every request,
    so a value ``json`` cannot write fails here, not in every call."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise TypeError(f"{attribute.name} must be a mapping, got {type(value).__name__}")
    check_depth(value, attribute.name)
    try:
        dumps(value)
    except TypeError as exc:
        raise TypeError(f"{attribute.name} must hold JSON values only: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"{attribute.name} must hold JSON values only: {exc}") from None


def header_map(value: Mapping[str, str]) -> SecretHeaders:
    """Extra headers as :class:`~kova.SecretHeaders`: every name and value a ``str``, every
    value masked in reprs unless the caller listed it as public (a ``SecretHeaders`` given
    is kept as it is)."""
    if not isinstance(value, SecretHeaders):
        if not isinstance(value, Mapping):
            raise TypeError(f"extra_headers must be a mapping, got {type(value).__name__}")
        try:
            value = SecretHeaders(value)
        except TypeError as exc:
            raise TypeError(f"extra_{exc}") from None
    for name, header in value.items():
        check_header_text(f"extra_headers[{name!r}]", name, show=True)
        check_header_text(f"extra_headers[{name!r}]", header, show=value.is_public(name))
    return value


_NOT_IN_HEADERS = re.compile("[\x00-\x08\x0a-\x1f\x7f\ud800-\udfff]")


def check_header_text(what: str, text: str, *, show: bool = False) -> None:
    """Raise ``ValueError`` if ``text`` cannot go in an HTTP header (a control character such
    as a newline, or a lone surrogate, which has no UTF-8 encoding): a key pasted with its
    line break fails where the config is built, not as a "connection failed" on every call.
    The value is named only when ``show`` (a secret's is not)."""
    bad = _NOT_IN_HEADERS.search(text)
    if bad is not None:
        shown = f" {text!r}" if show else ""
        raise ValueError(
            f"{what}{shown} holds {bad.group()!r} at position {bad.start()}, which an HTTP "
            "header cannot carry"
        )


def options_map(value: Mapping[str, JSONValue]) -> Mapping[str, JSONValue]:
    """A copy of a provider's extra options, every key a ``str``."""
    if not isinstance(value, Mapping):
        raise TypeError(f"extra_options must be a mapping, got {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise TypeError(f"extra_options keys must be strings, got {key!r}")
    options = dict(value)
    check_depth(options, "extra_options")
    try:
        dumps(options)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"extra_options must hold JSON values only: {exc}") from None
    return options
