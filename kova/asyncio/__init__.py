"""kova from asyncio: FastAPI on uvicorn, aiohttp, Django's async views, notebooks.

kova runs on trio; under asyncio it runs as one trio *guest run* per loop, shared by every
caller, which kova starts and stops itself::

    async with kova.asyncio.open_agent(agent) as bridged:
        response = await bridged.run("Weather in Oslo?")
        async for event in bridged.stream(history):
            ...

Results and errors come back as the same kova types; cancelling the asyncio caller cancels
the turn, and ``CancelledError`` arrives once the turn has stopped everything it started.
Tools written for asyncio libraries are marked ``@tool(runs_on="asyncio")`` and awaited on
the application's loop. See docs/asyncio.md.
"""

from .._guest import AsyncioRuntime as AsyncioRuntime
from .._guest import current_runtime as current_runtime
from .._guest import open_runtime as open_runtime
from ._agent import AgentEventStream as AgentEventStream
from ._agent import AsyncioAgent as AsyncioAgent
from ._agent import StructuredValueStream as StructuredValueStream
from ._agent import open_agent as open_agent
from ._asgi import AsgiBridge as AsgiBridge
from ._asgi import asgi_app as asgi_app
from ._host import on_asyncio as on_asyncio

__all__ = [
    "AgentEventStream",
    "AsgiBridge",
    "AsyncioAgent",
    "AsyncioRuntime",
    "StructuredValueStream",
    "asgi_app",
    "current_runtime",
    "on_asyncio",
    "open_agent",
    "open_runtime",
]
