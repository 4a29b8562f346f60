"""kova's data model: messages, content blocks, responses, usage, configs and stream events.

Every value type is a frozen, slotted record (:class:`kova._record.Record`: keyword-only
construction, equality, hashing and ``repr`` like a frozen attrs class, and ``attrs.evolve``,
``attrs.fields`` and ``attrs.asdict`` work on it), so values can be shared between actors
without copying. Sequence fields are tuples; mapping fields are typed ``Mapping`` and are
never mutated by kova.

The model lives in four modules, one concern each, and this one gathers them (kova's own
modules and programs import the model from here): :mod:`kova._messages` (content blocks,
messages, a history as plain JSON), :mod:`kova._requests` (what a call sends),
:mod:`kova._responses` (what it returns) and :mod:`kova._stream_events` (what a stream
yields).
"""

from ._messages import (
    Audio as Audio,
)
from ._messages import (
    ContentBlock as ContentBlock,
)
from ._messages import (
    Document as Document,
)
from ._messages import (
    File as File,
)
from ._messages import (
    Image as Image,
)
from ._messages import (
    JSONObject as JSONObject,
)
from ._messages import (
    JSONValue as JSONValue,
)
from ._messages import (
    Message as Message,
)
from ._messages import (
    RedactedThinking as RedactedThinking,
)
from ._messages import (
    Role as Role,
)
from ._messages import (
    Text as Text,
)
from ._messages import (
    Thinking as Thinking,
)
from ._messages import (
    ToolResult as ToolResult,
)
from ._messages import (
    ToolUse as ToolUse,
)
from ._messages import (
    block_from_dict as block_from_dict,
)
from ._messages import (
    block_to_dict as block_to_dict,
)
from ._messages import (
    messages_from_dicts as messages_from_dicts,
)
from ._messages import (
    messages_from_json as messages_from_json,
)
from ._messages import (
    messages_to_dicts as messages_to_dicts,
)
from ._messages import (
    messages_to_json as messages_to_json,
)
from ._requests import (
    ChatRequest as ChatRequest,
)
from ._requests import (
    InferenceConfig as InferenceConfig,
)
from ._requests import (
    ResponseFormat as ResponseFormat,
)
from ._requests import (
    ToolAnnotations as ToolAnnotations,
)
from ._requests import (
    ToolDefinition as ToolDefinition,
)
from ._responses import (
    ModelInfo as ModelInfo,
)
from ._responses import (
    ModelResponse as ModelResponse,
)
from ._responses import (
    StopKind as StopKind,
)
from ._responses import (
    StopReason as StopReason,
)
from ._responses import (
    Usage as Usage,
)
from ._stream_events import (
    ErrorEvent as ErrorEvent,
)
from ._stream_events import (
    MediaOutput as MediaOutput,
)
from ._stream_events import (
    SignedThinking as SignedThinking,
)
from ._stream_events import (
    StopEvent as StopEvent,
)
from ._stream_events import (
    StreamEvent as StreamEvent,
)
from ._stream_events import (
    TextDelta as TextDelta,
)
from ._stream_events import (
    ThinkingDelta as ThinkingDelta,
)
from ._stream_events import (
    ToolUseDelta as ToolUseDelta,
)
from ._stream_events import (
    ToolUseEnd as ToolUseEnd,
)
from ._stream_events import (
    ToolUseStart as ToolUseStart,
)
from ._stream_events import (
    UsageEvent as UsageEvent,
)
from ._stream_events import (
    text_delta as text_delta,
)

__all__ = [
    "ChatRequest",
    "JSONObject",
    "JSONValue",
    "ContentBlock",
    "ErrorEvent",
    "Audio",
    "Document",
    "File",
    "Image",
    "InferenceConfig",
    "Message",
    "ModelInfo",
    "ModelResponse",
    "RedactedThinking",
    "ResponseFormat",
    "Role",
    "MediaOutput",
    "SignedThinking",
    "StopEvent",
    "StopKind",
    "StopReason",
    "StreamEvent",
    "Text",
    "TextDelta",
    "Thinking",
    "ThinkingDelta",
    "ToolAnnotations",
    "ToolDefinition",
    "ToolResult",
    "ToolUse",
    "ToolUseDelta",
    "ToolUseEnd",
    "ToolUseStart",
    "Usage",
    "UsageEvent",
    "messages_from_dicts",
    "messages_from_json",
    "messages_to_dicts",
    "messages_to_json",
]
