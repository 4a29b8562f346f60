"""What a type checker sees of ``Agent.run_sync`` / ``resume_sync`` / ``run_structured_sync``:
checked by ``mypy --strict tests/typing``, not run. They take their parameters from the
async methods (kova/agent/_agent.py ``_sync_door``); this fails mypy if one stops being
typed by them (a misspelt keyword accepted, a result's type lost)."""

from __future__ import annotations

from typing import Any, assert_type

import pydantic

from kova import ResponseFormat
from kova.agent import Agent, AgentResponse


class Verdict(pydantic.BaseModel):
    ok: bool


def sync_calls(agent: Agent) -> None:
    assert_type(agent.run_sync("hi", turn_id="t", deps=1), AgentResponse)
    agent.run_sync("hi", turnid="t")  # type: ignore[call-arg]
    agent.run_sync(42)  # type: ignore[arg-type]
    assert_type(agent.resume_sync("hi", None, limits=None), AgentResponse)
    agent.resume_sync("hi", None, buffer=1)  # type: ignore[call-arg]

    value, response = agent.run_structured_sync("is it ok?", Verdict, output_retries=2)
    assert_type(value, Verdict)
    assert_type(response, AgentResponse)
    anything, _ = agent.run_structured_sync("hi", ResponseFormat(name="r", schema={}))
    assert_type(anything, Any)
    agent.run_structured_sync("hi", Verdict, retries=2)  # type: ignore[call-overload]
