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
    from ..._models import ChatRequest, JSONValue, ModelResponse
    from .._http import ErrorDetails
    from ._config import GeminiConfig

__all__ = ["GeminiCodec"]

_MODELS_PAGE_SIZE = 1000  # the API caps pages lower (at 1000 today); it pages the rest


class GeminiCodec(Record, CodecBase[SseEvent]):
    """``generateContent`` and ``streamGenerateContent?alt=sse``; exact token counts via
    ``countTokens``; paged ``models`` listing."""

    config: GeminiConfig
    name: ClassVar[str] = PROVIDER
    framer: ClassVar[type[SseFramer]] = SseFramer
    stream_content_types: ClassVar[tuple[str, ...]] = ("text/event-stream",)

    def __init__(self, config: GeminiConfig) -> None:
        set_field(self, "config", config)

    def encode(self, request: ChatRequest, *, stream: bool) -> WireRequest:
        config = self.config
        if stream:
            return WireRequest(
                path=model_path(config, request.config.model, "streamGenerateContent"),
                query={"alt": "sse"},
                headers=config.extra_headers,
                body=encode_request(request, config),
            )
        return WireRequest(
            path=model_path(config, request.config.model, "generateContent"),
            headers=config.extra_headers,
            body=encode_request(request, config),
        )

    def decode(self, body: JSONValue) -> ModelResponse:
        return decode_response(body)

    def stream_decoder(self) -> GeminiStreamDecoder:
        return GeminiStreamDecoder()

    def error_details(self, body: JSONValue) -> ErrorDetails:
        return error_details(body)

    def encode_count_tokens(self, request: ChatRequest) -> WireRequest | None:
        return WireRequest(
            path=model_path(self.config, request.config.model, "countTokens"),
            headers=self.config.extra_headers,
            body=encode_count_tokens(request, self.config),
        )

    def decode_count_tokens(self, body: JSONValue) -> int:
        return decode_count_tokens(body)

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
