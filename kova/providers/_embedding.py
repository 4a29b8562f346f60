"""The embedding protocol every embedding provider satisfies (OpenAI, Ollama, Gemini)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from .._errors import InvalidResponse

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable
    from contextlib import AbstractAsyncContextManager

    from .._models import Usage
    from ._http import HttpTransport

__all__ = [
    "EmbeddingProvider",
    "Embeddings",
    "HttpEmbeddings",
    "check_texts",
    "embed_in_batches",
    "finite_vector",
    "same_dimensions",
]


class Embeddings(list[list[float]]):
    """The vectors of one :meth:`EmbeddingProvider.embed` call, in input order, and the usage
    the API reported (``None`` where it reports none).

    A ``list`` of vectors, so ``vectors[0]``, ``len(vectors)`` and comparing with a plain list
    work as before; :attr:`usage` rides along.
    """

    usage: Usage | None

    def __init__(self, vectors: Iterable[list[float]] = (), *, usage: Usage | None = None) -> None:
        super().__init__(vectors)
        self.usage = usage

    def __repr__(self) -> str:
        return f"Embeddings({len(self)} vectors, usage={self.usage!r})"


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Turns texts into vectors.

    Use inside ``async with provider.open():``; ``embed`` is safe from many tasks at once.
    """

    @property
    def name(self) -> str:
        """A short label for logs and metrics (``"openai"``)."""
        ...

    @property
    def dimensions(self) -> int | None:
        """The configured vector size (``None``: the model's native size)."""
        ...

    def open(self) -> AbstractAsyncContextManager[None]:
        """Hold the HTTP connection pool for the block (reference-counted)."""
        ...

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        """One vector per text, in input order (batched as the API requires), with usage.

        Raises:
            TypeError: ``texts`` is a single string, not a sequence, or holds a non-string.
            ProviderError, KovaConnectionError, KovaTimeoutError: the request failed.
        """
        ...


class HttpEmbeddings:
    """What the HTTP embedding providers (OpenAI, Ollama, Gemini) share: a config and an
    HTTP transport, which :attr:`name`, :attr:`dimensions` and :meth:`open` read."""

    __slots__ = ("_http", "config")

    PROVIDER: ClassVar[str]
    config: Any  # each provider's own config class (the provider names it)
    _http: HttpTransport

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"

    @property
    def name(self) -> str:
        """The provider's label: ``"openai"``, ``"ollama"`` or ``"gemini"``."""
        return self.PROVIDER

    @property
    def dimensions(self) -> int | None:
        """The configured vector size (``None``: the model's native size)."""
        dimensions: int | None = self.config.dimensions
        return dimensions

    def open(self) -> AbstractAsyncContextManager[None]:
        """Hold the HTTP connection pool for the block (reference-counted)."""
        return self._http.open()


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, checked before anything is sent.

    Raises:
        TypeError: ``texts`` is a single string, not a sequence, or holds a non-string.
    """
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of strings, not one string")
    if not isinstance(texts, Sequence):
        raise TypeError(f"embed() takes a sequence of strings, got {type(texts).__name__}")
    checked = list(texts)
    for position, text in enumerate(checked):
        if not isinstance(text, str):
            raise TypeError(f"embed() takes strings; item {position} is a {type(text).__name__}")
    return checked


def finite_vector(values: object, *, provider: str) -> list[float]:
    """``values`` (a decoded JSON list, or a base64 answer's floats) as one embedding: a
    non-empty list of finite floats.

    Raises:
        InvalidResponse: not a list of numbers, empty, a number too large for a float (JSON
            has no limit: a 400-digit integer), or NaN or infinity (Python's JSON reader
            takes ``NaN`` and ``1e999``; float32 bits can hold them).
    """
    if not isinstance(values, list):
        raise InvalidResponse("an embedding is not a list of numbers", provider=provider)
    if not values:
        raise InvalidResponse("an embedding is empty", provider=provider)
    if not all(type(x) is float for x in values):  # the usual answer: floats only
        if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in values):
            raise InvalidResponse("an embedding is not a list of numbers", provider=provider)
        try:
            values = [float(x) for x in values]
        except OverflowError:
            raise InvalidResponse(
                "an embedding holds a number too large for a float", provider=provider
            ) from None
    vector: list[float] = values  # floats only, checked above
    # One sum in C says the usual case; NaN and infinity survive it (a huge but finite sum
    # overflowing is then told apart, value by value).
    if not math.isfinite(sum(vector)) and not all(map(math.isfinite, vector)):
        raise InvalidResponse(
            "an embedding holds a value that is not a finite number (NaN or infinity)",
            provider=provider,
        )
    return vector


def same_dimensions(vectors: Sequence[list[float]], *, provider: str) -> None:
    """Check that all ``vectors`` of one call have one length (a vector index is useless
    with another).

    Raises:
        InvalidResponse: two vectors of different lengths.
    """
    if vectors:
        size = len(vectors[0])
        for position, vector in enumerate(vectors):
            if len(vector) != size:
                raise InvalidResponse(
                    f"the embeddings have different dimensions ({size} for the first, "
                    f"{len(vector)} for item {position})",
                    provider=provider,
                )


async def embed_in_batches(
    texts: Sequence[str],
    batch_size: int,
    send: Callable[[list[str]], Awaitable[tuple[list[list[float]], Usage | None]]],
    *,
    provider: str = "",
) -> Embeddings:
    """``texts`` sent ``batch_size`` at a time, one request after another (``send`` makes
    one and returns its vectors and usage), reassembled in input order with the usage summed.

    Raises:
        TypeError: ``texts`` is a single string, not a sequence, or holds a non-string.
        InvalidResponse: the batches' vectors have different dimensions.
    """
    texts = check_texts(texts)
    vectors: list[list[float]] = []
    usage: Usage | None = None
    for start in range(0, len(texts), batch_size):
        batch_vectors, batch_usage = await send(list(texts[start : start + batch_size]))
        vectors.extend(batch_vectors)
        if batch_usage is not None:
            usage = batch_usage if usage is None else usage + batch_usage
    same_dimensions(vectors, provider=provider)
    return Embeddings(vectors, usage=usage)
