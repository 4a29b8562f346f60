"""Google Gemini (the Gemini API, ``generateContent``) and Gemini embeddings."""

from ._client import GeminiProvider as GeminiProvider
from ._config import GeminiConfig as GeminiConfig
from ._config import GeminiEmbeddingConfig as GeminiEmbeddingConfig
from ._embeddings import GeminiEmbeddingProvider as GeminiEmbeddingProvider

__all__ = [
    "GeminiConfig",
    "GeminiEmbeddingConfig",
    "GeminiEmbeddingProvider",
    "GeminiProvider",
]
