"""The Ollama codec: pure, on the provider seam (see :mod:`kova.providers._codec`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..._record import Record, set_field
from .._codec import CodecBase, ModelPage, WireRequest
from .._framing import NdjsonFramer
from ._convert import PROVIDER, decode_models, decode_response, encode_request
from ._stream import OllamaStreamDecoder

if TYPE_CHECKING:
    from ..._models import ChatRequest, JSONValue
    from ._config import OllamaConfig

__all__ = ["OllamaCodec"]


class OllamaCodec(Record, CodecBase[str]):
    """``POST /api/chat`` (NDJSON when streamed), ``GET /api/tags``. Ollama has no token
    counting endpoint: :meth:`count_tokens` is the offline heuristic."""

    config: OllamaConfig
    name: ClassVar[str] = PROVIDER
    framer: ClassVar[type[NdjsonFramer]] = NdjsonFramer
    stream_decoder: ClassVar[type[OllamaStreamDecoder]] = OllamaStreamDecoder
    stream_content_types: ClassVar[tuple[str, ...]] = ("application/x-ndjson",)
    decode = staticmethod(decode_response)  # the pure function itself: no call around it

    def __init__(self, config: OllamaConfig) -> None:
        set_field(self, "config", config)

    def encode(self, request: ChatRequest, *, stream: bool) -> WireRequest:
        return WireRequest(
            path="/api/chat",
            headers=self.config.extra_headers,
            body=encode_request(request, self.config, stream=stream),
        )

    def encode_list_models(self, cursor: str | None) -> WireRequest | None:
        return WireRequest(method="GET", path="/api/tags", headers=self.config.extra_headers)

    def decode_list_models(self, body: JSONValue) -> ModelPage:
        return ModelPage(models=decode_models(body))
