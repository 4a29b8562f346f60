"""OpenTelemetry for kova: spans and metrics with the GenAI semantic conventions.

Needs the ``otel`` extra (``pip install kova-sdk[otel]``). :class:`OtelSubscriber` turns the
event stream into spans and metrics through the OpenTelemetry *API*; with no arguments it
uses the global tracer and meter providers. Attach it to one hub
(``agent.telemetry.subscribe(OtelSubscriber(...))``) or to every hub in the process with
:func:`instrument` (which :meth:`~kova.telemetry.TelemetryConfig.init` calls when it
installs an exporter). Nothing is attached by itself: kova reads no OpenTelemetry global to
decide whether to record.

A turn becomes this tree (names and attributes from the GenAI conventions; MCP requests
from the MCP conventions)::

    invoke_agent {agent}          INTERNAL  gen_ai.operation.name=invoke_agent
    ├── chat {model}              CLIENT    gen_ai.operation.name=chat (one per provider call;
    │                                       retries are span events named "retry")
    └── execute_tool {name}       INTERNAL  gen_ai.operation.name=execute_tool
        ├── tools/call {name}     CLIENT    mcp.method.name=tools/call
        └── invoke_agent {inner}  INTERNAL  an agent used as a tool (agent.as_tool()):
                                            its own tree, nested to any depth

Parents are set explicitly from the events' ids (a streamed turn's tool call runs in a
task of its own, whose context trio copied when the call started); the turn's own parent is
whatever span is current where the turn runs. No prompt, completion, tool argument or result
is recorded unless ``capture_content=True``.
"""

# ruff: noqa: E402 (the extra is checked before the imports that need it)
from .._extras import require_extra as _require_extra

_require_extra("otel", "kova.telemetry.otel")

from ._otel import PROVIDER_NAMES as PROVIDER_NAMES
from ._otel import OtelSubscriber as OtelSubscriber
from ._otel import instrument as instrument
from ._otel import observe_mailboxes as observe_mailboxes
from ._otel import uninstrument as uninstrument

__all__ = ["OtelSubscriber", "PROVIDER_NAMES", "instrument", "observe_mailboxes", "uninstrument"]
