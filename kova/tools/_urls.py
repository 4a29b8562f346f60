"""``WebPolicy.allowed_urls`` / ``denied_urls``: rules matched against parsed, normalized URLs.

A glob over the raw URL text lets ``*`` cross ``/``, ``@`` and ``.``, and compares text that
is not what gets fetched: ``https://*.example.com/*`` admitted
``https://attacker.test/x.example.com/``, and a denial was beaten by a capital letter, a
trailing dot, ``:443``, userinfo or ``%61``. So both sides are parsed:

* a URL is normalized once (:func:`normalize_url`): scheme and host lower case, the host's
  trailing dot dropped, percent-decoded and IDNA-encoded, an IP literal in its canonical form
  (``2130706433`` is ``127.0.0.1``); the port made explicit; the path's unreserved escapes
  decoded (``%61`` is ``a``) and its dot segments removed. Userinfo, backslashes, control
  characters and (where rules look at paths) empty segments or encoded slashes are refused.
  That normalized URL is also the one fetched, so what was matched is what is sent.
* a rule (:func:`parse_rule`) is ``scheme://host[:port][/path]``: the scheme exact or ``*``
  (http or https); the host exact, ``*`` (any host), or ``*.example.com`` (one or more whole
  labels before ``example.com``: its subdomains, never ``evilexample.com``, and never the
  domain itself), with ``*`` inside one label matching within that label only; the port exact
  or ``*``; the path a glob in which ``*`` matches anything (``/`` included) and nothing else is
  special. Without a port, an *allowed* rule means the scheme's default port and a *denied*
  rule any port; without a path, every path. Queries and fragments are not matched.
"""

from __future__ import annotations

import re
import urllib.parse

from .._record import Record
from ._ssrf import parse_ip_host

__all__ = ["DEFAULT_PORT", "NormalizedUrl", "UrlRule", "normalize_url", "parse_rule"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
DEFAULT_PORT = 0
"""A rule's port when it names none and allows: the URL's scheme's default port."""
_UNRESERVED_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_FORBIDDEN = re.compile(r"[\x00-\x20\x7f\\]")
_ENCODED_SEPARATOR = re.compile(r"%(?:2[fF]|5[cC])")


class NormalizedUrl(Record):
    """A URL as the web tools match and fetch it."""

    scheme: str
    host: str
    port: int
    path: str
    query: str

    @property
    def text(self) -> str:
        """The URL to fetch: normalized, the default port left out."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if _DEFAULT_PORTS.get(self.scheme) == self.port else f":{self.port}"
        query = f"?{self.query}" if self.query else ""
        return f"{self.scheme}://{host}{port}{self.path}{query}"


def _decode_unreserved(match: re.Match[str]) -> str:
    character = chr(int(match.group(1), 16))
    return character if character in _UNRESERVED else f"%{match.group(1).upper()}"


def _remove_dot_segments(path: str) -> str:
    # RFC 3986, 5.2.4, on whole segments.
    output: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                output.append("")
        elif segment == "..":
            if len(output) > 1:
                output.pop()
            if last:
                output.append("")
        else:
            output.append(segment)
    result = "/".join(output)
    return result if result.startswith("/") else "/" + result


def _normalize_path(path: str) -> str:
    path = _UNRESERVED_ESCAPE.sub(_decode_unreserved, path or "/")
    return _remove_dot_segments(path)


def _normalize_host(host: str) -> str:
    host = urllib.parse.unquote(host).strip().rstrip(".").lower()
    if not host:
        raise ValueError("the URL has no host")
    literal = parse_ip_host(host)
    if literal is not None:
        return str(literal)
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise ValueError(f"the host {host!r} is not a valid name") from exc


def normalize_url(url: str, *, strict_path: bool = False) -> NormalizedUrl:
    """``url`` parsed and normalized (see the module docstring).

    Args:
        url: an absolute http(s) URL.
        strict_path: also refuse paths that servers may read differently from us (empty
            segments, encoded ``/`` or ``\\``); set when rules look at paths.

    Raises:
        ValueError: the URL cannot be read, or has a form that is refused.
    """
    if _FORBIDDEN.search(url):
        raise ValueError("the URL contains whitespace, a control character or a backslash")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"not a valid URL ({exc})") from exc
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError(f"the scheme {scheme or '(none)'!r} is not http or https")
    if "@" in parts.netloc:
        raise ValueError("URLs with credentials (user@host) are refused")
    host = _normalize_host(parts.hostname or "")
    path = _normalize_path(parts.path)
    if strict_path and ("//" in path or _ENCODED_SEPARATOR.search(path)):
        raise ValueError(
            "the path has an empty segment or an encoded slash, which servers read differently"
        )
    return NormalizedUrl(
        scheme=scheme,
        host=host,
        port=port if port is not None else _DEFAULT_PORTS[scheme],
        path=path,
        query=parts.query,
    )


def _glob(pattern: str) -> re.Pattern[str]:
    """``*`` matches anything; every other character is itself."""
    return re.compile(
        "".join(".*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", pattern))
        + r"\Z",
        re.S,
    )


class UrlRule(Record):
    """One parsed ``allowed_urls`` / ``denied_urls`` rule."""

    text: str
    schemes: frozenset[str]
    host: str
    """``*``, ``*.suffix`` or a host whose labels may hold ``*``."""
    port: int | None
    """``None``: any port; :data:`DEFAULT_PORT`: the scheme's default port."""
    path: re.Pattern[str]

    def matches(self, url: NormalizedUrl) -> bool:
        """Whether the normalized ``url`` is one this rule names."""
        if url.scheme not in self.schemes:
            return False
        if self.port == DEFAULT_PORT:
            if url.port != _DEFAULT_PORTS[url.scheme]:
                return False
        elif self.port is not None and url.port != self.port:
            return False
        if not _host_matches(self.host, url.host):
            return False
        return self.path.match(url.path) is not None


def _host_matches(pattern: str, host: str) -> bool:
    if pattern == "*":
        return True
    if pattern.startswith("*."):
        suffix = pattern[1:]  # ".example.com": whole labels before it
        return host.endswith(suffix) and len(host) > len(suffix)
    labels, wanted = host.split("."), pattern.split(".")
    if len(labels) != len(wanted):
        return False
    return all(
        label == rule if "*" not in rule else _glob(rule).match(label) is not None
        for label, rule in zip(labels, wanted, strict=True)
    )


def parse_rule(text: str, *, deny: bool) -> UrlRule:
    """A rule from its text (see the module docstring).

    Raises:
        ValueError: the rule cannot be read (naming what is wrong).
    """
    scheme, separator, rest = text.partition("://")
    if not separator:
        raise ValueError(f"URL rule {text!r} must look like scheme://host/path")
    scheme = scheme.lower()
    if scheme == "*":
        schemes = frozenset(_DEFAULT_PORTS)
    elif scheme in _DEFAULT_PORTS:
        schemes = frozenset({scheme})
    else:
        raise ValueError(f"URL rule {text!r}: the scheme must be http, https or *")
    if any(mark in rest for mark in "?#@\\"):
        raise ValueError(
            f"URL rule {text!r}: rules match scheme, host, port and path (no query, fragment "
            "or userinfo)"
        )
    slash = rest.find("/")
    authority, path = (rest, "/*") if slash < 0 else (rest[:slash], rest[slash:])
    port_text: str | None
    if authority.startswith("["):  # an IPv6 literal: [::1] or [::1]:443
        end = authority.find("]")
        after = authority[end + 1 :] if end > 0 else "?"
        if after and not after.startswith(":"):
            raise ValueError(f"URL rule {text!r}: a bracketed host must end with ']'")
        host, port_text = authority[1:end], (after[1:] if after else None)
    else:
        host, colon, port_text = authority.partition(":")
        port_text = port_text if colon else None
    port: int | None
    if port_text is None:
        # Without a port: an allowed rule means the scheme's default port (nothing else is
        # admitted by surprise), a denied one every port (nothing escapes it by naming one).
        port = None if deny else DEFAULT_PORT
    elif port_text == "*":
        port = None
    elif port_text.isdigit() and 0 < int(port_text) < 65536:
        port = int(port_text)
    else:
        raise ValueError(f"URL rule {text!r}: the port must be a number or *")
    host = host.strip("[]").rstrip(".").lower()
    if not host:
        raise ValueError(f"URL rule {text!r} has no host (use * for any host)")
    if host != "*" and not host.startswith("*."):
        if "*" not in host:
            host = _normalize_host(host)
        elif ".." in host or host.startswith("."):
            raise ValueError(f"URL rule {text!r}: the host has an empty label")
    elif host.startswith("*.") and "*" in host[2:]:
        raise ValueError(f"URL rule {text!r}: '*.' is the only wildcard in a subdomain rule")
    elif host.startswith("*."):
        host = "*." + _normalize_host(host[2:])
    return UrlRule(
        text=text, schemes=schemes, host=host, port=port, path=_glob(_normalize_path(path))
    )
