"""The connection actor's messages: a closed set, dispatched with ``match``."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .._record import Record

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


class ListTools(Record):
    pass


class CallTool(Record):
    name: str
    arguments: JSONObject
    progress: ProgressHandler | None = None
    replay: bool | None = None
    timeout: float = math.inf
    """The call's time limit in seconds; the actor bounds the whole call by it (waits for a
    session, the request, a replay), so that when it expires the error says what happened."""


class ListResources(Record):
    pass


class ListResourceTemplates(Record):
    pass


class ReadResource(Record):
    uri: str


class Subscribe(Record):
    uri: str
    subscribe: bool


class ListPrompts(Record):
    pass


class GetPrompt(Record):
    name: str
    arguments: Mapping[str, str]


class SetRoots(Record):
    roots: tuple[McpRoot, ...]


class SetLogLevel(Record):
    level: str


class Reconnect(Record):
    pass


class GetServerInfo(Record):
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
