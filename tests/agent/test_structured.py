"""Output retries: run_structured re-asks the model with the validation error."""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel
from typing_extensions import TypedDict  # pydantic wants this one before Python 3.12

import kova
from kova import Message, Role
from kova.agent import AgentBuilder
from kova.agent._structured import parse_partial_json
from kova.testing import ScriptedProvider, StreamReply, reply_text

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


# -- any type pydantic validates, raw schemas checked, streamed values --------------------


@dataclasses.dataclass
class City:
    name: str
    population: int


class Forecast(TypedDict):
    city: str
    high: float


@pytest.mark.parametrize(
    ("output", "answer", "expected"),
    [
        (City, {"name": "Oslo", "population": 700000}, City("Oslo", 700000)),
        (Forecast, {"city": "Oslo", "high": -3.0}, {"city": "Oslo", "high": -3.0}),
        (list[City], {"result": [{"name": "Oslo", "population": 1}]}, [City("Oslo", 1)]),
        (int, {"result": 42}, 42),
        (str, {"result": "billing"}, "billing"),
        (Literal["a", "b"], {"result": "b"}, "b"),
        (Route | None, {"result": None}, None),
    ],
    ids=["dataclass", "typeddict", "list", "int", "str", "literal", "optional-model"],
)
async def test_any_type_pydantic_validates_is_an_output(
    output: object, answer: object, expected: object
) -> None:
    provider = ScriptedProvider([reply_text(json.dumps(answer))])
    async with AgentBuilder().provider(provider).build() as agent:
        value, response = await agent.run_structured(HISTORY, output)
    assert value == expected
    assert response.output_retries == 0
    sent = provider.requests[0].config.response_format
    assert sent is not None
    assert sent.schema["type"] == "object"  # every provider takes an object at the root
    assert sent.schema["additionalProperties"] is False


async def test_a_non_object_type_is_asked_for_inside_result_and_re_asked_when_bare() -> None:
    provider = ScriptedProvider([reply_text("[1, 2]"), reply_text('{"result": [1, 2]}')])
    async with AgentBuilder().provider(provider).build() as agent:
        value, response = await agent.run_structured(HISTORY, list[int])
    assert value == [1, 2]
    assert response.output_retries == 1
    sent = provider.requests[0].config.response_format
    assert sent is not None
    assert sent.name == "list_int"
    assert sent.schema["properties"] == {"result": {"type": "array", "items": {"type": "integer"}}}
    assert sent.schema["required"] == ["result"]
    assert '{"result": ...}' in provider.requests[1].messages[-1].text


async def test_a_dataclass_answer_that_breaks_its_type_is_re_asked() -> None:
    provider = ScriptedProvider(
        [
            reply_text('{"name": "Oslo", "population": "many"}'),
            reply_text('{"name": "Oslo", "population": 5}'),
        ]
    )
    async with AgentBuilder().provider(provider).build() as agent:
        value, response = await agent.run_structured(HISTORY, City)
    assert value == City("Oslo", 5)
    assert response.output_retries == 1
    assert "population: Input should be a valid integer" in provider.requests[1].messages[-1].text


ROUTE_SCHEMA = {
    "type": "object",
    "properties": {"route": {"enum": ["billing", "tech"]}, "confidence": {"type": "number"}},
    "required": ["route", "confidence"],
    "additionalProperties": False,
}


async def test_a_raw_schema_answer_that_breaks_the_schema_is_re_asked() -> None:
    answers = ['{"route": "sales"}', '{"route": "tech", "confidence": 0.5}']
    provider = ScriptedProvider([reply_text(answer) for answer in answers])
    async with AgentBuilder().provider(provider).build() as agent:
        value, response = await agent.run_structured(
            HISTORY, kova.ResponseFormat.named("route", ROUTE_SCHEMA)
        )
    assert value == {"route": "tech", "confidence": 0.5}
    assert response.output_retries == 1
    feedback = provider.requests[1].messages[-1].text
    assert "does not match the schema 'route'" in feedback
    assert "$.route: 'sales' is not one of ['billing', 'tech']" in feedback
    assert "'confidence' is a required property" in feedback


async def test_a_raw_schema_answer_still_invalid_raises_with_the_problems() -> None:
    provider = ScriptedProvider([reply_text('{"route": 1}')])
    async with AgentBuilder().provider(provider).output_retries(0).build() as agent:
        with pytest.raises(kova.StructuredOutputError, match="does not match the schema"):
            await agent.run_structured(HISTORY, kova.ResponseFormat.named("route", ROUTE_SCHEMA))


async def test_an_output_pydantic_cannot_validate_is_a_type_error() -> None:
    class Opaque:
        pass

    async with AgentBuilder().provider(ScriptedProvider([])).build() as agent:
        with pytest.raises(TypeError, match="a type pydantic can validate"):
            await agent.run_structured(HISTORY, Opaque)


async def test_stream_structured_yields_partial_values_then_the_validated_one() -> None:
    answer = json.dumps({"route": "billing", "confidence": 0.9})
    provider = ScriptedProvider([StreamReply(response=reply_text(answer), chunk_chars=4)])
    async with AgentBuilder().provider(provider).build() as agent:
        async with agent.stream_structured(HISTORY, Route) as stream:
            values = [value async for value in stream]
    *partials, final = values
    assert final == Route(route="billing", confidence=0.9)
    assert stream.value == final
    assert stream.response.text == answer
    assert stream.response.new_messages[-1].text == answer
    assert partials[0] == {}
    assert {"route": "billi"} in partials  # a string arrives as it is written
    assert partials[-1] == {"route": "billing", "confidence": 0.9}
    assert all(a != b for a, b in itertools.pairwise(partials))  # each one new


async def test_stream_structured_re_asks_and_streams_again() -> None:
    provider = ScriptedProvider(
        [
            StreamReply(response=reply_text('{"result": ["x"]}'), chunk_chars=5),
            StreamReply(response=reply_text('{"result": [1, 2]}'), chunk_chars=5),
        ]
    )
    async with AgentBuilder().provider(provider).build() as agent:
        async with agent.stream_structured(HISTORY, list[int]) as stream:
            values = [value async for value in stream]
    assert values[-1] == [1, 2]
    assert ["x"] in values  # the invalid attempt's partial values came too
    assert stream.response.output_retries == 1
    assert len(stream.response.new_messages) == 3


async def test_stream_structured_raises_the_final_failure_from_the_iteration() -> None:
    provider = ScriptedProvider([reply_text("nope")])
    async with AgentBuilder().provider(provider).output_retries(0).build() as agent:
        async with agent.stream_structured(HISTORY, Route) as stream:
            with pytest.raises(kova.StructuredOutputError):
                async for _ in stream:
                    pass
        with pytest.raises(RuntimeError, match="not finished"):
            _ = stream.response


async def test_leaving_stream_structured_early_cancels_the_turn() -> None:
    answer = json.dumps({"route": "billing", "confidence": 0.9})
    provider = ScriptedProvider(
        [StreamReply(response=reply_text(answer), chunk_chars=2)], batch_size=1, batch_delay=1.0
    )
    async with AgentBuilder().provider(provider).build() as agent:
        async with agent.stream_structured(HISTORY, Route) as stream:
            async for value in stream:
                assert value == {}
                break
        assert not stream.done


async def test_stream_structured_passes_its_buffer_to_the_stream_under_a_cancel_token() -> None:
    """With a token the turn runs in a task of its own, ``buffer`` events ahead (as for
    ``stream``): a negative one is refused there, which only a buffer passed on can be. The
    refusal (no KovaError) is raised every time: it was lost about half the time when the
    attempts' task closed its channel with a checkpoint (trio schedules in random order)."""
    replies = [reply_text(GOOD)]
    async with AgentBuilder().provider(ScriptedProvider(replies)).build() as agent:
        token = kova.agent.CancelToken()
        for _ in range(12):
            with pytest.raises(ValueError, match="buffer must be at least 0"):
                async with agent.stream_structured(HISTORY, Route, cancel=token, buffer=-1) as s:
                    _ = [value async for value in s]
        async with agent.stream_structured(HISTORY, Route, cancel=token, buffer=0) as stream:
            _ = [value async for value in stream]
    assert stream.value == Route(route="billing", confidence=0.9)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", None),
        ("{", {}),
        ('{"a', {}),
        ('{"a"', {}),
        ('{"a":', {}),
        ('{"a": "x\\', {"a": "x"}),
        ('{"a": "x\\u00', {"a": "x"}),
        ('{"a": "x\\u00e9', {"a": "xé"}),
        ('{"a": tr', {}),
        ('{"a": true, "b": [1, 2.', {"a": True, "b": [1, 2]}),
        ('{"a": -', {}),
        ('{"a": 1e', {"a": 1}),
        ('[{"a": null}, {"b"', [{"a": None}, {}]),
        ('```json\n{"a": 1', {"a": 1}),
        ("hello", None),
        ('{"a": 1}', {"a": 1}),
    ],
)
def test_parse_partial_json(text: str, expected: object) -> None:
    assert parse_partial_json(text) == expected


@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=5), children, max_size=4)
        ),
        max_leaves=12,
    )
)
def test_every_prefix_of_json_parses_and_the_whole_is_exact(value: object) -> None:
    text = json.dumps(value)
    for cut in range(len(text)):
        parse_partial_json(text[:cut])  # never raises
    assert parse_partial_json(text) == json.loads(text)


@pytest.mark.parametrize("wrapped", [False, True])
async def test_an_answer_holding_a_lone_surrogate_escape_validates(wrapped: bool) -> None:
    # Half an emoji in the model's JSON (the escape \ud83d alone): pydantic's JSON reader
    # refused it, so the answer was re-asked and failed as "Invalid JSON: unexpected end of
    # hex escape"; kova reads it with json, as it reads such text everywhere else.
    answer = '{"result": ["half \\ud83d"]}' if wrapped else '{"name": "half \\ud83d"}'
    output: Any = list[str] if wrapped else _Named
    provider = ScriptedProvider([reply_text(answer)])
    async with AgentBuilder().provider(provider).output_retries(0).build() as agent:
        value, response = await agent.run_structured("hi", output)
    assert value == (["half \ud83d"] if wrapped else _Named(name="half \ud83d"))
    assert response.output_retries == 0


class _Named(BaseModel):
    name: str
