"""What travels through Temporal: kova's own JSON, the activities' names, the size limit.

Every payload is JSON text written by kova (:meth:`~kova.agent.Turn.to_json`,
:meth:`~kova.Message.to_dict`, a model response as its blocks): nothing that cannot be
serialized travels, and the worker holds the agent's configuration. The workflow's code and
the client read them back strictly (a :class:`~kova.errors.SerializationError` names what is
wrong). No module here imports trio, httpx or temporalio: the workflow's code imports them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from .._errors import KovaError, SerializationError
from .._json import dumps, loads
from .._messages import ToolUse, block_from_dict, block_to_dict
from .._requests import ChatRequest, ToolDefinition
from .._responses import ModelResponse
from ..agent._context import (
    ClearToolResults,
    ContextPolicy,
    ContextStrategy,
    ProviderCompaction,
    SlidingWindow,
    Summarize,
)
from ..agent._state_json import (
    config_from_json,
    config_to_json,
    field,
    messages_from_json,
    stop_from_json,
    tool_to_json,
    usage_from_json,
    usage_to_json,
)

if TYPE_CHECKING:
    from .._messages import JSONValue

__all__ = [
    "PAYLOAD_LIMIT",
    "PayloadTooLargeError",
    "check_size",
    "guard_activity",
    "policy_from_json",
    "policy_to_json",
    "model_activity",
    "read_json",
    "request_from_json",
    "request_to_json",
    "response_from_json",
    "response_to_json",
    "start_activity",
    "summarize_activity",
    "tool_activity",
    "tools_digest",
    "write_json",
]

PAYLOAD_LIMIT: Final = 2 * 1024 * 1024
"""Temporal's default limit on one payload (the server's ``limit.blobSize.error``: 2 MiB).
kova refuses a payload over it before sending, with an error saying what was too large,
instead of Temporal's failure of the whole workflow task."""


class PayloadTooLargeError(KovaError):
    """A payload of a Temporal turn (the history, a model request or reply, a tool result)
    is over :data:`PAYLOAD_LIMIT`. ``what`` names it, ``size`` is its size in bytes."""

    def __init__(self, what: str, size: int, limit: int = PAYLOAD_LIMIT) -> None:
        super().__init__(
            f"{what} is {size:,} bytes of JSON, over Temporal's payload limit of {limit:,} "
            "bytes: keep large data out of the conversation (store it and pass a reference), "
            "or compact the history"
        )
        self.what = what
        self.size = size


def check_size(text: str, what: str) -> str:
    """``text``, unless its UTF-8 size is over :data:`PAYLOAD_LIMIT`.

    Raises:
        PayloadTooLargeError: naming ``what``.
    """
    if len(text) * 4 > PAYLOAD_LIMIT:  # only then is the exact size worth computing
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > PAYLOAD_LIMIT:
            raise PayloadTooLargeError(what, size)
    return text


def write_json(value: Mapping[str, Any], what: str) -> str:
    """``value`` as JSON text within the payload limit."""
    return check_size(dumps(value), what)


def read_json(text: object, what: str) -> Mapping[str, Any]:
    """A JSON object written by :func:`write_json`.

    Raises:
        SerializationError: not text, not JSON, or not an object.
    """
    if not isinstance(text, str):
        raise SerializationError(f"{what} must be JSON text, got {type(text).__name__}")
    try:
        value = loads(text)
    except ValueError as exc:
        raise SerializationError(f"{what} is not JSON: {exc}") from None
    if not isinstance(value, Mapping):
        raise SerializationError(f"{what} must be a JSON object")
    return value


# -- activity names -----------------------------------------------------------------------


def start_activity(agent: str) -> str:
    """The activity that starts a turn of ``agent`` (its turn core, from the worker's
    configuration)."""
    return f"kova.{agent}.start"


def model_activity(agent: str) -> str:
    """The activity of one model call of ``agent``."""
    return f"kova.{agent}.model"


def guard_activity(agent: str) -> str:
    """The activity of one check by the guards of ``agent``."""
    return f"kova.{agent}.guard"


def summarize_activity(agent: str) -> str:
    """The activity of one summary a context policy of ``agent`` asked for."""
    return f"kova.{agent}.summarize"


def tool_activity(agent: str, tool: str) -> str:
    """The activity of one call of ``agent``'s tool ``tool``."""
    return f"kova.{agent}.tool.{tool}"


# -- model responses ----------------------------------------------------------------------


def response_to_json(response: ModelResponse) -> dict[str, JSONValue]:
    usage = response.usage
    return {
        "content": [block_to_dict(block) for block in response.content],
        "stop_reason": {"kind": response.stop_reason.kind.value, "raw": response.stop_reason.raw},
        "usage": None if usage is None else usage_to_json(usage),
        "thinking": response.thinking,
        "model": response.model,
        "id": response.id,
    }


def response_from_json(data: Mapping[str, Any]) -> ModelResponse:
    content = [block_from_dict(item) for item in field(data, "content", list)]
    usage = data.get("usage")
    optional: dict[str, str | None] = {}
    for name in ("thinking", "model", "id"):
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            raise SerializationError(f"a model response's {name!r} must be a string or null")
        optional[name] = value
    return ModelResponse(
        content=content,
        stop_reason=stop_from_json(data.get("stop_reason")),
        usage=None if usage is None else usage_from_json(usage),
        **optional,
    )


def call_from_json(data: object) -> ToolUse:
    block = block_from_dict(data)
    if not isinstance(block, ToolUse):
        raise SerializationError("a tool activity's call must be a tool_use block")
    return block


def tools_digest(tools: Sequence[ToolDefinition]) -> str:
    """A short fingerprint of the tool definitions a model call offers (their JSON): a
    model activity compares its agent's tools with the turn's by it, so the list travels
    only when it changed."""
    text = dumps([tool_to_json(tool) for tool in tools])
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def request_to_json(request: ChatRequest, digest: str) -> dict[str, JSONValue]:
    """A model call's request as the model activity gets it: the messages and inference
    config, and the digest of the tools (the worker's agent has them)."""
    return {
        "messages": [message.to_dict() for message in request.messages],
        "config": config_to_json(request.config),
        "tools": digest,
    }


def request_from_json(
    data: Mapping[str, Any], tools: Sequence[ToolDefinition]
) -> tuple[ChatRequest, bool]:
    """:func:`request_to_json`'s request with ``tools`` (the worker's agent's), and whether
    they differ from the turn's."""
    messages = tuple(messages_from_json(data.get("messages"), "messages"))
    config = config_from_json(data.get("config"))
    changed = tools_digest(tools) != field(data, "tools", str)
    return ChatRequest(messages=messages, tools=tuple(tools), config=config), changed


# -- context policies ---------------------------------------------------------------------


def policy_to_json(policy: ContextPolicy, limit: int) -> dict[str, JSONValue]:
    """The worker's context policy as the workflow's turn uses it: its strategies (a
    summarizer is not sent: the summary activity finds it by the strategy's position) and
    ``limit``, the prompt tokens the worker worked out from the window, the reserve and the
    agent's model, as a window and a reserve that give the same limit wherever it is read."""
    strategies: list[JSONValue] = []
    for strategy in policy.strategies:
        if isinstance(strategy, ClearToolResults):
            strategies.append(
                {
                    "kind": "clear_tool_results",
                    "keep_last": strategy.keep_last,
                    "keep_tools": list(strategy.keep_tools),
                }
            )
        elif isinstance(strategy, SlidingWindow):
            strategies.append({"kind": "sliding_window"})
        elif isinstance(strategy, ProviderCompaction):
            # Kept in its place (a summary is found by position); a workflow's model calls
            # do not ask the provider for it: the strategies after it do the work.
            strategies.append({"kind": "provider_compaction"})
        else:
            strategies.append(
                {
                    "kind": "summarize",
                    "keep_last": strategy.keep_last,
                    "instructions": strategy.instructions,
                }
            )
    return {"strategies": strategies, "window": limit + 1, "reserve": 1}


def policy_from_json(data: object) -> ContextPolicy:
    """:func:`policy_to_json`'s policy (its summaries ask the worker for the summarizer).

    Raises:
        SerializationError: not such a policy.
    """
    if not isinstance(data, Mapping):
        raise SerializationError("a context policy must be a JSON object")
    strategies: list[ContextStrategy] = []
    try:
        for item in field(data, "strategies", list):
            if not isinstance(item, Mapping):
                raise SerializationError("a context strategy must be a JSON object")
            kind = item.get("kind")
            if kind == "clear_tool_results":
                keep_tools = field(item, "keep_tools", list)
                strategies.append(
                    ClearToolResults(
                        keep_last=field(item, "keep_last", int), keep_tools=tuple(keep_tools)
                    )
                )
            elif kind == "sliding_window":
                strategies.append(SlidingWindow())
            elif kind == "provider_compaction":
                strategies.append(ProviderCompaction())
            elif kind == "summarize":
                strategies.append(
                    Summarize(
                        keep_last=field(item, "keep_last", int),
                        instructions=item.get("instructions"),
                    )
                )
            else:
                raise SerializationError(f"unknown context strategy {kind!r}")
        return ContextPolicy(
            *strategies, window=field(data, "window", int), reserve=field(data, "reserve", int)
        )
    except KovaError as exc:  # BuildError: a value out of range
        if isinstance(exc, SerializationError):
            raise
        raise SerializationError(f"a stored context policy is not valid: {exc}") from None
