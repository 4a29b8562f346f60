"""The HTTP transport every HTTP provider shares: one ``httpx2.AsyncClient``, timeouts, and
the single place where transport failures and error statuses become kova errors.

A provider owns one :class:`HttpTransport` and delegates its ``open()`` to it::

    transport = HttpTransport(
        provider="openai",
        base_url="https://api.openai.com",
        timeout=30.0,
        transport=None,            # or an httpx2.MockTransport / custom transport in tests
        client=None,               # or a caller-owned httpx2.AsyncClient (never closed by us)
        error_details=default_error_details,  # hook: JSON error body -> ErrorDetails
    )

    async with transport.open():                     # reference-counted, shares one pool
        body = await transport.request_json("POST", "/v1/chat/completions", json_body=payload,
                                            headers={"authorization": "Bearer ..."})
        async with transport.stream("POST", path, json_body=payload) as stream:
            async for data in stream.iter_bytes():   # one chunk per network read
                ...

The HTTP provider (:mod:`kova.providers._http_provider`) reads a stream through
:meth:`HttpStream.raw_chunks` instead and maps errors inline with :func:`translate_error`,
in the same iterator that frames and decodes each read.

Error mapping (:func:`map_errors` around calls, :func:`translate_error` inline in the body
iterators, where a context manager per read would cost about 1 µs):

* connect / read / write / pool timeout → :class:`~kova.KovaTimeoutError` (``timeout`` set);
* refused, reset, DNS or protocol failure *before* a response → :class:`~kova.KovaConnectionError`;
* the same *while reading a streamed body* → :class:`~kova.StreamError` ("connection cut
  mid-stream"): part of the answer may already have been delivered, so it is never a silently
  short answer and never transparently retryable;
* a body whose content encoding does not decode (garbage gzip) → :class:`~kova.InvalidResponse`
  naming the decoding failure, streamed or not;
* an HTTP status ≥ 400 → :meth:`~kova.ProviderError.from_status` with ``retry_after`` from
  ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date) and the provider's message and
  type from its JSON error body (see :func:`default_error_details`), classified by the status
  the same way on the streamed and the non-streamed path. Only the first
  :data:`MAX_ERROR_BODY_BYTES` (64 KiB) of an error body are read, and the message keeps at
  most :data:`MAX_ERROR_MESSAGE_CHARS` (2,000) characters of what it says: a server that
  answers a 50 MB error page costs neither memory nor every log line it is carried into.

Every vendor exception is re-raised as a kova error ``from`` the original. ``trio.Cancelled``
passes through untouched; on cancellation the request is abandoned and its connection closed.

Timeouts are httpx2's connect and read timeouts set on the client (the one place STYLE.md
allows a ``timeout=`` value), so they follow trio's clock and are testable on ``MockClock``.
The read timeout is per network read, so a server trickling its headers a line at a time
would never trip it: the time to the response head is bounded as a whole by ``timeout`` too,
on both paths (a stream's and a non-streamed call's, the latter also inside ``total_timeout``).
"""

from __future__ import annotations

import json
import logging
import math
import urllib.request
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Final, TypeVar

import httpx2
import httpx2._decoders as httpx2_decoders
import trio

from .._errors import (
    InvalidRequest,
    InvalidResponse,
    KovaConnectionError,
    KovaError,
    KovaTimeoutError,
    ProviderError,
    ProviderErrorClass,
    StreamError,
    check_seconds,
    parse_retry_after,
)
from .._json import JsonNestingError, dumps_bytes, loads
from .._record import Record
from .._secret import MASK, SecretHeaders, forget_locals, mask_exception, mask_secrets
from ._auth import AS_BUILT, HeaderAuth, secrets_of
from ._classify import ERROR_TYPES, mask_error, provider_error

if TYPE_CHECKING:
    from collections.abc import Iterator
    from contextlib import AbstractAsyncContextManager

    from .._models import JSONValue
    from .._secret import Secret

__all__ = [
    "CODEC_FAULTS",
    "DEFAULT_LIMITS",
    "HTTPX_ERRORS",
    "MAX_ERROR_BODY_BYTES",
    "MAX_ERROR_MESSAGE_CHARS",
    "ErrorDetails",
    "ErrorDetailsHook",
    "HttpStream",
    "HttpTransport",
    "codec_fault",
    "decode_reason",
    "masked_text",
    "preview",
    "default_error_details",
    "map_errors",
    "translate_error",
    "without_frames",
]

HTTPX_ERRORS = (httpx2.TransportError, httpx2.DecodingError, httpx2.StreamError)
"""The httpx2 exceptions :func:`translate_error` maps."""

DEFAULT_LIMITS = httpx2.Limits(max_connections=None, max_keepalive_connections=100)
"""The connection pool of clients kova creates: as many connections as requests in flight
(the provider actor's ``max_in_flight`` is the cap to set), 100 kept alive when idle. A pool
cap queued requests out of sight: 10,000 concurrent agent streams held only 1,000
connections (``bench/``, scenario g). The pool is :class:`kova.providers._pool.ConnectionPool`,
whose bookkeeping per request does not grow with the requests in flight."""

T = TypeVar("T")

CODEC_FAULTS = (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError)
"""What a codec raises when a payload has a shape it did not expect (the safety net);
``RecursionError``: a payload nested deeper than a recursive walk can follow."""


def codec_fault(provider: str, what: str, exc: Exception) -> InvalidResponse:
    """The kova error for a codec's stray ``exc`` on ``what`` (raise it ``from``
    :func:`~kova._secret.mask_exception` of ``exc``: its text may quote the payload)."""
    if isinstance(exc, RecursionError | JsonNestingError):
        return InvalidResponse(f"{what} is nested too deeply ({exc})", provider=provider)
    return InvalidResponse(
        f"{what} has an unexpected shape ({type(exc).__name__}: {exc})", provider=provider
    )


MAX_ERROR_BODY_BYTES = 64 * 1024
"""How much of an error response's body is read: what it says is at its start."""

MAX_ERROR_MESSAGE_CHARS = 2000
"""The most of a server's error message an error carries (the rest is cut, and counted)."""


def cap_message(text: str) -> str:
    """``text`` cut to :data:`MAX_ERROR_MESSAGE_CHARS`, saying how much was left out."""
    if len(text) <= MAX_ERROR_MESSAGE_CHARS:
        return text
    rest = len(text) - MAX_ERROR_MESSAGE_CHARS
    return f"{text[:MAX_ERROR_MESSAGE_CHARS]}... ({rest} more characters)"


def preview(data: bytes | str, secrets: Iterable[Secret], limit: int = 200) -> str:
    """The ``repr`` of the first ``limit`` characters of a server's ``data`` (bytes as bytes),
    every one of ``secrets`` masked before the cut: a cut made first could leave half a key
    that no longer matches it."""
    found = tuple(secrets)
    if isinstance(data, bytes):
        head = data[: limit + 4096]
        text = head.decode("latin-1")
        masked = mask_secrets(text, found) if found else text
        return repr(masked.encode("latin-1")[:limit] if masked is not text else head[:limit])
    masked = mask_secrets(data[: limit + 4096], found) if found else data
    return repr(masked[:limit])


def masked_text(text: str, secrets: Iterable[Secret], limit: int) -> str:
    """``text`` masked (see :func:`preview`), then cut to ``limit`` characters."""
    found = tuple(secrets)
    return (mask_secrets(text, found) if found else text)[:limit]


def decode_reason(exc: Exception) -> str:
    """Why a body was no JSON, without the body: a ``JSONDecodeError`` keeps the whole
    document (``doc``) and a ``UnicodeDecodeError`` the whole bytes (``object``), which an
    error tracker shows, so neither stays as a cause."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg}: line {exc.lineno} column {exc.colno} (char {exc.pos})"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8: {exc.reason} at byte {exc.start}"
    return type(exc).__name__


class ErrorDetails(Record):
    """What a provider's error body says."""

    message: str | None = None
    """Human-readable message (``error.message``)."""
    error_type: str | None = None
    """The provider's error type (``error.type``, or Gemini's ``error.status``)."""
    code: str | None = None
    """The provider's error code (``error.code``), e.g. OpenAI ``insufficient_quota``."""
    error_class: ProviderErrorClass | None = None
    """Override the status-based classification (e.g. a 429 that is a quota, not a rate)."""
    retry_after: float | None = None
    """A wait the body asks for (Google's ``RetryInfo.retryDelay``); headers win."""


ErrorDetailsHook = Callable[["JSONValue"], ErrorDetails]
"""Reads a parsed JSON error body; must not raise on unexpected shapes."""


def _opt_str(value: object) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def default_error_details(body: JSONValue) -> ErrorDetails:
    """Error details from the common shapes: ``{"error": {"message", "type"|"status", "code"}}``
    (OpenAI, Anthropic, Gemini), ``{"error": "text"}`` and ``{"message": "text"}``; any
    other body says nothing (an empty :class:`ErrorDetails`)."""
    if not isinstance(body, Mapping):
        return ErrorDetails()
    error = body.get("error")
    if isinstance(error, Mapping):
        return ErrorDetails(
            message=_opt_str(error.get("message")),
            error_type=_opt_str(error.get("type") or error.get("status")),
            code=_opt_str(error.get("code")),
        )
    if isinstance(error, str):
        return ErrorDetails(message=error, error_type=_opt_str(body.get("type")))
    message = body.get("message")
    if not isinstance(message, str):
        # No error here: an answer (Anthropic's {"type": "message", ...}, Ollama's
        # {"message": {...}}) that a proxy ignoring "stream" served to a streaming request.
        return ErrorDetails()
    return ErrorDetails(message=message or None, error_type=_opt_str(body.get("type")))


def _timeout_of(exc: httpx2.TimeoutException) -> float | None:
    try:
        timeouts = exc.request.extensions.get("timeout", {})
    except RuntimeError:  # the exception carries no request
        return None
    key = {
        httpx2.ConnectTimeout: "connect",
        httpx2.ReadTimeout: "read",
        httpx2.WriteTimeout: "write",
        httpx2.PoolTimeout: "pool",
    }.get(type(exc), "read")
    value = timeouts.get(key) if isinstance(timeouts, Mapping) else None
    return value if isinstance(value, int | float) else None


_SHOWN_HEADERS = frozenset(
    {
        "accept",
        "accept-encoding",
        "anthropic-version",
        "connection",
        "content-length",
        "content-type",
        "host",
        "transfer-encoding",
        "user-agent",
        "x-amz-content-sha256",
        "x-amz-date",
    }
)
"""Request headers shown on a failed request: protocol headers that never hold a credential.
Every other value is masked (auth headers, ``x-amz-security-token``, extra headers)."""


def _masked_request(request: httpx2.Request) -> httpx2.Request:
    headers = [
        (name, value if name.lower() in _SHOWN_HEADERS else MASK)
        for name, value in request.headers.multi_items()
    ]
    return httpx2.Request(
        request.method, request.url, headers=headers, extensions=request.extensions
    )


def without_frames(exc: Exception) -> Exception:
    """``exc`` (and each error it was raised from) without its traceback and with its
    request's credentials masked.

    The transport's frames (httpcore, h11) hold the request headers, credentials included, as
    local variables, and a traceback rendered with locals (rich, structlog's
    ``dict_tracebacks``, ``pytest -l``, Sentry) would print them; and httpx2 masks only
    ``Authorization`` in ``repr(exc.request.headers)``, not ``x-api-key``, ``api-key``,
    ``x-goog-api-key``, ``x-amz-security-token`` or a gateway key. Each error keeps its type
    and message; its ``request`` keeps method, URL and header names, with every value but
    the protocol headers' masked."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, httpx2.RequestError):
            try:
                request = current.request
            except RuntimeError:  # raised without a request
                pass
            else:
                current.request = _masked_request(request)
        current.with_traceback(None)
        current = current.__cause__ or current.__context__
    return exc


def translate_error(exc: Exception, provider: str, *, mid_stream: bool = False) -> KovaError:
    """The kova error for an httpx2 exception (see :func:`map_errors`)."""
    if isinstance(exc, httpx2.TimeoutException):
        timeout = _timeout_of(exc)
        after = f" after {timeout:g}s" if timeout is not None else ""
        return KovaTimeoutError(f"{provider}: {type(exc).__name__}{after}", timeout=timeout)
    if isinstance(exc, httpx2.StreamError):  # StreamClosed etc.: the response was closed
        return StreamError(f"{provider}: {exc}", error_type="stream_closed")
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx2.DecodingError):
        # The bytes arrived; they are not what their content-encoding says (garbage gzip).
        return ProviderError.invalid_response(
            f"the response body could not be decoded ({cap_message(detail)})", provider=provider
        )
    if mid_stream:
        return StreamError(
            f"{provider}: the connection was cut mid-stream ({detail})",
            error_type="connection_cut",
        )
    return KovaConnectionError(f"{provider}: connection failed ({detail})")


@contextmanager
def map_errors(provider: str, *, mid_stream: bool = False) -> Iterator[None]:
    """Translate httpx2 exceptions raised in the block into kova errors.

    Args:
        provider: label used in messages.
        mid_stream: the block reads a streamed body that has already started; a broken
            connection then raises :class:`~kova.StreamError` instead of
            :class:`~kova.KovaConnectionError`.
    """
    try:
        yield
    except HTTPX_ERRORS as exc:
        error = translate_error(exc, provider, mid_stream=mid_stream)
        raise error from without_frames(exc)


class _Decoded(AsyncIterator[bytes]):
    """A raw body through its content decoder: one decoded chunk per network read that
    produced output, then what the decoder flushes at the end."""

    __slots__ = ("_decoder", "_done", "_raw")

    def __init__(self, raw: AsyncIterator[bytes], decoder: httpx2_decoders.ContentDecoder) -> None:
        self._raw = raw
        self._decoder = decoder
        self._done = False

    async def __anext__(self) -> bytes:
        while not self._done:
            try:
                raw = await self._raw.__anext__()
            except StopAsyncIteration:
                self._done = True
                tail = b"".join(self._decoder.flush())
                if tail:
                    return tail
                break
            data = b"".join(self._decoder.decode(raw))
            if data:
                return data
        raise StopAsyncIteration


def _unsupported_encoding(response: httpx2.Response) -> str | None:
    """The first content-encoding of ``response`` that httpx2 cannot decode (``br`` and
    ``zstd`` without their optional packages, a made-up one), or ``None``. kova asks for
    what httpx2 decodes (its ``Accept-Encoding``); a server may send another anyway."""
    header = response.headers.get("content-encoding")
    if not header:
        return None
    for value in header.split(","):
        name = value.strip().lower()
        if name and name not in httpx2_decoders.SUPPORTED_DECODERS:
            return name
    return None


class _Undecodable(AsyncIterator[bytes]):
    """The body of a response in a content-encoding kova cannot decode: reading it fails
    with the error a garbage gzip body fails with (an ``InvalidResponse`` once mapped)."""

    __slots__ = ("_encoding", "_request")

    def __init__(self, encoding: str, request: httpx2.Request) -> None:
        self._encoding = encoding
        self._request = request

    async def __anext__(self) -> bytes:
        supported = ", ".join(name for name in httpx2_decoders.SUPPORTED_DECODERS)
        raise httpx2.DecodingError(
            f"content-encoding {self._encoding[:40]!r} is not one kova can decode ({supported})",
            request=self._request,
        )


class _Chunks(AsyncIterator[bytes]):
    """The body's byte chunks with errors mapped to kova errors.

    A plain class rather than an async generator, and built on ``aiter_bytes`` (which closes
    the chain below it) rather than ``aiter_text`` (which does not): :meth:`HttpStream.aclose`
    can then finalize everything deterministically. The error mapping is an inline
    ``try``, not :func:`map_errors`: a context manager per network read costs about 1 µs.
    """

    __slots__ = ("_iterator", "_provider")

    def __init__(self, iterator: AsyncIterator[bytes], provider: str) -> None:
        self._iterator = iterator
        self._provider = provider

    async def __anext__(self) -> bytes:
        try:
            return await self._iterator.__anext__()
        except HTTPX_ERRORS as exc:
            error = translate_error(exc, self._provider, mid_stream=True)
            raise error from without_frames(exc)


# A dict, never changed: httpx2 copies it into each request's Headers, and checks it is a
# Mapping first; a MappingProxyType (registered with the ABC directly) is never cached there
# and costs a Python-level __subclasshook__ call on every request.
_JSON_HEADERS: Final[Mapping[str, str]] = {"content-type": "application/json"}


class HttpStream:
    """A streaming response whose status was OK. Get it from :meth:`HttpTransport.stream`,
    which closes it when its block ends."""

    __slots__ = ("_generators", "_provider", "response")

    def __init__(self, *, response: httpx2.Response, provider: str) -> None:
        self.response = response
        """The response (status and headers are read; the body is not)."""
        self._provider = provider
        self._generators: list[AsyncGenerator[bytes]] = []

    def __repr__(self) -> str:
        return f"HttpStream(response={self.response!r}, provider={self._provider!r})"

    def _body(self) -> AsyncIterator[bytes]:
        # The raw body, decoded here rather than by ``aiter_bytes``: when a content encoding
        # fails to decode (garbage gzip), ``aiter_bytes`` closes the raw iterator while the
        # exception passes, before the response is closed, and that leaves httpcore2's own
        # body iterator to the garbage collector (trio warns). Decoding outside the generator
        # keeps the raw iterator open until :meth:`aclose` finishes it the normal way.
        unsupported = _unsupported_encoding(self.response)
        if unsupported is not None:
            # httpx2 passes a body it has no decoder for through as it came (compressed):
            # read as text, garbage br or zstd was "a stream that ended early". Say what it is.
            return _Undecodable(unsupported, self.response.request)
        if self.response.is_stream_consumed:
            # The body is already in memory (a transport such as httpx2.MockTransport that
            # answers with whole content): aiter_bytes serves it, decoded.
            body = self.response.aiter_bytes()
            self._generators.append(body)
            return body
        generator = self.response.aiter_raw()
        self._generators.append(generator)
        # Private in httpx2, and what its own aiter_bytes uses: the decoder chain for the
        # response's content-encoding (gzip, deflate, br, zstd; identity for none).
        decoder = self.response._get_content_decoder()
        if isinstance(decoder, httpx2_decoders.IdentityDecoder):
            return generator
        return _Decoded(generator, decoder)

    def raw_chunks(self) -> AsyncIterator[bytes]:
        """The body's byte chunks *unmapped* (httpx2 errors escape): for the HTTP provider's
        hot loop, which maps them inline. Finalized by :meth:`aclose`."""
        return self._body()

    async def read_prefix(self, limit: int) -> bytes:
        """At most the first ``limit`` bytes of the body, then stop reading (an error body:
        what it says is at its start). A body that fails to read or decode gives what was
        read before the failure: the status already says what happened."""
        parts: list[bytes] = []
        size = 0
        try:
            async for chunk in self.iter_bytes():
                parts.append(chunk)
                size += len(chunk)
                if size >= limit:
                    break
        except KovaError:
            pass
        return b"".join(parts)[:limit]

    async def read_capped(self, limit: int) -> bytes:
        """The whole body, failing with :class:`~kova.InvalidResponse` past ``limit`` bytes
        (a server that never ends a body must not grow memory without bound)."""
        parts: list[bytes] = []
        size = 0
        async for chunk in self.iter_bytes():
            size += len(chunk)
            if size > limit:
                raise ProviderError.invalid_response(
                    f"the response body exceeded {limit} bytes (max_response_bytes)",
                    provider=self._provider,
                )
            parts.append(chunk)
        return b"".join(parts)

    def iter_bytes(self) -> AsyncIterator[bytes]:
        """The body as bytes, one chunk per network read.

        The iterator raises :class:`~kova.StreamError` when the connection breaks before the
        body ends, and :class:`~kova.KovaTimeoutError` when no data arrives within the read
        timeout.
        """
        return _Chunks(self._body(), self._provider)

    async def aclose(self) -> None:
        """Close the response and finalize the body iterators (idempotent).

        httpx2's default transport wraps httpcore2's body iterator in an async generator
        that does not ``aclose`` it, so closing our iterator early would leave httpcore2's
        generator to the garbage collector (trio then warns). Instead the response is closed
        first and every started iterator is *drained*: on a closed connection each ends or
        fails at once, so the whole chain finishes the normal way.

        A body read to its end (a non-streaming call) has nothing left to do: httpx2 closed
        the response when the body ended, and the iterators are finished, so no shielded
        scope and deadline are set up (two cancel scopes a call).
        """
        # A native async generator's frame is None once it has finished.
        if self.response.is_closed and all(
            getattr(generator, "ag_frame", generator) is None for generator in self._generators
        ):
            self._generators.clear()
            return
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            await self.response.aclose()
            while self._generators:
                generator = self._generators.pop()
                try:
                    async for _ in generator:
                        pass
                except (httpx2.HTTPError, httpx2.StreamError):
                    pass  # the expected end of a closed connection


_StreamArgs = tuple[
    str, str, "JSONValue | None", "Mapping[str, str] | None", "Mapping[str, str] | None"
]


class _Streaming:
    """:meth:`HttpTransport.stream`'s context manager: a plain class rather than an
    ``asynccontextmanager`` generator. Thousands of streams wait for their response heads
    at once, and each would hold a generator, its frame and the wrapper's ``__dict__`` for
    the whole stream; this holds the stream. The request is built on entering and not kept."""

    __slots__ = ("_args", "_stream", "_transport")

    def __init__(
        self,
        transport: HttpTransport,
        method: str,
        path: str,
        json_body: JSONValue | None,
        params: Mapping[str, str] | None,
        headers: Mapping[str, str] | None,
    ) -> None:
        self._transport = transport
        self._args: _StreamArgs | None = (method, path, json_body, params, headers)
        self._stream: HttpStream | None = None

    async def __aenter__(self) -> HttpStream:
        transport = self._transport
        assert self._args is not None, "an HttpTransport.stream() is entered once"
        method, path, json_body, params, headers = self._args
        self._args = None
        client = transport._require_client()
        request = transport._build(
            method, path, json_body=json_body, params=params, headers=headers
        )
        del json_body
        response = await transport._send_for_head(client, request)
        del request
        try:
            if response.status_code >= 400:
                # Read and classified in a call of its own, so the raw body is in no frame
                # of the traceback.
                raise await transport._error_of(response, transport.secrets(headers))
        except BaseException:
            await _close_response(response)
            raise
        self._stream = stream = HttpStream(response=response, provider=transport.provider)
        return stream

    async def __aexit__(self, *exc_info: object) -> None:
        stream = self._stream
        assert stream is not None
        self._stream = None
        try:
            await stream.aclose()
        finally:
            await _close_response(stream.response)


async def _close_response(response: httpx2.Response) -> None:
    if response.is_closed:  # a body read to its end: httpx2 closed it (no scopes to set up)
        return
    with trio.CancelScope(shield=True), trio.move_on_after(5):
        await response.aclose()


_HTTPX_LOG: Final = logging.getLogger("httpx2")
"""httpx2's own logger: :meth:`HttpTransport._send` writes the line its ``send`` would."""

_LOOPBACK: Final = ("all://localhost", "all://127.0.0.1", "all://[::1]")
"""The hosts a proxy in the environment never carries requests to."""


def _environment_proxies() -> bool:
    """Whether the environment names an HTTP proxy, as httpx2 reads it (``urllib``'s
    ``getproxies``: ``http``, ``https`` and ``all``)."""
    proxies = urllib.request.getproxies()
    return any(proxies.get(scheme) for scheme in ("http", "https", "all"))


_MAX_CACHED_URLS: Final = 256
"""Parsed request URLs a transport keeps (one per path: a few per provider, more for
Gemini, whose paths name the model), and request heads (:class:`_Head`)."""


class _Head(Record):
    """The head of a provider's requests to one path: what every one of them sends but its
    Content-Length (see :meth:`HttpTransport._build`)."""

    headers: Mapping[str, str] | None
    """The codec's headers it was made with (held, so their ``id`` stays theirs)."""
    url: httpx2.URL
    before: tuple[tuple[bytes, bytes, bytes], ...]
    """httpx2's header entries before Content-Length, and after it (the auth header)."""
    after: tuple[tuple[bytes, bytes, bytes], ...]

    def request(self, method: str, content: bytes, extensions: dict[str, object]) -> httpx2.Request:
        """The request with this head and ``content``, made as httpx2 would (checked against
        its own the first time: see :meth:`HttpTransport._build`) without its public
        constructors, which build the headers one by one and look each up again to set
        Content-Length and the auth header (~30k instructions a request more)."""
        headers = httpx2.Headers()
        length = (b"Content-Length", b"content-length", b"%d" % len(content))
        headers._list = [*self.before, length, *self.after]
        request = httpx2.Request.__new__(httpx2.Request)
        request.method, request.url, request.headers = method, self.url, headers
        request.extensions = dict(extensions)
        request.stream = httpx2.ByteStream(content)
        request._content = content  # read, as content= is
        return request


class HttpTransport:
    """Owns the ``httpx2.AsyncClient`` of one provider instance while it is open.

    Args:
        provider: label for errors and logs (``"openai"``).
        base_url: prepended to every request path (``https://api.openai.com``).
        timeout: read (and write/pool) timeout in seconds.
        connect_timeout: connect timeout; defaults to ``timeout``.
        headers: sent with every request (do not put secrets in logs; kova never logs them).
        limits: the connection pool of the client kova creates; by default
            :data:`DEFAULT_LIMITS` (a connection per request in flight, 100 kept alive).
        client: a caller-owned client to use instead of creating one; kova never closes it.
        transport: an httpx2 transport for the client kova creates (``httpx2.MockTransport``
            in tests).
        error_details: reads the provider's JSON error body; defaults to
            :func:`default_error_details`.
        header_error_type: the error type an error response's headers name, for a
            provider that names it there (see :meth:`~kova.providers.Codec.header_error_type`).
    """

    __slots__ = (
        "_client",
        "_direct",
        "_error_details",
        "_extensions",
        "_header_error_type",
        "_heads",
        "_injected_client",
        "_opens",
        "_transport",
        "_urls",
        "auth",
        "base_url",
        "connect_timeout",
        "headers",
        "limits",
        "max_response_bytes",
        "provider",
        "timeout",
        "total_timeout",
    )

    def __init__(
        self,
        provider: str,
        base_url: str,
        timeout: float | None = 30.0,
        connect_timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
        limits: httpx2.Limits | None = None,
        client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        error_details: ErrorDetailsHook = default_error_details,
        auth: httpx2.Auth | None = None,
        total_timeout: float | None = 600.0,
        max_response_bytes: int = 64 * 1024 * 1024,
        header_error_type: Callable[[Mapping[str, str]], str | None] | None = None,
    ) -> None:
        if client is not None and transport is not None:
            raise ValueError("pass either client= or transport=, not both")
        for name, seconds in (
            ("timeout", timeout),
            ("connect_timeout", connect_timeout),
            ("total_timeout", total_timeout),
        ):
            check_seconds(name, seconds, optional=True)
        self.provider = provider
        self.base_url = base_url
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.headers: Mapping[str, str] = {} if headers is None else headers
        self.limits = DEFAULT_LIMITS if limits is None else limits
        self._injected_client = client
        self._transport = transport
        self._error_details = error_details
        self._header_error_type = header_error_type
        self.auth = auth
        """The auth flow applied to every request (see :mod:`kova.providers._auth`)."""
        self.total_timeout = total_timeout
        """Deadline for a whole non-streaming request, headers and body (trio's clock)."""
        self.max_response_bytes = max_response_bytes
        """Largest non-streaming body read before failing with :class:`~kova.InvalidResponse`."""
        self._client: httpx2.AsyncClient | None = None
        self._opens = 0
        # kova's own client's request pieces that never change (see _build).
        self._urls: dict[str, httpx2.URL] = {}
        self._extensions: dict[str, object] = {}
        self._heads: dict[object, _Head] = {}
        self._direct: httpx2.AsyncBaseTransport | None = None  # the client's one transport

    def __repr__(self) -> str:
        # headers and auth may carry credentials: never in a repr
        return (
            f"HttpTransport(provider={self.provider!r}, base_url={self.base_url!r}, "
            f"timeout={self.timeout!r}, connect_timeout={self.connect_timeout!r}, "
            f"limits={self.limits!r}, total_timeout={self.total_timeout!r}, "
            f"max_response_bytes={self.max_response_bytes!r})"
        )

    @asynccontextmanager
    async def open(self) -> AsyncIterator[None]:
        """Hold the client for the block. Nested or concurrent blocks share one client, which
        is closed (unless it was injected) when the last block leaves."""
        if self._opens == 0:
            self._client = self._injected_client or self._make_client()
        self._opens += 1
        try:
            yield
        finally:
            self._opens -= 1
            if self._opens == 0:
                client, self._client = self._client, None
                self._heads = {}  # they hold the auth header: not kept past the client
                if client is not None and client is not self._injected_client:
                    with trio.CancelScope(shield=True), trio.move_on_after(5):
                        await client.aclose()

    def _make_client(self) -> httpx2.AsyncClient:
        # httpcore2 loads with the first client, as it does under httpx2's own transport.
        from ._pool import pooled_transport

        connect = self.connect_timeout if self.connect_timeout is not None else self.timeout
        timeout = httpx2.Timeout(self.timeout, connect=connect)
        self._extensions = {"timeout": timeout.as_dict()}
        self._heads = {}
        transport = self._transport
        mounts: dict[str, httpx2.AsyncBaseTransport] | None = None
        self._direct = None
        if transport is None:
            pooled = pooled_transport(self.limits)
            if _environment_proxies():
                # httpx2 reads a proxy from the environment (HTTP_PROXY, HTTPS_PROXY,
                # ALL_PROXY, NO_PROXY) only for a client it makes the transports of: it makes
                # the proxy's and the direct one. A server on this machine (Ollama, a local
                # gateway, kova's demo) is reached directly all the same, on kova's pool.
                mounts = dict.fromkeys(_LOOPBACK, pooled)
            else:
                transport = self._direct = pooled
        else:
            self._direct = transport
        return httpx2.AsyncClient(
            timeout=timeout,
            limits=self.limits,
            transport=transport,
            mounts=mounts,
            headers=dict(self.headers),
        )

    def _require_client(self) -> httpx2.AsyncClient:
        if self._client is None:
            raise KovaError(
                f"the {self.provider} provider is not open: use `async with provider.open():` "
                "around calls, or run it through an agent, which opens it for you"
            )
        return self._client

    def url(self, path: str) -> str:
        """The absolute URL of ``path`` (which may already be absolute)."""
        if path.startswith(("http://", "https://")):
            return path
        return self.base_url.rstrip("/") + "/" + path.lstrip("/")

    def _build(
        self,
        method: str,
        path: str,
        *,
        json_body: JSONValue | None,
        params: Mapping[str, str] | None,
        headers: Mapping[str, str] | None,
    ) -> httpx2.Request:
        """The request (with a :class:`HeaderAuth`'s header: see :meth:`_send`)."""
        client = self._require_client()
        # Compact separators: the same bytes the official SDKs send, and fewer of them.
        # A lone surrogate (half an emoji the provider itself sent as "\ud83d") goes back
        # as the same JSON escape: UTF-8 cannot carry it.
        content = None if json_body is None else dumps_bytes(json_body)
        auth = self.auth
        signed = (auth.header, auth.secret, auth.prefix) if type(auth) is HeaderAuth else None
        # A provider's call: kova's own client, a JSON body, and the codec's headers, which
        # are the same immutable SecretHeaders every call (or none). Every such request of a
        # path has the same headers but its Content-Length, so the first one's are kept and
        # later ones are made from them (_Head.request). Byte for byte the request
        # build_request makes and the auth flow completes (tests/providers/
        # test_http_request_build.py), cookies aside: while the client holds one (a server
        # set it) every request is built the full way.
        key = None  # and a HeaderAuth's fields: another key (rotated in place), another head
        if (
            content is not None
            and params is None
            and not client.cookies
            and client is not self._injected_client
            and (headers is None or type(headers) is SecretHeaders)
        ):
            key = (method, path, id(headers), signed)
            head = self._heads.get(key)
            if head is not None and head.headers is headers:
                return head.request(method, content, self._extensions)
        request = self._request(client, method, path, content, params, headers)
        at = len(request.headers.raw) - 1  # Content-Length's entry, when it is the last
        if signed is not None:
            auth.async_auth_flow(request)  # type: ignore[union-attr]  # sets its header
        if key is not None and request.headers.raw[at][0] == b"Content-Length":
            self._keep_head(key, headers, request, at)
        return request

    def _keep_head(
        self, key: object, headers: Mapping[str, str] | None, request: httpx2.Request, at: int
    ) -> None:
        """Keep the head of ``request``, whose entry ``at`` is its Content-Length, if a
        request made from it is the same (else this httpx2 keeps requests another way)."""
        try:
            entries = request.headers._list
            before, after = tuple(entries[:at]), tuple(entries[at + 1 :])
            head = _Head(headers=headers, url=request.url, before=before, after=after)
            made = head.request(request.method, request.content, self._extensions)
            mine, theirs = (
                (r.method, r.url, r.headers.raw, r.content, r.extensions) for r in (made, request)
            )
        except AttributeError:
            return
        if mine == theirs:
            if len(self._heads) >= _MAX_CACHED_URLS:
                self._heads.clear()
            self._heads[key] = head

    def _request(
        self,
        client: httpx2.AsyncClient,
        method: str,
        path: str,
        content: bytes | None,
        params: Mapping[str, str] | None,
        headers: Mapping[str, str] | None,
    ) -> httpx2.Request:
        """The request ``build_request`` would make, without parsing the URL again."""
        request_headers: Mapping[str, str] | None = headers
        if content is not None:
            if not headers:
                request_headers = _JSON_HEADERS
            elif "content-type" not in headers:
                request_headers = {**headers, "content-type": "application/json"}
        # kova's own client has no base URL, query parameters or event hooks, and a timeout
        # fixed when it was made: the request build_request would make, without parsing the
        # same URL again for every request (build_request costs ~60 us a call, this ~25).
        # The client's headers and cookie jar are read as build_request reads them.
        urls = self._urls
        url = urls.get(path)
        if url is None:
            try:
                url = httpx2.URL(self.url(path))
            except (httpx2.InvalidURL, UnicodeError) as exc:
                # A path the caller's values made (a Gemini or Bedrock model name with half
                # an emoji in it): that request's error, not the provider's.
                raise InvalidRequest(
                    f"the request path {path!r} is not a valid URL: {exc}",
                    provider=self.provider,
                ) from None
            if len(urls) >= _MAX_CACHED_URLS:
                urls.clear()
            urls[path] = url
        if client is self._injected_client:
            return client.build_request(
                method, url, content=content, params=params, headers=request_headers
            )
        merged = client.headers.copy()
        if request_headers:
            merged.update(request_headers)
        return httpx2.Request(
            method,
            url,
            content=content,
            params=params,
            headers=merged,
            cookies=client.cookies,
            extensions=self._extensions,
        )

    async def request_json(
        self,
        method: str,
        path: str,
        *,
        json_body: JSONValue | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> JSONValue:
        """Send a request and return its parsed JSON body.

        Raises:
            ProviderError: an error status (classified), or a body that is not JSON
                (:class:`~kova.InvalidResponse`).
            KovaConnectionError, KovaTimeoutError: the transport failed.
            KovaError: the transport is not open.
        """
        client = self._require_client()
        request = self._build(method, path, json_body=json_body, params=params, headers=headers)
        # One cancel scope bounds both the time to the response head (``timeout``, see
        # _send_for_head) and the whole exchange (``total_timeout``): its deadline is the
        # nearer of the two until the head arrives, then the total's. (A cancel scope costs
        # about three times what moving its deadline does.)
        first = self.timeout + 0.001 if self.timeout is not None else math.inf
        total = self.total_timeout
        limit = total if total is not None else math.inf
        error: ProviderError | None = None
        response: httpx2.Response | None = None
        start = trio.current_time()
        with trio.CancelScope(deadline=start + min(first, limit)) as scope:
            try:
                response = await self._send(client, request)
            except HTTPX_ERRORS as exc:
                raise translate_error(exc, self.provider) from without_frames(exc)
            if first < limit:
                scope.deadline = start + limit
            if response.status_code >= 400:
                # Read and classified in a call of its own, so the raw body is in no frame
                # of the traceback.
                error = await self._error_of(response, self.secrets(headers))
            else:
                stream = HttpStream(response=response, provider=self.provider)
                try:
                    content = await stream.read_capped(self.max_response_bytes)
                finally:
                    await stream.aclose()
        if error is not None:
            raise error
        if scope.cancelled_caught:
            if response is None and first < limit:
                raise KovaTimeoutError(
                    f"{self.provider}: no response head within {first - 0.001:g}s (timeout)",
                    timeout=first - 0.001,
                )
            raise KovaTimeoutError(
                f"{self.provider}: no complete response within {limit:g}s (total_timeout)",
                timeout=total,
            )
        try:
            parsed: JSONValue = loads(content)
        except JsonNestingError:
            raise ProviderError.invalid_response(
                "the response body is JSON nested too deeply to read", provider=self.provider
            ) from None
        except ValueError as exc:
            assert response is not None  # the body was read
            secrets = self.secrets(headers)
            error = ProviderError.invalid_response(
                f"expected a JSON body ({decode_reason(exc)}), got "
                f"{self._describe_body(response, content, secrets)}",
                provider=self.provider,
            )
            del content
            # Not from exc, and exc (the context) without the whole body it holds
            # (JSONDecodeError.doc, UnicodeDecodeError.object).
            forget_locals(exc)
            raise mask_error(error, secrets) from None
        return parsed

    async def request_decoded(
        self,
        method: str,
        path: str,
        decode: Callable[[JSONValue], T],
        what: str,
        *,
        json_body: JSONValue | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> T:
        """:meth:`request_json`, then ``decode`` its body (``what`` names it in errors).

        A body ``decode`` cannot read is :class:`~kova.InvalidResponse`, unless it is an
        error the server reported with status 200 (a proxy does that): then it is that error,
        classified by its type. A stray ``ValueError``, ``KeyError``, ... from ``decode``
        becomes :class:`~kova.InvalidResponse` too. Every error leaves with the request's
        credentials masked wherever the server echoed them, and with no locals in the frames
        under this one (they hold the raw body): a traceback rendered with locals prints
        nothing the server sent. This frame holds no body either: the answer is never bound
        to a name here.

        Raises:
            The errors of :meth:`request_json`, and the two above.
        """
        try:
            return self._decoded(
                decode,
                await self.request_json(
                    method, path, json_body=json_body, params=params, headers=headers
                ),
                what,
                headers,
            )
        except KovaError as exc:
            mask_error(exc, self.secrets(headers))
            forget_locals(exc)
            raise

    def _decoded(
        self,
        decode: Callable[[JSONValue], T],
        body: JSONValue,
        what: str,
        headers: Mapping[str, str] | None,
    ) -> T:
        try:
            return decode(body)
        except CODEC_FAULTS as exc:
            secrets = self.secrets(headers)
            raise codec_fault(self.provider, what, exc) from mask_exception(exc, secrets)
        except InvalidResponse:
            reported = self.reported_error(body, None, self.secrets(headers))
            if reported is None:
                raise
        raise reported from None

    def reported_error(
        self, body: JSONValue, text: str | None, secrets: tuple[Secret, ...]
    ) -> ProviderError | None:
        """The error a JSON ``body`` sent with status 200 reports (``None`` when it reports
        none), classified by its type as an error event inside a stream is; its message is
        the body's, else ``text``, masked."""
        try:
            details = self._error_details(body)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        if not (details.message or details.error_type or details.code):
            return None
        kinds = (details.code, details.error_type)
        known = next((kind for kind in kinds if kind in ERROR_TYPES), None)
        message = details.message or text or f"{details.error_type or details.code}"
        return provider_error(
            # Masked before it is cut: a cut could leave half a key unmatched.
            cap_message(mask_secrets(message, secrets)),
            provider=self.provider,
            error_type=known or details.error_type or details.code,
            error_class=details.error_class,
            retry_after=details.retry_after,
            secrets=secrets,
            code=details.code,
        )

    def secrets(self, headers: Mapping[str, str] | None = None) -> tuple[Secret, ...]:
        """The credentials a request carries: the auth flow's, and the values of ``headers``
        that are secret (a :class:`~kova.SecretHeaders`; a plain mapping holds none)."""
        found = secrets_of(self.auth)
        if isinstance(headers, SecretHeaders):
            found += headers.secrets()
        return found

    @staticmethod
    def _describe_body(
        response: httpx2.Response, content: bytes, secrets: tuple[Secret, ...]
    ) -> str:
        content_type = response.headers.get("content-type") or "no content type"
        return f"{masked_text(content_type, secrets, 200)}: {preview(content, secrets)}"

    def stream(
        self,
        method: str,
        path: str,
        *,
        json_body: JSONValue | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> AbstractAsyncContextManager[HttpStream]:
        """Send a request and yield its streaming body once the status is known to be OK.

        Errors before the body starts raise when the block is entered (as
        :meth:`request_json`); errors while reading raise from the :class:`HttpStream`
        iterators. Leaving the block closes the response (and its connection, if unread).
        """
        return _Streaming(self, method, path, json_body, params, headers)

    async def _error_of(
        self, response: httpx2.Response, secrets: tuple[Secret, ...]
    ) -> ProviderError:
        error_stream = HttpStream(response=response, provider=self.provider)
        body = b""
        try:
            with trio.move_on_after(self.timeout if self.timeout is not None else math.inf):
                body = await error_stream.read_prefix(MAX_ERROR_BODY_BYTES)
        finally:
            await error_stream.aclose()
        return self.status_error(response.status_code, response.headers, body, secrets=secrets)

    async def _send_for_head(
        self, client: httpx2.AsyncClient, request: httpx2.Request
    ) -> httpx2.Response:
        """Send ``request`` and return once its response head has arrived.

        The read timeout is per network read, so headers trickled a line at a time would
        never trip it: the time to the head is bounded as a whole, by ``timeout``.
        """
        first = self.timeout if self.timeout is not None else math.inf
        # A millisecond past the read timeout: a silent server trips httpx2's read timeout
        # first (its error, the cause, names the phase); this deadline catches the trickle.
        with trio.move_on_after(first + 0.001), map_errors(self.provider):
            return await self._send(client, request)
        # Only reached when the deadline cancelled the send.
        raise KovaTimeoutError(
            f"{self.provider}: no response head within {first:g}s (timeout)", timeout=first
        )

    async def _send(self, client: httpx2.AsyncClient, request: httpx2.Request) -> httpx2.Response:
        """``client.send(request, stream=True, auth=self.auth)``, a :class:`HeaderAuth`'s
        header already set by :meth:`_build` (so sent as it is: :data:`AS_BUILT`). On kova's
        own client, with its one transport and no auth flow to run (that, or none and no
        user:password in the URL), only what send would do around that transport (~90k
        instructions a request fewer): there are no redirects to follow, event hooks or
        timeouts to set. httpx2's log line is kept; ``response.elapsed`` is not measured."""
        auth = AS_BUILT if type(self.auth) is HeaderAuth else self.auth
        direct = self._direct
        if direct is None or not (auth is AS_BUILT or (auth is None and not request.url.userinfo)):
            return await client.send(request, stream=True, auth=auth)
        try:
            response = await direct.handle_async_request(request)
        except httpx2.RequestError as exc:
            exc.request = request  # as send's request_context does
            raise
        response.request = request
        client.cookies.extract_cookies(response)
        if _HTTPX_LOG.isEnabledFor(logging.INFO):
            _HTTPX_LOG.info(
                'HTTP Request: %s %s "%s %d %s"',
                request.method,
                request.url,
                response.http_version,
                response.status_code,
                response.reason_phrase,
            )
        return response

    def status_error(
        self,
        status_code: int,
        headers: Mapping[str, str],
        body: bytes,
        *,
        secrets: tuple[Secret, ...] | None = None,
    ) -> ProviderError:
        """The kova error for an HTTP error status, its headers and body, classified by the
        one classifier (:mod:`kova.providers._classify`). Every one of ``secrets`` (by
        default the auth flow's) is masked wherever the server echoed it: message, error
        type or code."""
        found = secrets_of(self.auth) if secrets is None else secrets
        retry_after = parse_retry_after(headers.get("retry-after"), headers.get("retry-after-ms"))
        details = ErrorDetails()
        try:
            parsed: JSONValue = loads(body) if body else None
        except ValueError:
            parsed = None
        if parsed is not None:
            try:
                details = self._error_details(parsed)
            except (ValueError, TypeError, KeyError, AttributeError):
                details = ErrorDetails()
        message = details.message
        if not message:
            text = body.decode("utf-8", "replace").strip()
            # Masked before it is cut, as everything below: a cut could leave half a key.
            message = masked_text(text, found, 500) if text else f"HTTP {status_code}"
        error_type = details.error_type or details.code
        if error_type is not None:
            error_type = masked_text(error_type, found, 200)
        if error_type is None and self._header_error_type is not None:
            error_type = self._header_error_type(headers)
        return provider_error(
            # Masked before it is cut: a cut could leave half a key that no longer matches.
            cap_message(mask_secrets(message, found)),
            provider=self.provider,
            status_code=status_code,
            error_type=error_type,
            error_class=details.error_class,
            retry_after=retry_after if retry_after is not None else details.retry_after,
            secrets=found,
            code=details.code,
        )
