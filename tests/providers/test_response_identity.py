"""Every codec says who answered: ``ModelResponse.model`` and ``.id`` from the wire, streamed
or not (the fakes send what each API sends), ``None`` where a provider sends none."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from kova.agent._accumulate import ResponseAccumulator
from kova.providers import ChatRequest, ModelResponse, StopEvent
from kova.providers.bedrock import BedrockConfig, BedrockProvider
from kova.testing import Script, open_bedrock_server, reply_text

from .test_stream_cancel import FAKES

if TYPE_CHECKING:
    from kova.providers import Provider

# name -> (model the fake names, a check of the id it sends)
EXPECTED = {
    "openai": ("m", lambda id_: id_ is not None and id_.startswith("chatcmpl-")),
    "anthropic": ("m", lambda id_: id_ is not None and id_.startswith("msg_")),
    "gemini": ("m", lambda id_: isinstance(id_, str) and id_),
    "ollama": ("m", lambda id_: id_ is None),  # Ollama sends no id
}


async def _both(provider: Provider) -> tuple[ModelResponse, ModelResponse, list[StopEvent]]:
    async with provider.open():
        called = await provider.chat_completion(ChatRequest.of("hi"))
        accumulator = ResponseAccumulator()
        stops: list[StopEvent] = []
        async with provider.chat_completion_stream(ChatRequest.of("hi")) as batches:
            async for batch in batches:
                accumulator.feed(batch)
                stops += [event for event in batch if isinstance(event, StopEvent)]
        return called, accumulator.finish(), stops


@pytest.mark.parametrize("name", list(FAKES))
async def test_the_response_names_its_model_and_id(name: str) -> None:
    open_server, build = FAKES[name]
    model, id_ok = EXPECTED[name]
    async with open_server(Script([reply_text("one"), reply_text("two")])) as server:
        called, streamed, stops = await _both(build(server.base_url))
    assert called.text == "one"
    assert streamed.text == "two"
    for response in (called, streamed):
        assert response.model is not None
        assert response.model.startswith(model)
        assert id_ok(response.id), response.id
    assert [stop.model for stop in stops] == [streamed.model]
    if name != "ollama":
        assert called.id != streamed.id  # two answers, two ids


async def test_the_responses_api_names_its_model_and_id() -> None:
    from kova.providers.openai import OpenAiResponsesConfig, OpenAiResponsesProvider
    from kova.testing import open_responses_server

    async with open_responses_server(Script([reply_text("one"), reply_text("two")])) as server:
        provider = OpenAiResponsesProvider(
            OpenAiResponsesConfig(model="m", base_url=server.base_url, api_key="k")
        )
        called, streamed, stops = await _both(provider)
    assert (called.text, streamed.text) == ("one", "two")
    for response in (called, streamed):
        assert response.model is not None
        assert response.model.startswith("m")
        assert response.id is not None
        assert response.id.startswith("resp_")
    assert called.id != streamed.id
    assert [stop.id for stop in stops] == [streamed.id]


async def test_bedrock_sends_neither() -> None:
    async with open_bedrock_server(Script([reply_text("one"), reply_text("two")])) as server:
        provider = BedrockProvider(
            BedrockConfig(
                region="us-east-1",
                model_id="amazon.nova-pro-v1:0",
                endpoint_url=server.base_url,
                **server.credentials,
            )
        )
        called, streamed, _stops = await _both(provider)
    assert (called.model, called.id, streamed.model, streamed.id) == (None, None, None, None)


def test_model_and_id_are_not_part_of_equality() -> None:
    a = reply_text("same")
    b = ModelResponse(
        content=a.content, stop_reason=a.stop_reason, usage=a.usage, model="x", id="y"
    )
    assert a == b
    assert StopEvent(stop_reason=a.stop_reason, model="x") == StopEvent(stop_reason=a.stop_reason)
