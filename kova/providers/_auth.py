"""Authentication as ``httpx2.Auth`` flows, so the transport knows nothing of any provider.

A codec never sees a key: the provider hands the transport an auth flow, which sets the
credential on each request as it is sent (or, for SigV4, signs the final bytes: a flow with
``requires_request_body = True`` sees them). Keys stay in :class:`~kova.Secret` until that
moment, so nothing that prints a config, a provider or a request shows them.

* :func:`bearer_auth` -- ``Authorization: Bearer <key>`` (OpenAI, Anthropic's newest API
  version, Bedrock API keys);
* :func:`header_auth` -- a key in a header of its own (``x-api-key``, Azure ``api-key``,
  Gemini ``x-goog-api-key``).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

import httpx2

from .._secret import Secret

if TYPE_CHECKING:
    from collections.abc import Generator
    from types import TracebackType

__all__ = ["AS_BUILT", "HeaderAuth", "bearer_auth", "header_auth", "secrets_of"]


class HeaderAuth(httpx2.Auth):
    """Sets one header to ``prefix + key`` on every request."""

    __slots__ = ("header", "prefix", "secret")

    def __init__(self, header: str, secret: Secret, *, prefix: str = "") -> None:
        if not isinstance(secret, Secret):
            raise TypeError("HeaderAuth takes a kova.Secret")
        self.header = header
        self.secret = secret
        self.prefix = prefix

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response]:
        request.headers[self.header] = self.prefix + self.secret.reveal()
        yield request

    def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """The same flow without an async generator per request (one is alive, and tracked
        by trio, while every request waits for its response head)."""
        request.headers[self.header] = self.prefix + self.secret.reveal()
        return _OneRequest(request)

    def __repr__(self) -> str:
        return f"HeaderAuth({self.header!r}, {self.secret!r})"


class _OneRequest(AsyncGenerator[httpx2.Request, httpx2.Response]):
    """An auth flow that sends one request and takes no answer back."""

    __slots__ = ("_request",)

    def __init__(self, request: httpx2.Request) -> None:
        self._request: httpx2.Request | None = request

    async def asend(self, value: httpx2.Response | None = None) -> httpx2.Request:
        request = self._request
        if request is None:
            raise StopAsyncIteration
        self._request = None
        return request

    # httpx2 takes the request with __anext__ and ends the flow with aclose: both without
    # the mixins' extra coroutine and GeneratorExit thrown in and caught (~10k a request).
    __anext__ = asend

    async def aclose(self) -> None:
        self._request = None

    async def athrow(
        self,
        typ: type[BaseException] | BaseException,
        val: object = None,
        tb: TracebackType | None = None,
        /,
    ) -> httpx2.Request:
        self._request = None
        if isinstance(typ, BaseException):
            raise typ
        if isinstance(val, BaseException):
            raise val
        raise typ


class _AsBuilt(httpx2.Auth):
    """Sends a request as it is: one whose auth header the transport set already."""

    def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        return _OneRequest(request)


AS_BUILT: httpx2.Auth = _AsBuilt()


def bearer_auth(secret: Secret) -> HeaderAuth:
    """``Authorization: Bearer <secret>``."""
    return HeaderAuth("authorization", secret, prefix="Bearer ")


def header_auth(header: str, secret: Secret) -> HeaderAuth:
    """``<header>: <secret>`` (``x-api-key``, ``api-key``, ``x-goog-api-key``)."""
    return HeaderAuth(header, secret)


def secrets_of(auth: httpx2.Auth | None) -> tuple[Secret, ...]:
    """The secrets an auth flow holds (to mask them in error messages a server echoes)."""
    found = getattr(auth, "secrets", None)
    if isinstance(found, tuple):
        return tuple(item for item in found if isinstance(item, Secret))
    secret = getattr(auth, "secret", None)
    return (secret,) if isinstance(secret, Secret) else ()
