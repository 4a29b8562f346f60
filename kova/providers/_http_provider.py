"""The one HTTP provider: runs any :class:`~kova.providers.Codec` over the shared transport.

Adding a provider adds no I/O code: it is a config, a codec and (usually) an auth flow::

    provider = HttpProvider(
        MyCodec(model="m-1"),
        base_url="https://api.example.com",
        auth=bearer_auth(Secret(key)),
    )
    async with provider.open():
        response = await provider.chat_completion(ChatRequest.of("hello"))

What it does around the codec, the same for every provider:

* sends the codec's :class:`~kova.providers.WireRequest` through the transport (the auth flow
  sets the credential; errors become kova errors at that one boundary);
* non-streaming: a total deadline and a body-size cap (``total_timeout``,
  ``max_response_bytes``), then :meth:`Codec.decode`;
* streaming: checks the content type before decoding a byte (a captive portal's ``text/html``
  or a JSON body where a stream was asked for is an :class:`~kova.InvalidResponse` naming
  what came back), frames each network read with the codec's framer and decodes it into one
  batch; an idle timeout between events and an optional total deadline, both on trio's clock;
* the error contract: a decoder's ``error`` is raised after the events decoded before it, as
  a classified error marked mid-stream and with whether content had reached the consumer; a
  stray ``TypeError``/``KeyError``/... from a codec becomes :class:`~kova.InvalidResponse`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Generic, TypeVar

import trio

from .._errors import (
    InvalidResponse,
    KovaError,
    KovaTimeoutError,
    ProviderError,
    check_seconds,
)
from .._json import loads
from .._models import ModelInfo, UsageEvent
from .._secret import forget_locals, mask_exception
from ._classify import mask_error
from ._codec import heuristic_tokens
from ._http import (
    CODEC_FAULTS,
    DEFAULT_LIMITS,
    HTTPX_ERRORS,
    HttpTransport,
    codec_fault,
    masked_text,
    preview,
    translate_error,
    without_frames,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType

    import httpx2

    from .._models import ChatRequest, JSONValue, ModelResponse, StreamEvent
    from .._secret import Secret
    from ._base import EventBatches
    from ._codec import Codec, StreamDecoder, WireRequest
    from ._framing import Framer
    from ._http import HttpStream

__all__ = ["EventStream", "HttpProvider"]

FrameT = TypeVar("FrameT")
T = TypeVar("T")

_MAX_MODEL_PAGES = 1000


class EventStream(Generic[FrameT]):
    """The batches of one streamed response: one batch per network read that completed events.

    A plain class with one ``__anext__`` (no async generator, no stacked iterators): this is
    the hot path of every streaming provider. Per read it costs the framer, the decoder and
    one clock read, nothing else.

    The idle timeout and the total deadline are checked against trio's clock at every read
    rather than with a cancel scope per read (entering a scope measured ~3-14 us, as much as
    decoding the event): a stream that sends bytes but no events (pings) fails at the first
    read past its deadline, and a silent one at the transport's read timeout, which is the
    same length as the idle timeout.
    """

    __slots__ = (
        "_chunks",
        "_content",
        "_deadline",
        "_decoder",
        "_ended",
        "_framer",
        "_idle",
        "_limit",
        "_now",
        "_pending",
        "_provider",
        "_secrets",
        "_timed",
    )

    def __init__(
        self,
        chunks: AsyncIterator[bytes],
        framer: Framer[FrameT],
        decoder: StreamDecoder[FrameT],
        *,
        provider: str,
        idle_timeout: float | None,
        total_timeout: float | None,
        secrets: tuple[Secret, ...] = (),
    ) -> None:
        self._chunks = chunks
        self._secrets = secrets
        """Credentials the request carried, masked in the errors this stream raises."""
        self._framer = framer
        self._decoder = decoder
        self._provider = provider
        self._idle = idle_timeout if idle_timeout is not None else math.inf
        self._timed = idle_timeout is not None or total_timeout is not None
        # The run's clock, read directly: trio.current_time() goes through two more calls
        # (the run context, the runner) to reach it, at every network read.
        now = 0.0
        if self._timed:
            self._now = trio.lowlevel.current_clock().current_time
            now = self._now()
        self._deadline = now + total_timeout if total_timeout is not None else math.inf
        self._limit = min(now + self._idle, self._deadline)
        """The time by which the next event must arrive."""
        self._pending: KovaError | None = None
        self._ended = False
        self._content = False

    @property
    def content_delivered(self) -> bool:
        """Whether a batch with content (anything but usage) has been returned."""
        return self._content

    def __aiter__(self) -> EventStream[FrameT]:
        return self

    async def __anext__(self) -> Sequence[StreamEvent]:
        if self._pending is not None:
            error, self._pending = self._pending, None
            raise error
        if self._ended:
            raise StopAsyncIteration
        while True:
            try:
                data = await self._chunks.__anext__()
            except StopAsyncIteration:
                self._ended = True
                return self._finish()
            except HTTPX_ERRORS as exc:
                self._ended = True
                error = translate_error(exc, self._provider, mid_stream=True)
                raise error from without_frames(exc)
            try:
                frames = self._framer.feed(data)
                events = self._decoder.feed(frames) if frames else None
            except KovaError as exc:
                self._ended = True
                # The raw read stays out of tracebacks rendered with locals: this frame's
                # and the decoder's (cleared by _mark).
                del data
                frames = []
                raise self._mark(exc) from None
            except CODEC_FAULTS as exc:
                self._ended = True
                del data
                frames = []
                fault = codec_fault(self._provider, "a stream frame", exc)
                raise self._mark(fault) from mask_exception(exc, self._secrets)
            if self._decoder.error is not None:
                self._ended = True
                # The error event's raw bytes (a key a server echoed) leave this frame before
                # the error is raised: a traceback rendered with locals prints them.
                del data, frames
                return self._deliver_then_fail(events, self._decoder.error)
            if self._timed:
                now = self._now()
                if now >= self._limit:
                    self._ended = True
                    raise self._timeout()
                if events:
                    limit = now + self._idle
                    self._limit = limit if limit < self._deadline else self._deadline
            if events:
                if not self._content:
                    self._note_content(events)
                return events

    def _finish(self) -> Sequence[StreamEvent]:
        try:
            frames = self._framer.finish()
            events = self._decoder.feed(frames) if frames else []
            if self._decoder.error is None:
                events.extend(self._decoder.finish())
        except KovaError as exc:
            raise self._mark(exc) from None
        except CODEC_FAULTS as exc:
            fault = codec_fault(self._provider, "the end of the stream", exc)
            raise self._mark(fault) from mask_exception(exc, self._secrets)
        if self._decoder.error is not None:
            del frames
            return self._deliver_then_fail(events, self._decoder.error)
        if not events:
            raise StopAsyncIteration
        return events

    def _deliver_then_fail(
        self, events: list[StreamEvent] | None, error: KovaError
    ) -> Sequence[StreamEvent]:
        if events:
            self._note_content(events)
            self._pending = self._mark(error)
            return events
        raise self._mark(error)

    def _note_content(self, events: Sequence[StreamEvent]) -> None:
        if not self._content:
            self._content = any(type(event) is not UsageEvent for event in events)

    def _mark(self, error: KovaError) -> KovaError:
        """``error`` marked mid-stream, masked, and without the locals of the decoder's
        frames it was raised in (they hold the frames read)."""
        forget_locals(error)
        if isinstance(error, ProviderError):
            error.mid_stream = True
            if self._content:
                error.after_content = True
            if error.provider is None:
                error.provider = self._provider
        return mask_error(error, self._secrets)

    def _timeout(self) -> KovaTimeoutError:
        if self._limit >= self._deadline:
            return KovaTimeoutError(
                f"{self._provider}: the stream did not finish within its total deadline",
                timeout=None,
            )
        return KovaTimeoutError(
            f"{self._provider}: no stream event for {self._idle:g}s (idle timeout)",
            timeout=self._idle,
        )


class HttpProvider(Generic[FrameT]):
    """A :class:`~kova.providers.Provider` for any codec, over one shared HTTP transport.

    Args:
        codec: the provider's wire format.
        base_url: scheme, host and optional prefix the codec's paths are appended to.
        auth: the ``httpx2.Auth`` flow that sets credentials (``None``: no credentials).
        timeout: read timeout, time to the response head of a stream, and the idle timeout
            between stream events, in seconds.
        connect_timeout: connect timeout (defaults to ``timeout``).
        total_timeout: deadline for a whole non-streaming request.
        stream_timeout: optional deadline for a whole stream (``None``: only idle-bounded).
        max_response_bytes: the largest non-streaming body read.
        client: a caller-owned ``httpx2.AsyncClient`` (kova never closes it).
        transport: an httpx2 transport for the client kova creates (tests).

    Use it inside ``async with provider.open():`` (an agent does this for you). Calls are safe
    from many tasks at once; on cancellation the HTTP request is abandoned and its connection
    closed.
    """

    def __init__(
        self,
        codec: Codec[FrameT],
        *,
        base_url: str,
        auth: httpx2.Auth | None = None,
        timeout: float | None = 60.0,
        connect_timeout: float | None = None,
        total_timeout: float | None = 600.0,
        stream_timeout: float | None = None,
        max_response_bytes: int = 64 * 1024 * 1024,
        limits: httpx2.Limits | None = None,
        client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        check_seconds("stream_timeout", stream_timeout, optional=True)
        self.codec = codec
        self._stream_timeout = stream_timeout
        self._http = HttpTransport(
            provider=codec.name,
            base_url=base_url,
            timeout=timeout,
            connect_timeout=connect_timeout,
            limits=limits or DEFAULT_LIMITS,
            client=client,
            transport=transport,
            error_details=codec.error_details,
            header_error_type=codec.header_error_type,
            auth=auth,
            total_timeout=total_timeout,
            max_response_bytes=max_response_bytes,
        )

    def __repr__(self) -> str:
        config = getattr(self, "config", None)
        if config is not None:  # a vendor's provider, made from its config: the config says it
            return f"{type(self).__name__}({config!r})"
        return f"{type(self).__name__}(codec={self.codec!r}, base_url={self._http.base_url!r})"

    @property
    def name(self) -> str:
        """The codec's provider label."""
        return self.codec.name

    @property
    def transport(self) -> HttpTransport:
        """The shared HTTP transport (its pool lives between ``open()`` and its exit)."""
        return self._http

    def open(self) -> AbstractAsyncContextManager[None]:
        """Hold the HTTP connection pool for the block (reference-counted)."""
        return self._http.open()

    async def _exchange(self, wire: WireRequest, decode: Callable[[JSONValue], T], what: str) -> T:
        """Send ``wire`` and decode its JSON answer with ``decode`` (see
        :meth:`HttpTransport.request_decoded`: errors leave masked, without locals)."""
        return await self._http.request_decoded(
            wire.method,
            wire.path,
            decode,
            what,
            json_body=wire.body,
            params=wire.query or None,
            headers=wire.headers or None,
        )

    async def chat_completion(self, request: ChatRequest) -> ModelResponse:
        """One non-streaming call.

        Raises:
            ProviderError: an error status (classified) or an unreadable answer
                (:class:`~kova.InvalidResponse`).
            KovaConnectionError, KovaTimeoutError: the transport failed, or the response did
                not complete within ``total_timeout``.
        """
        wire = self.codec.encode(request, stream=False)
        # _exchange, inlined: one coroutine frame fewer for every await of the call.
        return await self._http.request_decoded(
            wire.method,
            wire.path,
            self.codec.decode,
            "the response",
            json_body=wire.body,
            params=wire.query or None,
            headers=wire.headers or None,
        )

    def chat_completion_stream(
        self, request: ChatRequest
    ) -> AbstractAsyncContextManager[EventBatches]:
        """One streaming call: ``async with provider.chat_completion_stream(request) as b``.

        Error statuses and a body that is not a stream raise on entering. The iterator raises
        the classified error of an error event (after the events that came before it), a
        :class:`~kova.StreamError` for a cut or unfinished stream, and
        :class:`~kova.KovaTimeoutError` when no event arrives within the idle timeout.
        Leaving the block early closes the response.
        """
        return _OpenedStream(self, request)

    async def _check_content_type(
        self, http_stream: HttpStream, secrets: tuple[Secret, ...]
    ) -> None:
        content_type = http_stream.response.headers.get("content-type", "")
        media_type = content_type.split(";", 1)[0].strip().lower()
        if any(media_type == wanted for wanted in self.codec.stream_content_types):
            return
        # Built in a call of its own, so the body read is in no frame of the traceback.
        raise mask_error(await self._not_a_stream(http_stream, media_type, secrets), secrets)

    async def _not_a_stream(
        self, http_stream: HttpStream, media_type: str, secrets: tuple[Secret, ...]
    ) -> KovaError:
        head = b""
        with trio.move_on_after(self._http.timeout or math.inf):
            head = await http_stream.read_capped(64 * 1024)
        if media_type == "application/json":
            try:
                parsed: JSONValue = loads(head)
            except ValueError:
                parsed = None
            # A proxy or server that reports an error as a 200 JSON body: classified by its
            # type, as an error event inside a stream is.
            # Masked before it is cut, as the previews below: a cut could leave half a key.
            text = masked_text(head.decode("utf-8", "replace"), secrets, 500)
            reported = None if parsed is None else self._http.reported_error(parsed, text, secrets)
            if reported is not None:
                return reported
            return InvalidResponse(
                f"expected a stream ({', '.join(self.codec.stream_content_types)}), got a JSON "
                f"body: {preview(head, secrets)}",
                provider=self.name,
            )
        return InvalidResponse(
            f"expected a stream ({', '.join(self.codec.stream_content_types)}), got "
            f"{masked_text(media_type, secrets, 200) or 'no content type'}: "
            f"{preview(head, secrets)}",
            provider=self.name,
        )

    async def count_tokens(self, request: ChatRequest) -> int:
        """Prompt tokens: the provider's exact counting endpoint where its codec has one,
        else the offline heuristic.

        Raises:
            ProviderError, KovaConnectionError, KovaTimeoutError: as :meth:`chat_completion`.
        """
        wire = self.codec.encode_count_tokens(request)
        if wire is None:
            return heuristic_tokens(request)
        return await self._exchange(wire, self.codec.decode_count_tokens, "the token count")

    async def list_models(self) -> list[ModelInfo]:
        """Every model the provider lists, following its pages.

        Raises:
            ProviderError, KovaConnectionError, KovaTimeoutError: as :meth:`chat_completion`.
            KovaError: the provider cannot list models, or its pages loop.
        """
        models: list[ModelInfo] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(_MAX_MODEL_PAGES):
            wire = self.codec.encode_list_models(cursor)
            if wire is None:
                raise KovaError(f"{self.name}: this provider cannot list models")
            page = await self._exchange(wire, self.codec.decode_list_models, "the model list")
            models.extend(page.models)
            cursor = page.next_cursor
            if cursor is None:
                return models
            if cursor in seen:
                raise KovaError(f"{self.name}: the model list's pages loop at {cursor!r}")
            seen.add(cursor)
        raise KovaError(f"{self.name}: the model list has more than {_MAX_MODEL_PAGES} pages")


class _OpenedStream(Generic[FrameT]):
    """:meth:`HttpProvider.chat_completion_stream`'s context manager: the request sent, its
    content type checked, then the :class:`EventStream` of its body. A plain class rather
    than an ``asynccontextmanager`` generator: thousands of streams wait for their heads at
    once, and a generator would keep its frame (the encoded request and its JSON body among
    its locals) for the whole stream."""

    __slots__ = ("_opened", "_provider", "_request")

    def __init__(self, provider: HttpProvider[FrameT], request: ChatRequest) -> None:
        self._provider = provider
        self._request: ChatRequest | None = request
        self._opened: AbstractAsyncContextManager[HttpStream] | None = None

    async def __aenter__(self) -> EventStream[FrameT]:
        provider = self._provider
        request = self._request
        assert request is not None, "a chat_completion_stream() is entered once"
        self._request = None
        wire = provider.codec.encode(request, stream=True)
        http = provider._http
        secrets = http.secrets(wire.headers)
        opened = http.stream(
            wire.method,
            wire.path,
            json_body=wire.body,
            params=wire.query or None,
            headers=wire.headers or None,
        )
        del wire
        http_stream = await opened.__aenter__()
        try:
            await provider._check_content_type(http_stream, secrets)
        except BaseException as exc:
            await opened.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        self._opened = opened
        return EventStream(
            http_stream.raw_chunks(),
            provider.codec.framer(),
            provider.codec.stream_decoder(),
            provider=provider.name,
            idle_timeout=http.timeout,
            total_timeout=provider._stream_timeout,
            secrets=secrets,
        )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        opened = self._opened
        assert opened is not None
        self._opened = None
        await opened.__aexit__(exc_type, exc, traceback)
