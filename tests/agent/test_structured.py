"""Output retries: run_structured re-asks the model with the validation error."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

import kova
from kova import Message, Role
from kova.agent import AgentBuilder
from kova.testing import ScriptedProvider, reply_text

HISTORY = [Message.user("route this ticket")]
GOOD = json.dumps({"route": "billing", "confidence": 0.9})


class Route(BaseModel):
    route: str
    confidence: float


async def test_an_invalid_answer_is_re_asked_once_by_default_with_the_error() -> None:
    provider = ScriptedProvider([reply_text('{"route": 3}'), reply_text(GOOD)])
    async with AgentBuilder().provider(provider).build() as agent:
        value, response = await agent.run_structured(HISTORY, Route)
    assert value == Route(route="billing", confidence=0.9)
    assert response.output_retries == 1
    assert response.llm_calls == 2
    assert response.usage.input_tokens == 20  # both calls counted
    second = provider.requests[1].messages
    assert second[-2].text == '{"route": 3}'
    feedback = second[-1]
    assert feedback.role is Role.USER
    assert "route: Input should be a valid string" in feedback.text
    assert "confidence: Field required" in feedback.text
    # The whole exchange is in the response, so the saved history stays consistent.
    assert [m.role for m in response.new_messages] == [Role.ASSISTANT, Role.USER, Role.ASSISTANT]
    assert response.text == GOOD


async def test_a_valid_first_answer_counts_no_retries() -> None:
    provider = ScriptedProvider([reply_text(GOOD)])
    async with AgentBuilder().provider(provider).build() as agent:
        _, response = await agent.run_structured(HISTORY, Route)
    assert response.output_retries == 0
    assert len(response.new_messages) == 1


async def test_the_final_failure_carries_every_raw_attempt() -> None:
    answers = ["not json", '{"route": 1}', '{"route": "x"}']
    provider = ScriptedProvider([reply_text(answer) for answer in answers])
    async with AgentBuilder().provider(provider).output_retries(2).build() as agent:
        with pytest.raises(kova.StructuredOutputError, match="after 3 attempts") as caught:
            await agent.run_structured(HISTORY, Route)
    error = caught.value
    assert error.attempts == tuple(answers)
    assert error.raw_text == answers[-1]
    assert isinstance(error.response, kova.AgentResponse)
    assert error.response.output_retries == 2
    assert error.response.llm_calls == 3


async def test_per_call_output_retries_override_the_builder() -> None:
    provider = ScriptedProvider([reply_text("{oops"), reply_text("{again"), reply_text(GOOD)])
    async with AgentBuilder().provider(provider).output_retries(0).build() as agent:
        value, response = await agent.run_structured(
            HISTORY, kova.ResponseFormat.named("route", {"type": "object"}), output_retries=2
        )
    assert value == json.loads(GOOD)
    assert response.output_retries == 2


async def test_zero_output_retries_gives_up_at_the_first_invalid_answer() -> None:
    provider = ScriptedProvider([reply_text("{oops")])
    async with AgentBuilder().provider(provider).build() as agent:
        with pytest.raises(kova.StructuredOutputError) as caught:
            await agent.run_structured(HISTORY, Route, output_retries=0)
    assert caught.value.attempts == ("{oops",)
    assert len(provider.requests) == 1


@pytest.mark.parametrize(("value", "error"), [(-1, ValueError), ("2", TypeError)])
async def test_bad_per_call_output_retries_fail_before_anything_is_sent(
    value: object, error: type[Exception]
) -> None:
    provider = ScriptedProvider([reply_text(GOOD)])
    async with AgentBuilder().provider(provider).build() as agent:
        with pytest.raises(error, match="output_retries"):
            await agent.run_structured(HISTORY, Route, output_retries=value)  # type: ignore[arg-type]
    assert provider.requests == []


def test_builder_rejects_negative_output_retries() -> None:
    provider = ScriptedProvider([])
    with pytest.raises(kova.BuildError, match="output_retries"):
        AgentBuilder().provider(provider).output_retries(-1).build()
