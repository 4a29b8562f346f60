"""Remote A2A agents as kova tools (the ``serve`` extra, which brings ``a2a-sdk``):
``kova.a2a.RemoteAgent(url).as_tool()`` gives an agent a tool that asks an agent served over
A2A (by ``kova.serve.app`` or anyone else's server). See ``docs/serve.md``.
"""

# ruff: noqa: E402 (the extra is checked before the imports that need it)
from .._extras import require_extra as _require_extra

_require_extra("serve", "kova.a2a")

from ._remote import RemoteAgent as RemoteAgent
from ._remote import RemoteAgentError as RemoteAgentError

__all__ = ["RemoteAgent", "RemoteAgentError"]
