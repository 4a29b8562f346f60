"""The connection actor's messages: a closed set, dispatched with ``match``."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .._models import JSONObject
    from ._types import McpRoot, ProgressHandler

__all__ = [
    "CallTool",
    "GetPrompt",
    "GetServerInfo",
    "ListPrompts",
    "ListResourceTemplates",
    "ListResources",
    "ListTools",
    "Message",
    "ReadResource",
    "Reconnect",
    "SetLogLevel",
    "SetRoots",
    "Subscribe",
]


@attrs.frozen
class ListTools:
    pass


@attrs.frozen(kw_only=True)
class CallTool:
    name: str
    arguments: JSONObject
    progress: ProgressHandler | None = None
    replay: bool | None = None
    timeout: float = math.inf
    """The call's time limit in seconds; the actor bounds the whole call by it (waits for a
    session, the request, a replay), so that when it expires the error says what happened."""


@attrs.frozen
class ListResources:
    pass


@attrs.frozen
class ListResourceTemplates:
    pass


@attrs.frozen(kw_only=True)
class ReadResource:
    uri: str


@attrs.frozen(kw_only=True)
class Subscribe:
    uri: str
    subscribe: bool


@attrs.frozen
class ListPrompts:
    pass


@attrs.frozen(kw_only=True)
class GetPrompt:
    name: str
    arguments: Mapping[str, str]


@attrs.frozen(kw_only=True)
class SetRoots:
    roots: tuple[McpRoot, ...]


@attrs.frozen(kw_only=True)
class SetLogLevel:
    level: str


@attrs.frozen
class Reconnect:
    pass


@attrs.frozen
class GetServerInfo:
    pass


Message = (
    ListTools
    | CallTool
    | ListResources
    | ListResourceTemplates
    | ReadResource
    | Subscribe
    | ListPrompts
    | GetPrompt
    | SetRoots
    | SetLogLevel
    | Reconnect
    | GetServerInfo
)
