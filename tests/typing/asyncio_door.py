"""What a type checker sees of kova.asyncio's bridged agent: checked by ``mypy --strict
tests/typing`` (``python3 dev.py check``, CI), not run. The bridged agent's methods take
their parameters from the agent's own (kova/asyncio/_agent.py ``_forwarded``); this file
fails mypy if a method stops being typed by them: a misspelt keyword is no longer refused
(its ``type: ignore`` would go unused) or a result loses its type (``assert_type``)."""

from __future__ import annotations

from typing import Any, assert_type

import pydantic

import kova.asyncio
from kova import ResponseFormat
from kova.agent import AgentResponse


class Route(pydantic.BaseModel):
    route: str


async def bridged_calls(bridged: kova.asyncio.AsyncioAgent) -> None:
    assert_type(await bridged.run("hi", turn_id="t", deps=1), AgentResponse)
    await bridged.run("hi", turnid="t")  # type: ignore[call-arg]
    await bridged.run(42)  # type: ignore[arg-type]
    assert_type(await bridged.resume("hi", None, limits=None), AgentResponse)
    await bridged.resume("hi", None, buffer=1)  # type: ignore[call-arg]

    value, response = await bridged.run_structured("hi", Route, output_retries=2)
    assert_type(value, Route)
    assert_type(response, AgentResponse)
    anything, _ = await bridged.run_structured("hi", ResponseFormat(name="r", schema={}))
    assert_type(anything, Any)
    await bridged.run_structured("hi", Route, retries=2)  # type: ignore[call-overload]

    events = bridged.stream("hi", buffer=2)
    assert_type(events, kova.asyncio.AgentEventStream)
    bridged.stream("hi", bufer=2)  # type: ignore[call-arg]

    routes = bridged.stream_structured("hi", Route, buffer=2)
    assert_type(routes, kova.asyncio.StructuredValueStream[Route])
    assert_type(routes.value, Route)
    shapes = bridged.stream_structured("hi", ResponseFormat(name="r", schema={}))
    assert_type(shapes, kova.asyncio.StructuredValueStream[Any])
    bridged.stream_structured("hi", Route, limit=1)  # type: ignore[call-overload]


def bare_annotation(values: kova.asyncio.StructuredValueStream) -> Any:
    """The class written without its parameter still means ``[Any]``, as before it had one."""
    return values.value
