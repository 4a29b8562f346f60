"""OpenAI Chat Completions and compatible servers (Azure, vLLM, Ollama ``/v1``, DeepSeek, ...),
and OpenAI embeddings."""

from ._client import OpenAiCompatibleProvider as OpenAiCompatibleProvider
from ._config import OpenAiConfig as OpenAiConfig
from ._config import OpenAiEmbeddingConfig as OpenAiEmbeddingConfig
from ._embeddings import OpenAiEmbeddingProvider as OpenAiEmbeddingProvider
from ._stream import OpenAiStreamDecoder as OpenAiStreamDecoder

__all__ = [
    "OpenAiCompatibleProvider",
    "OpenAiConfig",
    "OpenAiEmbeddingConfig",
    "OpenAiEmbeddingProvider",
    "OpenAiStreamDecoder",
]
