"""Model providers: the protocol and the values it speaks (:class:`ChatRequest` in;
:class:`ModelResponse`, or :class:`StreamEvent` batches, out), the codec seam every HTTP
provider is built on, and the shared pieces (framers, auth flows, the heuristic token
counter).

A provider is config + codec (+ an auth flow) run by :class:`HttpProvider`; see
``docs/providers/writing-a-provider.md``.
"""

import typing as _typing

from .._lazy import lazy_names as _lazy_names
from .._models import ChatRequest as ChatRequest
from .._models import ErrorEvent as ErrorEvent
from .._models import ModelInfo as ModelInfo
from .._models import ModelResponse as ModelResponse
from .._models import StopEvent as StopEvent
from .._models import StreamEvent as StreamEvent
from .._models import ToolUseDelta as ToolUseDelta
from .._models import ToolUseEnd as ToolUseEnd
from .._models import ToolUseStart as ToolUseStart
from .._models import UsageEvent as UsageEvent
from ._auth import HeaderAuth as HeaderAuth
from ._auth import bearer_auth as bearer_auth
from ._auth import header_auth as header_auth
from ._base import EventBatches as EventBatches
from ._base import Provider as Provider
from ._base import count_tokens as count_tokens
from ._base import heuristic_count_tokens as heuristic_count_tokens
from ._base import list_models as list_models
from ._classify import classify as classify
from ._classify import provider_error as provider_error
from ._codec import Codec as Codec
from ._codec import CodecBase as CodecBase
from ._codec import ModelPage as ModelPage
from ._codec import StreamDecoder as StreamDecoder
from ._codec import WireRequest as WireRequest
from ._codec import expect_list as expect_list
from ._codec import expect_object as expect_object
from ._codec import expect_str as expect_str
from ._embedding import EmbeddingProvider as EmbeddingProvider
from ._embedding import Embeddings as Embeddings
from ._fallback import FallbackOn as FallbackOn
from ._fallback import FallbackProvider as FallbackProvider
from ._framing import Framer as Framer
from ._framing import NdjsonFramer as NdjsonFramer
from ._framing import SseFramer as SseFramer
from ._http import ErrorDetails as ErrorDetails
from ._http_provider import EventStream as EventStream
from ._http_provider import HttpProvider as HttpProvider
from ._sse import SseEvent as SseEvent

if _typing.TYPE_CHECKING:
    from ._settings import HttpSettings as HttpSettings


# HttpSettings is an attrs class: defined on first use, not by every agent's import.
__getattr__, __dir__ = _lazy_names(__name__, {"HttpSettings": "._settings"})


__all__ = [
    "ChatRequest",
    "Codec",
    "CodecBase",
    "EmbeddingProvider",
    "Embeddings",
    "ErrorDetails",
    "ErrorEvent",
    "EventBatches",
    "EventStream",
    "FallbackOn",
    "FallbackProvider",
    "Framer",
    "HeaderAuth",
    "HttpProvider",
    "HttpSettings",
    "ModelInfo",
    "ModelPage",
    "ModelResponse",
    "NdjsonFramer",
    "Provider",
    "SseEvent",
    "SseFramer",
    "StopEvent",
    "StreamDecoder",
    "StreamEvent",
    "ToolUseDelta",
    "ToolUseEnd",
    "ToolUseStart",
    "UsageEvent",
    "WireRequest",
    "bearer_auth",
    "classify",
    "count_tokens",
    "expect_list",
    "expect_object",
    "expect_str",
    "header_auth",
    "heuristic_count_tokens",
    "list_models",
    "provider_error",
]
