"""The few HTTP pieces the web view checks itself: a request's ``Host`` and ``Origin``, and
the page's files. HTTP and WebSocket framing are Hypercorn's (``kova.web._asgi`` has the
routes).

One port serves both the page and its WebSocket, so the page needs no configuration and the
origin check can compare the page's origin with the host it connected to.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from .._record import Record

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["MAX_HEAD_BYTES", "RequestHead", "host_allowed", "load_static", "origin_allowed"]

MAX_HEAD_BYTES = 16 * 1024
"""The largest request head taken (Hypercorn answers a larger one with an error)."""

_STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/page.css": ("page.css", "text/css; charset=utf-8"),
    "/page.js": ("page.js", "text/javascript; charset=utf-8"),
}
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


class RequestHead(Record):
    """An HTTP request line and headers (header names lower-cased; the last one wins)."""

    method: str
    target: str
    headers: Mapping[str, str]

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> Mapping[str, list[str]]:
        return parse_qs(urlsplit(self.target).query)


def load_static() -> dict[str, tuple[bytes, str]]:
    """The page's files by path: their bytes and content type (read once, at startup)."""
    folder = resources.files("kova.web") / "static"
    return {
        path: ((folder / name).read_bytes(), content_type)
        for path, (name, content_type) in _STATIC.items()
    }


def host_allowed(head: RequestHead, *, host: str, port: int) -> bool:
    """Whether the request's ``Host`` may reach a server listening on ``host:port``."""
    given = head.headers.get("host")
    if given is None:
        return False
    loopback = host in ("127.0.0.1", "::1", "localhost")
    if not loopback:
        return True  # listening beyond loopback: the token is the check
    return given in {f"{name}:{port}" for name in _LOOPBACK_NAMES}


def origin_allowed(head: RequestHead, allowed_origins: frozenset[str]) -> bool:
    """Whether the request's ``Origin`` (a browser's) is the server's own or an allowed one."""
    origin = head.headers.get("origin")
    if origin is None:
        return True  # not a browser; the token still has to match
    return origin == f"http://{head.headers.get('host')}" or origin in allowed_origins
