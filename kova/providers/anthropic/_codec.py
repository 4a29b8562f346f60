"""The Anthropic Messages codec: pure, on the provider seam (see :mod:`kova.providers._codec`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..._record import Record, set_field
from .._codec import CodecBase, ModelPage, WireRequest
from .._framing import SseFramer
from .._sse import SseEvent
from ._convert import (
    PROVIDER,
    beta_headers,
    context_management,
    decode_count_tokens,
    decode_model_page,
    decode_response,
    encode_count_tokens_request,
    encode_deferred_tools,
    encode_request,
    request_headers,
)
from ._stream import AnthropicStreamDecoder

if TYPE_CHECKING:
    from ..._models import ChatRequest, JSONValue, ModelResponse
    from ..._secret import SecretHeaders
    from ._config import AnthropicConfig

__all__ = ["AnthropicCodec"]

_MODELS_PAGE_SIZE = 1000  # the API's maximum; most accounts fit in one page


class AnthropicCodec(
    Record, CodecBase[SseEvent], eq_exclude=("headers",), repr_exclude=("headers",)
):
    """Messages API over SSE; exact token counts via ``/v1/messages/count_tokens``."""

    config: AnthropicConfig
    headers: tuple[SecretHeaders, SecretHeaders]
    """The headers of a call and of a streamed call: the config's, worked out once (the
    config is frozen) instead of per request."""
    name: ClassVar[str] = PROVIDER
    framer: ClassVar[type[SseFramer]] = SseFramer
    stream_content_types: ClassVar[tuple[str, ...]] = ("text/event-stream",)

    def __init__(self, config: AnthropicConfig) -> None:
        set_field(self, "config", config)
        headers = request_headers(config)
        set_field(self, "headers", (headers, headers.merged({"accept": "text/event-stream"})))

    def encode(self, request: ChatRequest, *, stream: bool) -> WireRequest:
        headers = self.headers[stream]
        body = encode_request(
            request.messages, request.tools, request.config, self.config, stream=stream
        )
        if request.deferred_tools:  # the provider's own tool search
            tools = body.setdefault("tools", [])
            assert isinstance(tools, list)
            tools.extend(encode_deferred_tools(request.deferred_tools))
        if request.compaction is not None:  # the server's own context management (beta)
            body["context_management"], betas = context_management(request.compaction)
            headers = beta_headers(headers, betas)
        return WireRequest(path="/v1/messages", headers=headers, body=body)

    def decode(self, body: JSONValue) -> ModelResponse:
        return decode_response(body)

    def stream_decoder(self) -> AnthropicStreamDecoder:
        return AnthropicStreamDecoder()

    def encode_count_tokens(self, request: ChatRequest) -> WireRequest | None:
        body = encode_count_tokens_request(
            request.messages, request.tools, request.config, self.config
        )
        return WireRequest(
            path="/v1/messages/count_tokens", headers=request_headers(self.config), body=body
        )

    def decode_count_tokens(self, body: JSONValue) -> int:
        return decode_count_tokens(body)

    def encode_list_models(self, cursor: str | None) -> WireRequest | None:
        query = {"limit": str(_MODELS_PAGE_SIZE)}
        if cursor is not None:
            query["after_id"] = cursor
        return WireRequest(
            method="GET", path="/v1/models", query=query, headers=request_headers(self.config)
        )

    def decode_list_models(self, body: JSONValue) -> ModelPage:
        models, cursor = decode_model_page(body)
        return ModelPage(models=models, next_cursor=cursor)
