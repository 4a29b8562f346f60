"""The embedding protocol every embedding provider satisfies (OpenAI, Ollama, Gemini)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable
    from contextlib import AbstractAsyncContextManager

    from .._models import Usage

__all__ = ["EmbeddingProvider", "Embeddings", "check_texts", "embed_in_batches"]


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


async def embed_in_batches(
    texts: Sequence[str],
    batch_size: int,
    send: Callable[[list[str]], Awaitable[tuple[list[list[float]], Usage | None]]],
) -> Embeddings:
    """``texts`` sent ``batch_size`` at a time, one request after another (``send`` makes
    one and returns its vectors and usage), reassembled in input order with the usage summed.

    Raises:
        TypeError: ``texts`` is a single string, not a sequence, or holds a non-string.
    """
    texts = check_texts(texts)
    vectors: list[list[float]] = []
    usage: Usage | None = None
    for start in range(0, len(texts), batch_size):
        batch_vectors, batch_usage = await send(list(texts[start : start + batch_size]))
        vectors.extend(batch_vectors)
        if batch_usage is not None:
            usage = batch_usage if usage is None else usage + batch_usage
    return Embeddings(vectors, usage=usage)
