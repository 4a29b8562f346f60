"""Agents served to standard clients (the ``serve`` extra): ``kova.serve.app(agent)`` is an
ASGI application with OpenAI-compatible, AG-UI and MCP routes; ``kova serve`` runs it on
Hypercorn's trio worker; :func:`serve_mcp_stdio` (``kova mcp serve``) offers agents as MCP
tools over stdio. See ``docs/serve.md``.
"""

# ruff: noqa: E402 (the extra is checked before the imports that need it)
from .._extras import require_extra as _require_extra

_require_extra("serve", "kova.serve")

from ._app import app as app
from ._mcp import serve_mcp_stdio as serve_mcp_stdio

__all__ = ["app", "serve_mcp_stdio"]
