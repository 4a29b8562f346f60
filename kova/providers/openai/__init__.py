"""OpenAI Chat Completions and compatible servers (Azure, vLLM, Ollama ``/v1``, DeepSeek, ...),
and OpenAI embeddings."""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._client import OpenAiCompatibleProvider as OpenAiCompatibleProvider
from ._config import OpenAiConfig as OpenAiConfig
from ._config import OpenAiEmbeddingConfig as OpenAiEmbeddingConfig
from ._stream import OpenAiStreamDecoder as OpenAiStreamDecoder

if _TYPE_CHECKING:
    from ._embeddings import OpenAiEmbeddingProvider as OpenAiEmbeddingProvider

__all__ = [
    "OpenAiCompatibleProvider",
    "OpenAiConfig",
    "OpenAiEmbeddingConfig",
    "OpenAiEmbeddingProvider",
    "OpenAiStreamDecoder",
]


def __getattr__(name: str) -> object:
    # The embeddings provider loads on first use: a chat program does not pay for it.
    if name != "OpenAiEmbeddingProvider":
        raise AttributeError(f"module 'kova.providers.openai' has no attribute {name!r}")
    from ._embeddings import OpenAiEmbeddingProvider

    globals()[name] = OpenAiEmbeddingProvider
    return OpenAiEmbeddingProvider


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"OpenAiEmbeddingProvider"})
