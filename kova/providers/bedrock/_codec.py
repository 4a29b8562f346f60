"""The Bedrock Converse codec: pure, on the provider seam (see :mod:`kova.providers._codec`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..._record import Record, set_field
from .._codec import CodecBase, ModelPage, WireRequest
from ._convert import (
    PROVIDER,
    decode_count_tokens,
    decode_error_details,
    decode_foundation_models,
    decode_inference_profiles,
    decode_response,
    encode_count_tokens_request,
    encode_request,
    model_path,
)
from ._framing import EventFrame, EventStreamFramer
from ._stream import BedrockStreamDecoder

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..._models import ChatRequest, JSONValue
    from ..._secret import SecretHeaders
    from ._config import BedrockConfig

__all__ = ["EVENT_STREAM", "BedrockCodec"]

EVENT_STREAM = "application/vnd.amazon.eventstream"

_PROFILES = "inference-profiles"
"""Model listing cursor: the foundation models come first, then the inference profiles, whose
pages are ``inference-profiles`` (first) and ``inference-profiles:<nextToken>``."""


class BedrockCodec(Record, CodecBase[EventFrame]):
    """Converse and ConverseStream (AWS event stream); exact token counts via CountTokens;
    models via ListFoundationModels then ListInferenceProfiles on the control plane."""

    config: BedrockConfig
    name: ClassVar[str] = PROVIDER
    framer: ClassVar[type[EventStreamFramer]] = EventStreamFramer
    stream_decoder: ClassVar[type[BedrockStreamDecoder]] = BedrockStreamDecoder
    stream_content_types: ClassVar[tuple[str, ...]] = (EVENT_STREAM,)
    # The pure functions themselves, not methods that call them (no extra call per answer).
    decode = staticmethod(decode_response)
    error_details = staticmethod(decode_error_details)
    decode_count_tokens = staticmethod(decode_count_tokens)

    def __init__(self, config: BedrockConfig) -> None:
        set_field(self, "config", config)

    def _headers(self) -> SecretHeaders:
        return self.config.extra_headers

    def encode(self, request: ChatRequest, *, stream: bool) -> WireRequest:
        model_id = request.config.model or self.config.model_id
        body = encode_request(request.messages, request.tools, request.config, self.config)
        return WireRequest(
            path=model_path(model_id, "converse-stream" if stream else "converse"),
            headers=self._headers(),
            body=body,
        )

    def header_error_type(self, headers: Mapping[str, str]) -> str | None:
        # AWS names the error in a header rather than (only) in the body, sometimes with a
        # suffix: "ThrottlingException:http://internal.amazon.com/coral/...".
        found = headers.get("x-amzn-errortype")
        return found.split(":", 1)[0] if found else None

    def encode_count_tokens(self, request: ChatRequest) -> WireRequest | None:
        if not self.config.exact_token_count:
            return None
        model_id = request.config.model or self.config.model_id
        return WireRequest(
            path=model_path(model_id, "count-tokens"),
            headers=self._headers(),
            body=encode_count_tokens_request(request.messages, request.tools, self.config),
        )

    def encode_list_models(self, cursor: str | None) -> WireRequest | None:
        control = self.config.control_url
        if cursor is None:
            return WireRequest(
                method="GET", path=f"{control}/foundation-models", headers=self._headers()
            )
        query = {"maxResults": "1000"}
        _, _, token = cursor.partition(":")
        if token:
            query["nextToken"] = token
        return WireRequest(
            method="GET",
            path=f"{control}/inference-profiles",
            query=query,
            headers=self._headers(),
        )

    def decode_list_models(self, body: JSONValue) -> ModelPage:
        if isinstance(body, dict) and "modelSummaries" in body:
            return ModelPage(models=decode_foundation_models(body), next_cursor=_PROFILES)
        models, token = decode_inference_profiles(body)
        return ModelPage(models=models, next_cursor=f"{_PROFILES}:{token}" if token else None)
