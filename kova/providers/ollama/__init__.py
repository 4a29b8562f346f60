"""Ollama's native API (``/api/chat``, NDJSON streaming) and Ollama embeddings."""

from ._client import OllamaProvider as OllamaProvider
from ._config import OllamaConfig as OllamaConfig
from ._config import OllamaEmbeddingConfig as OllamaEmbeddingConfig
from ._config import OllamaThink as OllamaThink
from ._embeddings import OllamaEmbeddingProvider as OllamaEmbeddingProvider

__all__ = [
    "OllamaConfig",
    "OllamaEmbeddingConfig",
    "OllamaEmbeddingProvider",
    "OllamaProvider",
    "OllamaThink",
]
