"""One function per MCP request the connection actor sends: the ``mcp`` package's call and
the conversion of its answer to kova's values. Each takes the live ``mcp`` client."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

import mcp_types as mt

from .._log import get_logger
from . import _convert
from ._callbacks import call_host
from ._types import McpProgress, McpServerInfo

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Mapping

    from mcp import Client
    from mcp.shared.dispatcher import ProgressFnT

    from .._models import JSONObject, ToolDefinition, ToolResult
    from ._types import (
        McpPrompt,
        McpPromptResult,
        McpResource,
        McpResourceContents,
        McpResourceTemplate,
        ProgressHandler,
    )

log = get_logger(__name__)

_T = TypeVar("_T")


class _Paginated(Protocol):
    @property
    def next_cursor(self) -> str | None: ...


_Page = TypeVar("_Page", bound=_Paginated)

MAX_PAGES = 1000
"""A bound on ``*/list`` pagination, so a server whose cursors never end cannot hang us."""


# Roots, logging/setLevel and resources/(un)subscribe are deprecated as of protocol
# 2026-07-28 (SEP-2577, SEP-2575: listen streams). kova speaks the handshake-era versions,
# where they are how a client offers roots and asks for log messages and resource updates,
# so it sends the messages itself instead of calling the package's deprecated wrappers.


async def roots_changed(client: Client) -> None:
    await client.session.send_notification(mt.RootsListChangedNotification())


async def set_log_level(client: Client, level: str) -> None:
    await client.session.send_request(
        mt.SetLevelRequest(params=mt.SetLevelRequestParams(level=level)),  # type: ignore[arg-type]
        mt.EmptyResult,
    )


async def subscribe(client: Client, uri: str, *, subscribe: bool) -> None:
    request: mt.SubscribeRequest | mt.UnsubscribeRequest = (
        mt.SubscribeRequest(params=mt.SubscribeRequestParams(uri=uri))
        if subscribe
        else mt.UnsubscribeRequest(params=mt.UnsubscribeRequestParams(uri=uri))
    )
    await client.session.send_request(request, mt.EmptyResult)


def server_info(client: Client) -> McpServerInfo:
    info = client.server_info
    return McpServerInfo(
        name=info.name if info is not None else "",
        version=info.version if info is not None else "",
        instructions=client.instructions,
        protocol_version=client.protocol_version,
    )


async def all_pages(
    fetch: Callable[[str | None], Awaitable[_Page]], items: Callable[[_Page], Iterable[_T]]
) -> tuple[_T, ...]:
    """Every item of a paginated MCP list (``nextCursor``), up to ``MAX_PAGES`` pages."""
    collected: list[_T] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await fetch(cursor)
        collected.extend(items(page))
        cursor = page.next_cursor
        if cursor is None:
            break
    return tuple(collected)


async def list_tools(client: Client) -> tuple[ToolDefinition, ...]:
    tools = await all_pages(
        lambda cursor: client.list_tools(cursor=cursor), lambda page: page.tools
    )
    usable = []
    for tool in tools:
        if tool.execution is not None and tool.execution.task_support == "required":
            # Task-augmented calls (SEP-1686) are not in the mcp package's client yet, so
            # kova cannot call such a tool: it is left out instead of failing when used.
            log.info("mcp.tool.skipped", tool=tool.name, reason="requires task augmentation")
            continue
        usable.append(_convert.tool_definition(tool))
    return tuple(usable)


async def call_tool(
    client: Client,
    name: str,
    arguments: JSONObject,
    handler: ProgressHandler | None,
    connection: str = "",
) -> ToolResult:
    on_progress: ProgressFnT | None = None
    if handler is not None:
        report = handler

        async def forward(progress: float, total: float | None, message: str | None) -> None:
            update = McpProgress(progress=progress, total=total, message=message)
            await call_host(f"progress of {name!r}", connection, report, update)

        on_progress = forward
    result = await client.call_tool(name, dict(arguments), progress_callback=on_progress)
    return _convert.tool_result(result)


async def list_resources(client: Client) -> tuple[McpResource, ...]:
    return await all_pages(
        lambda cursor: client.list_resources(cursor=cursor),
        lambda page: (_convert.resource(item) for item in page.resources),
    )


async def list_resource_templates(client: Client) -> tuple[McpResourceTemplate, ...]:
    return await all_pages(
        lambda cursor: client.list_resource_templates(cursor=cursor),
        lambda page: (_convert.resource_template(item) for item in page.resource_templates),
    )


async def read_resource(client: Client, uri: str) -> tuple[McpResourceContents, ...]:
    result = await client.read_resource(uri)
    return tuple(_convert.resource_contents(item) for item in result.contents)


async def list_prompts(client: Client) -> tuple[McpPrompt, ...]:
    return await all_pages(
        lambda cursor: client.list_prompts(cursor=cursor),
        lambda page: (_convert.prompt(item) for item in page.prompts),
    )


async def get_prompt(client: Client, name: str, arguments: Mapping[str, str]) -> McpPromptResult:
    result = await client.get_prompt(name, dict(arguments))
    return _convert.prompt_result(result)
