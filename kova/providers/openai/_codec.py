"""The OpenAI Chat Completions codec: pure, on the provider seam (see
:mod:`kova.providers._codec`)."""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar

from ..._errors import ProviderErrorClass
from ..._record import Record, evolve, set_field
from .._codec import CodecBase, ModelPage, WireRequest
from .._framing import SseFramer
from .._http import ErrorDetails, default_error_details
from .._sse import SseEvent
from ._config import endpoint_path
from ._convert import PROVIDER, decode_models, decode_response, encode_request
from ._stream import OpenAiStreamDecoder

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..._models import ChatRequest, JSONValue, ModelResponse
    from ..._secret import SecretHeaders
    from ._config import OpenAiConfig

STREAM_ACCEPT: Mapping[str, str] = MappingProxyType({"accept": "text/event-stream"})
"""The header a streamed request adds to the config's."""

__all__ = ["STREAM_ACCEPT", "OpenAiCodec", "openai_error_details"]


def openai_error_details(body: JSONValue) -> ErrorDetails:
    """OpenAI's error body. A 429 whose code is ``insufficient_quota`` is not a rate limit:
    waiting does not help, so it is classified ``OTHER`` (not retryable)."""
    details = default_error_details(body)
    if details.code == "insufficient_quota" or details.error_type == "insufficient_quota":
        return evolve(details, error_class=ProviderErrorClass.OTHER)
    return details


class OpenAiCodec(
    Record,
    CodecBase[SseEvent],
    eq_exclude=("stream_headers", "path"),
    repr_exclude=("stream_headers", "path"),
):
    """Chat Completions over SSE, for OpenAI and compatible servers."""

    config: OpenAiConfig
    stream_headers: SecretHeaders
    """The headers of a streamed call: the config's and ``accept``, worked out once (the
    config is frozen) rather than per stream."""
    path: str
    """The chat path under the base URL, worked out once, as the headers are."""
    name: ClassVar[str] = PROVIDER
    framer: ClassVar[type[SseFramer]] = SseFramer
    stream_content_types: ClassVar[tuple[str, ...]] = ("text/event-stream",)

    def __init__(self, config: OpenAiConfig) -> None:
        set_field(self, "config", config)
        set_field(self, "stream_headers", config.extra_headers.merged(STREAM_ACCEPT))
        set_field(self, "path", endpoint_path(config.base_url, config.chat_completions_path))

    def encode(self, request: ChatRequest, *, stream: bool) -> WireRequest:
        config = self.config
        body = encode_request(
            request.messages, request.tools, request.config, config, stream=stream
        )
        return WireRequest(
            path=self.path,
            query=config.query_params() if config.api_version is not None else None,
            headers=self.stream_headers if stream else config.extra_headers,
            body=body,
        )

    def decode(self, body: JSONValue) -> ModelResponse:
        return decode_response(
            body, keep_reasoning=self.config.echo_reasoning, audio_format=self.config.audio_format
        )

    def stream_decoder(self) -> OpenAiStreamDecoder:
        return OpenAiStreamDecoder(
            keep_reasoning=self.config.echo_reasoning, audio_format=self.config.audio_format
        )

    def error_details(self, body: JSONValue) -> ErrorDetails:
        return openai_error_details(body)

    def encode_list_models(self, cursor: str | None) -> WireRequest | None:
        config = self.config
        return WireRequest(
            method="GET",
            path=endpoint_path(config.base_url, config.models_path),
            query=config.query_params(),
            headers=config.extra_headers,
        )

    def decode_list_models(self, body: JSONValue) -> ModelPage:
        return ModelPage(models=decode_models(body))
