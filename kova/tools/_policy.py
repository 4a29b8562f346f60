""":class:`ToolPolicy` and :class:`WebPolicy`: everything the built-in tools may do, injected.

The built-in tools never read configuration or the environment themselves; a host maps its
own settings onto these frozen values (the seed's dependency-inversion boundary). The safe
defaults live here, in one place.
"""

from __future__ import annotations

import datetime
import math
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

import attrs

from .._errors import ConfigError

__all__ = ["ToolPolicy", "WebPolicy"]

WebFormat = Literal["markdown", "text", "html"]
"""How ``fetch_webpage`` returns an HTML page: markdown, plain text, or the HTML itself."""

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _seconds(value: float | datetime.timedelta) -> float:
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected seconds (a number or a timedelta), got {value!r}")
    return float(value)


def _positive(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    # inf would mean "never", which a limit must not: say None-free finite seconds.
    if not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"{attribute.name} must be a positive, finite number, got {value!r}")


def _check_int(attribute: attrs.Attribute[int], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{attribute.name} must be an int, got {value!r}")


def _positive_int(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    _check_int(attribute, value)
    if value <= 0:
        raise ValueError(f"{attribute.name} must be a positive integer, got {value!r}")


def _non_negative_int(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    _check_int(attribute, value)
    if value < 0:
        raise ValueError(f"{attribute.name} must be a non-negative integer, got {value!r}")


def _bool(_instance: object, attribute: attrs.Attribute[bool], value: bool) -> None:
    # "no", "false" and "0" are truthy: a string here must never switch a guard off.
    if not isinstance(value, bool):
        raise TypeError(f"{attribute.name} must be True or False, got {value!r}")


def _header_value(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{attribute.name} must be a string, got {value!r}")
    if any(character in value for character in "\r\n\0"):
        raise ValueError(f"{attribute.name} must be one line, got {value!r}")


def _strings(value: Iterable[str] | str) -> tuple[str, ...]:
    if isinstance(value, str):  # one glob, not its characters
        return (value,)
    if not isinstance(value, Iterable):
        raise TypeError(f"URL rules must be a string or strings, got {value!r}")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str) or not item:
            raise TypeError(f"URL rules must be non-empty strings, got {item!r}")
    return items


def _rules(rules: tuple[str, ...], *, deny: bool) -> None:
    from ._urls import parse_rule

    for rule in rules:
        parse_rule(rule, deny=deny)  # a rule that cannot be read fails here, named


def _path_text(value: object, what: str) -> str:
    if not isinstance(value, str | os.PathLike):
        raise TypeError(f"{what} must be a path (str or os.PathLike), got {value!r}")
    text = os.fspath(value)
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a text path, got {value!r}")
    if not text:
        # "" would silently mean the current directory: say it.
        raise ValueError(f"{what} must not be empty (use '.' for the current directory)")
    if "\0" in text:
        raise ValueError(f"{what} must not contain NUL characters")
    return text


def _absolute(value: str | os.PathLike[str], what: str) -> Path:
    # Lexically absolute only: symlinks are resolved by the tools at each use, so a policy
    # built before a directory exists (or moves) still means what it says.
    return Path(os.path.abspath(os.path.expanduser(_path_text(value, what))))


def _root(value: str | os.PathLike[str] | None) -> Path | None:
    return None if value is None else _absolute(value, "workspace_root")


def _paths(value: Iterable[str | os.PathLike[str]] | str | os.PathLike[str]) -> tuple[Path, ...]:
    if isinstance(value, str | os.PathLike):
        return (_absolute(value, "protected_paths"),)
    if not isinstance(value, Iterable):
        raise TypeError(f"protected_paths must be paths, got {value!r}")
    return tuple(_absolute(item, "protected_paths") for item in value)


def _env(value: Mapping[str, str]) -> Mapping[str, str]:
    if not isinstance(value, Mapping):
        raise TypeError(f"shell_env must be a mapping, got {type(value).__name__}")
    env = dict(value)
    for key, item in env.items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise ValueError(f"shell_env: {key!r} is not a valid environment variable name")
        if not isinstance(item, str) or "\0" in item:
            raise ValueError(f"shell_env[{key!r}] must be a string without NUL bytes")
    return env


def _format(_instance: object, _attribute: attrs.Attribute[str], value: str) -> None:
    if value not in ("markdown", "text", "html"):
        raise ValueError(f"default_format must be 'markdown', 'text' or 'html', got {value!r}")


@attrs.frozen(kw_only=True)
class WebPolicy:
    """What ``fetch_webpage`` and :func:`~kova.tools.fetch_text` may fetch, and how much.

    The defaults are the safe ones: HTTPS only, no private or internal addresses, a few MB
    and 30 seconds at most.

    An attrs class by kova's rule for configurations whose fields convert what the caller
    passes (URL rules into tuples, a ``timedelta`` into seconds; see :mod:`kova._record`).
    """

    allow_private_hosts: bool = attrs.field(default=False, validator=_bool)
    """Allow loopback, private, link-local, CGNAT and other non-public addresses (for tests and
    intranets). Cloud metadata endpoints (``169.254.169.254``, ``fd00:ec2::254``) stay refused."""
    https_only: bool = attrs.field(default=True, validator=_bool)
    """Refuse ``http://`` URLs, also as redirect targets."""
    allowed_urls: tuple[str, ...] = attrs.field(
        default=(), converter=_strings, validator=lambda _i, _a, rules: _rules(rules, deny=False)
    )
    """URL rules (``https://*.example.com/docs/*``); when any are given, a URL must match one.
    Matched against the parsed, normalized URL: scheme, host (``*.example.com`` is its
    subdomains, whole labels only), port (the default one unless the rule names one or
    ``*``) and path (``*`` matches anything) separately."""
    denied_urls: tuple[str, ...] = attrs.field(
        default=(), converter=_strings, validator=lambda _i, _a, rules: _rules(rules, deny=True)
    )
    """URL rules always refused (checked first); a denied rule without a port covers every
    port."""
    max_bytes: int = attrs.field(default=2_000_000, validator=_positive_int)
    """Response bytes read at most; the rest is not downloaded."""
    max_chars: int = attrs.field(default=100_000, validator=_positive_int)
    """Characters of text handed to the model at most (after conversion)."""
    max_redirects: int = attrs.field(default=5, validator=_non_negative_int)
    """Redirects followed at most; each target is checked like the first URL."""
    default_format: WebFormat = attrs.field(default="markdown", validator=_format)
    """What an HTML page becomes when the model does not ask for a format."""
    user_agent: str = attrs.field(default="kova-sdk", validator=_header_value)
    """The ``User-Agent`` header sent."""
    timeout: float = attrs.field(default=30.0, converter=_seconds, validator=_positive)
    """Seconds for the whole fetch, redirects included (a ``timedelta`` is accepted)."""


@attrs.frozen(kw_only=True)
class ToolPolicy:
    """What the built-in tools (:func:`~kova.tools.builtin_tools`) may touch.

    ``workspace_root`` is required, so being unconfined is always a decision written down:
    pass ``None`` or use :meth:`unconfined`.

    An attrs class by kova's rule for configurations whose fields convert what the caller
    passes (a ``str`` into an absolute :class:`~pathlib.Path`, lists into tuples; see
    :mod:`kova._record`).
    """

    workspace_root: Path | None = attrs.field(converter=_root)
    """File tools are confined here and relative paths resolve here; ``shell`` runs here (and
    gets it as ``HOME``). ``None``: unconfined (paths resolve against the current directory)."""
    protected_paths: tuple[Path, ...] = attrs.field(default=(), converter=_paths)
    """Files or directories the file tools never read, list, search or write (secrets, host
    configuration), even inside the workspace. Symlinks to them are refused too."""
    shell_timeout: float = attrs.field(default=60.0, converter=_seconds, validator=_positive)
    """Wall-clock seconds per ``shell`` call; the whole process group is killed on expiry."""
    shell_env: Mapping[str, str] = attrs.field(factory=dict, converter=_env)
    """Variables added to ``shell``'s minimal environment (``PATH``, ``HOME``, ``LANG``, ...).
    Nothing comes from the host's environment unless it is named here."""
    web: WebPolicy = attrs.field(
        factory=WebPolicy, validator=attrs.validators.instance_of(WebPolicy)
    )
    """The rules for ``fetch_webpage`` (``builtin_tools(..., web=True)``)."""
    max_read_bytes: int = attrs.field(default=1_000_000, validator=_positive_int)
    """Bytes ``read_file`` reads at most (the result says when it stopped early)."""
    max_write_bytes: int = attrs.field(default=10_000_000, validator=_positive_int)
    """Bytes ``write_file``, ``edit_file`` and ``patch_file`` write (and edit) at most."""
    max_output_chars: int = attrs.field(default=30_000, validator=_positive_int)
    """Characters of output kept per stream of ``shell`` and for ``search``/``list_dir``."""
    max_entries: int = attrs.field(default=1_000, validator=_positive_int)
    """Entries ``list_dir`` lists and matches ``search`` reports at most."""
    allow_hard_links: bool = attrs.field(default=False, validator=_bool)
    """Read files that have more than one hard link. Off by default: a hard link inside the
    workspace can name a file outside it or a protected one (nothing in a path says so).
    Turn it on for trees that hard-link on purpose (a pnpm ``node_modules``, a Nix store)
    when nothing outside the workspace worth protecting is on the same file system."""

    @classmethod
    def unconfined(cls, *, shell_timeout: float | datetime.timedelta = 60.0) -> ToolPolicy:
        """A policy with no workspace root and no protected paths.

        For trusted, non-interactive use only (your own scripts, a sandbox or container that
        is itself the boundary): the file tools can then read and write anything the process
        can, and ``shell`` runs in the current directory. The web rules keep their safe
        defaults.
        """
        return cls(workspace_root=None, shell_timeout=shell_timeout)
