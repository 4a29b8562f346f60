"""OpenAI Chat Completions and compatible servers (Azure, vLLM, Ollama ``/v1``, DeepSeek, ...),
the OpenAI Responses API, and OpenAI embeddings."""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._client import OpenAiCompatibleProvider as OpenAiCompatibleProvider
from ._config import OpenAiConfig as OpenAiConfig
from ._responses import OpenAiResponsesProvider as OpenAiResponsesProvider
from ._responses_config import OpenAiResponsesConfig as OpenAiResponsesConfig
from ._stream import OpenAiStreamDecoder as OpenAiStreamDecoder

if _TYPE_CHECKING:
    from ._embeddings import OpenAiEmbeddingConfig as OpenAiEmbeddingConfig
    from ._embeddings import OpenAiEmbeddingProvider as OpenAiEmbeddingProvider

__all__ = [
    "OpenAiCompatibleProvider",
    "OpenAiConfig",
    "OpenAiEmbeddingConfig",
    "OpenAiEmbeddingProvider",
    "OpenAiResponsesConfig",
    "OpenAiResponsesProvider",
    "OpenAiStreamDecoder",
]


_LAZY = frozenset({"OpenAiEmbeddingConfig", "OpenAiEmbeddingProvider"})


def __getattr__(name: str) -> object:
    # The embeddings provider and its config load on first use: a chat program does not pay
    # for them.
    if name not in _LAZY:
        raise AttributeError(f"module 'kova.providers.openai' has no attribute {name!r}")
    from . import _embeddings

    value = getattr(_embeddings, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY)
