"""Google Gemini (the Gemini API, ``generateContent``) and Gemini embeddings."""

from ._client import GeminiProvider as GeminiProvider
from ._codec import GeminiCodec as GeminiCodec
from ._config import GeminiConfig as GeminiConfig
from ._config import GeminiEmbeddingConfig as GeminiEmbeddingConfig
from ._embeddings import GeminiEmbeddingProvider as GeminiEmbeddingProvider
from ._stream import GeminiStreamDecoder as GeminiStreamDecoder

__all__ = [
    "GeminiCodec",
    "GeminiConfig",
    "GeminiEmbeddingConfig",
    "GeminiEmbeddingProvider",
    "GeminiProvider",
    "GeminiStreamDecoder",
]
