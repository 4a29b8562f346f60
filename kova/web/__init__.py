"""kova's live web view: agent events streamed to a page over WebSocket (the ``ws`` extra).

``async with kova.web.open_event_server() as server:`` serves a page and its WebSocket on
loopback; ``server.relay(events)`` publishes a streamed turn, and
``server.approval_handler()`` asks the people on the page to approve tool calls. The message
schema is documented in ``docs/web.md``.
"""

# ruff: noqa: E402 (the extra is checked before the imports that need it)
from .._extras import require_extra as _require_extra

_require_extra("ws", "kova.web")  # one line naming the extra, not a failure when a page connects

from ._asgi import open_event_server as open_event_server
from ._schema import PROTOCOL_VERSION as PROTOCOL_VERSION
from ._server import EventServer as EventServer
from ._server import WebApproval as WebApproval
from ._server import WebRequest as WebRequest

__all__ = [
    "EventServer",
    "PROTOCOL_VERSION",
    "WebApproval",
    "WebRequest",
    "open_event_server",
]
