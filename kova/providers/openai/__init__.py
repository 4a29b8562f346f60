"""OpenAI Chat Completions and compatible servers (Azure, vLLM, Ollama ``/v1``, DeepSeek, ...),
the OpenAI Responses API, and OpenAI embeddings."""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from ..._lazy import lazy_names as _lazy_names
from ._client import OpenAiCompatibleProvider as OpenAiCompatibleProvider
from ._config import OpenAiConfig as OpenAiConfig

if _TYPE_CHECKING:
    from ._embeddings import OpenAiEmbeddingConfig as OpenAiEmbeddingConfig
    from ._embeddings import OpenAiEmbeddingProvider as OpenAiEmbeddingProvider
    from ._responses import OpenAiResponsesProvider as OpenAiResponsesProvider
    from ._responses_config import OpenAiResponsesConfig as OpenAiResponsesConfig

__all__ = [
    "OpenAiCompatibleProvider",
    "OpenAiConfig",
    "OpenAiEmbeddingConfig",
    "OpenAiEmbeddingProvider",
    "OpenAiResponsesConfig",
    "OpenAiResponsesProvider",
]


_LAZY = {
    "OpenAiEmbeddingConfig": "._embeddings",
    "OpenAiEmbeddingProvider": "._embeddings",
    "OpenAiResponsesConfig": "._responses_config",
    "OpenAiResponsesProvider": "._responses",
}


# The embeddings and Responses providers and their configs load on first use: a Chat
# Completions program does not pay for them.
__getattr__, __dir__ = _lazy_names(__name__, _LAZY)
