"""Agent turns on Temporal: each model call and tool call an activity, the turn a workflow.

Importing this package imports ``temporalio`` (``pip install 'kova-sdk[temporal]'``);
``import kova`` alone never does. See docs/durable.md.

On the worker side, :func:`worker` returns a Temporal worker that runs
:class:`AgentWorkflow` and the activities of the agents it holds; on the client side,
:func:`run_turn` runs a turn and returns its :class:`~kova.agent.AgentResponse`, and
:func:`start_turn` returns the workflow's handle, for a turn that may wait for approvals
(:func:`pending`, :func:`decide`, :func:`response`) or whose live :func:`events` are read;
:func:`run_structured` (or ``start_turn(..., output=)`` and :func:`structured_output`) is
``Agent.run_structured`` as one workflow.
"""

# ruff: noqa: E402 (the extra is checked before the imports that need it)
from .._extras import require_extra as _require_extra

_require_extra("temporal", "kova.temporal")

# The rest loads on first use (PEP 562): ``_workflow`` (pure: no trio, no httpx2, what a
# Replayer or a workflow of yours imports) must not bring the worker in with the package.
from typing import TYPE_CHECKING as _TYPE_CHECKING

from .._lazy import lazy_names as _lazy_names

if _TYPE_CHECKING:
    from ._client import TurnEvent as TurnEvent
    from ._client import TurnFailedError as TurnFailedError
    from ._client import decide as decide
    from ._client import events as events
    from ._client import pending as pending
    from ._client import response as response
    from ._client import run_structured as run_structured
    from ._client import run_turn as run_turn
    from ._client import start_turn as start_turn
    from ._client import structured_output as structured_output
    from ._payloads import PAYLOAD_LIMIT as PAYLOAD_LIMIT
    from ._payloads import PayloadTooLargeError as PayloadTooLargeError
    from ._payloads import model_activity as model_activity
    from ._payloads import tool_activity as tool_activity
    from ._worker import worker as worker
    from ._workflow import AgentWorkflow as AgentWorkflow

__all__ = [
    "AgentWorkflow",
    "PAYLOAD_LIMIT",
    "PayloadTooLargeError",
    "TurnEvent",
    "TurnFailedError",
    "decide",
    "events",
    "model_activity",
    "pending",
    "response",
    "run_structured",
    "run_turn",
    "start_turn",
    "structured_output",
    "tool_activity",
    "worker",
]

_WHERE: dict[str, str] = {
    "AgentWorkflow": "._workflow",
    "PAYLOAD_LIMIT": "._payloads",
    "PayloadTooLargeError": "._payloads",
    "TurnEvent": "._client",
    "TurnFailedError": "._client",
    "decide": "._client",
    "events": "._client",
    "model_activity": "._payloads",
    "pending": "._client",
    "response": "._client",
    "run_structured": "._client",
    "run_turn": "._client",
    "start_turn": "._client",
    "structured_output": "._client",
    "tool_activity": "._payloads",
    "worker": "._worker",
}
"""Where each exported name lives."""


__getattr__, __dir__ = _lazy_names(__name__, _WHERE)
