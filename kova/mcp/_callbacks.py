"""What an MCP server asks of the client: sampling, elicitation and roots, and the log
messages it sends.

The ``mcp`` client calls these from the session's task group, while the connection actor's
handler tasks serve the host's requests. They read only the immutable settings and the state
the client shares (the roots), so they need no message to the actor.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

import mcp_types as mt

from .._log import get_logger
from .._models import ChatRequest
from .._observe import HOST_CODE_FAULTS
from .._record import Record, evolve
from . import _convert
from ._types import McpLogMessage

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp.client.context import ClientRequestContext

    from ._state import ConnectionSettings, SharedState

__all__ = ["ServerCallbacks", "call_host"]

log = get_logger(__name__)

_LOG_LEVELS = {
    "debug": "debug",
    "info": "info",
    "notice": "info",
    "warning": "warning",
    "error": "error",
    "critical": "error",
    "alert": "error",
    "emergency": "error",
}
"""MCP's syslog levels as kova's logging levels (the event keeps the server's own level)."""


async def call_host(
    what: str, connection: str, function: Callable[..., object], *args: object
) -> bool:
    """Call the host's ``function(*args)`` (sync, or async and awaited) from the connection's
    own tasks. What it raises is logged as ``mcp.callback.failed`` and goes no further: the
    session that called it, and every call in flight on it, carry on. Returns whether it
    returned normally."""
    try:
        result = function(*args)
        if inspect.isawaitable(result):
            await result
    except HOST_CODE_FAULTS as exc:
        log.warning("mcp.callback.failed", connection=connection, callback=what, error=repr(exc))
        return False
    return True


class ServerCallbacks(Record):
    """The ``mcp`` client's callbacks for one connection (every session of it)."""

    settings: ConnectionSettings
    shared: SharedState

    async def on_log(self, params: mt.LoggingMessageNotificationParams) -> None:
        """A server log message: logged at the matching level, then given to the host's
        ``on_log`` handler, if any."""
        emit = getattr(log, _LOG_LEVELS.get(params.level, "info"))
        emit(
            "mcp.server.log",
            connection=self.shared.name,
            server_level=params.level,
            logger=params.logger,
            data=params.data,
        )
        handler = self.settings.on_log
        if handler is not None:
            message = McpLogMessage(level=params.level, logger=params.logger, data=params.data)
            await call_host("on_log", self.shared.name, handler, message)

    async def list_roots(self, context: ClientRequestContext) -> mt.ListRootsResult:
        """``roots/list``: the roots the host set last."""
        return mt.ListRootsResult(
            roots=[mt.Root(uri=root.uri, name=root.name) for root in self.shared.roots]  # type: ignore[arg-type]
        )

    async def sample(
        self, context: ClientRequestContext, params: mt.CreateMessageRequestParams
    ) -> mt.CreateMessageResult | mt.ErrorData:
        """``sampling/createMessage``: one call of the host's sampling provider; a kova
        error goes back to the server as a JSON-RPC error."""
        provider = self.settings.sampling
        assert provider is not None
        messages, config = _convert.sampling_request(params)
        if self.settings.sampling_model is not None:
            config = evolve(config, model=self.settings.sampling_model)
        try:
            async with provider.open():
                response = await provider.chat_completion(
                    ChatRequest(messages=messages, config=config)
                )
        except HOST_CODE_FAULTS as exc:  # a KovaError, or a fault of the host's provider
            # The server asked; it gets a JSON-RPC error back and the connection carries on.
            log.warning("mcp.sampling.failed", provider=provider.name, error=repr(exc))
            return mt.ErrorData(code=mt.INTERNAL_ERROR, message=f"sampling failed: {exc}")
        model = config.model or self.settings.sampling_model or provider.name
        log.info("mcp.sampling.answered", provider=provider.name, messages=len(messages))
        return _convert.sampling_result(response, model=model)

    async def elicit(
        self, context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult | mt.ErrorData:
        """``elicitation/create``: the host's elicitation handler answers."""
        handler = self.settings.elicitation
        assert handler is not None
        request = _convert.elicitation_request(params)
        try:
            response = await handler(request)
        except HOST_CODE_FAULTS as exc:
            # The server asked; it gets a JSON-RPC error back and the connection carries on.
            log.warning(
                "mcp.callback.failed",
                connection=self.shared.name,
                callback="elicitation",
                error=repr(exc),
            )
            return mt.ErrorData(code=mt.INTERNAL_ERROR, message=f"elicitation failed: {exc!r}")
        return _convert.elicitation_result(response, request)
