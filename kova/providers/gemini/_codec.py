"""The Gemini codec: pure, on the provider seam (see :mod:`kova.providers._codec`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..._record import Record, set_field
from .._codec import CodecBase, ModelPage, WireRequest
from .._framing import SseFramer
from .._sse import SseEvent
from ._convert import (
    PROVIDER,
    decode_count_tokens,
    decode_model_page,
    decode_response,
    encode_count_tokens,
    encode_request,
    error_details,
    model_path,
)
from ._stream import GeminiStreamDecoder

if TYPE_CHECKING:
    from ..._models import ChatRequest, JSONValue
    from ._config import GeminiConfig

__all__ = ["GeminiCodec"]

_MODELS_PAGE_SIZE = 1000  # the API caps pages lower (at 1000 today); it pages the rest


class GeminiCodec(Record, CodecBase[SseEvent]):
    """``generateContent`` and ``streamGenerateContent?alt=sse``; exact token counts via
    ``countTokens``; paged ``models`` listing."""

    config: GeminiConfig
    name: ClassVar[str] = PROVIDER
    framer: ClassVar[type[SseFramer]] = SseFramer
    stream_decoder: ClassVar[type[GeminiStreamDecoder]] = GeminiStreamDecoder
    stream_content_types: ClassVar[tuple[str, ...]] = ("text/event-stream",)
    # The pure functions themselves, not methods that call them (no extra call per answer).
    decode = staticmethod(decode_response)
    error_details = staticmethod(error_details)
    decode_count_tokens = staticmethod(decode_count_tokens)

    def __init__(self, config: GeminiConfig) -> None:
        set_field(self, "config", config)

    def encode(self, request: ChatRequest, *, stream: bool) -> WireRequest:
        config = self.config
        method = "streamGenerateContent" if stream else "generateContent"
        return WireRequest(
            path=model_path(config, request.config.model, method),
            query={"alt": "sse"} if stream else None,
            headers=config.extra_headers,
            body=encode_request(request, config),
        )

    def encode_count_tokens(self, request: ChatRequest) -> WireRequest | None:
        return WireRequest(
            path=model_path(self.config, request.config.model, "countTokens"),
            headers=self.config.extra_headers,
            body=encode_count_tokens(request, self.config),
        )

    def encode_list_models(self, cursor: str | None) -> WireRequest | None:
        query = {"pageSize": str(_MODELS_PAGE_SIZE)}
        if cursor is not None:
            query["pageToken"] = cursor
        return WireRequest(
            method="GET",
            path=f"/{self.config.api_version}/models",
            query=query,
            headers=self.config.extra_headers,
        )

    def decode_list_models(self, body: JSONValue) -> ModelPage:
        models, cursor = decode_model_page(body)
        return ModelPage(models=models, next_cursor=cursor)
