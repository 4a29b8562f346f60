"""The codec contract, run against every codec on the seam (see kova.providers._codec).

Each case is a complete recorded stream in the codec's wire format, an error frame in that
format, and malformed/mistyped frames. Every codec must: give the same events whatever the
network splits; deliver the events before an error and then raise the *classified* error;
turn anything malformed into InvalidResponse (never AttributeError/TypeError); and never emit
a TextDelta whose text is not a str.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kova import InvalidResponse, ProviderError, ProviderErrorClass
from kova.providers._sse import SseEvent
from kova.providers.anthropic import AnthropicConfig
from kova.providers.anthropic._codec import AnthropicCodec
from kova.providers.gemini import GeminiConfig
from kova.providers.gemini._codec import GeminiCodec
from kova.providers.gemini._stream import GeminiStreamDecoder
from kova.providers.ollama import OllamaConfig
from kova.providers.ollama._codec import OllamaCodec
from kova.providers.ollama._stream import OllamaStreamDecoder
from kova.providers.openai import OpenAiConfig
from kova.providers.openai._codec import OpenAiCodec
from kova.providers.openai._responses import OpenAiResponsesCodec
from kova.providers.openai._responses_config import OpenAiResponsesConfig
from kova.providers.openai._responses_stream import ResponsesStreamDecoder
from kova.providers.openai._stream import OpenAiStreamDecoder

from ._contract import check_types, split
from ._contract import run as run_stream
from .anthropic.test_anthropic_stream import WIRE_EXAMPLE as ANTHROPIC_STREAM
from .openai.wire_samples import TOOL_CALL_STREAM as OPENAI_STREAM
from .openai_responses.wire_samples import TEXT_STREAM as RESPONSES_TEXT_STREAM
from .openai_responses.wire_samples import TOOL_CALL_STREAM as RESPONSES_STREAM

if TYPE_CHECKING:
    from kova.providers import StreamEvent


def _openai_text(text: str) -> str:
    chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return f"data: {json.dumps(chunk)}\n\n"


OPENAI_TEXT_STREAM = (
    _openai_text("Hel")
    + _openai_text("lo")
    + 'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    + "data: [DONE]\n\n"
)


def _gemini(chunk: object) -> str:
    return f"data: {json.dumps(chunk)}\n\n"


def _ollama(line: object) -> str:
    return json.dumps(line) + "\n"


def _gemini_text(text: str, finish: str | None = None) -> dict[str, object]:
    candidate: dict[str, object] = {"content": {"parts": [{"text": text}], "role": "model"}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate]}


GEMINI_STREAM = (
    _gemini(_gemini_text("Sure, "))
    + _gemini(_gemini_text("it is "))
    + _gemini(
        {
            **_gemini_text("sunny.", "STOP"),
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3},
        }
    )
)


GEMINI_CRLF_STREAM = (
    # As Gemini frames it (CRLF line ends), a signed text part included.
    _gemini(_gemini_text("Sure, "))
    + _gemini(
        {"candidates": [{"content": {"parts": [{"text": "it is ", "thoughtSignature": "c2ln"}]}}]}
    )
    + GEMINI_STREAM.split("\n\n")[2]
    + "\n\n"
).replace("\n", "\r\n")


def _ollama_line(content: str, *, done: bool = False) -> dict[str, object]:
    line: dict[str, object] = {
        "model": "m",
        "created_at": "t",
        "message": {"role": "assistant", "content": content},
        "done": done,
    }
    if done:
        line.update(done_reason="stop", prompt_eval_count=5, eval_count=3)
    return line


OLLAMA_STREAM = (
    _ollama(_ollama_line("Hel"))
    + _ollama(_ollama_line("lo"))
    + _ollama(_ollama_line("", done=True))
)


@attrs.frozen
class Case:
    name: str
    codec: Any
    stream: str
    """A complete stream whose frames are separated by blank lines."""
    error_frame: str
    error_class: ProviderErrorClass
    malformed: tuple[str, ...]
    separator: str = "\n\n"
    """What ends a frame in the wire format (a blank line for SSE, a newline for NDJSON)."""


CASES = [
    Case(
        name="openai",
        codec=OpenAiCodec(OpenAiConfig(model="m", api_key="k")),
        stream=OPENAI_TEXT_STREAM,
        error_frame='data: {"error":{"message":"busy","type":"server_error"}}\n\n',
        error_class=ProviderErrorClass.OVERLOADED,
        malformed=(
            "data: {oops\n\n",
            "data: [1, 2]\n\n",
            'data: {"choices":[{"delta":{"content":5}}]}\n\n',
            'data: {"choices":"x"}\n\n',
            'data: {"choices":[{"delta":"text"}]}\n\n',
            'data: {"choices":[{"delta":{"tool_calls":[7]}}]}\n\n',
        ),
    ),
    Case(
        name="openai-tools",
        codec=OpenAiCodec(OpenAiConfig(model="m", api_key="k")),
        stream=OPENAI_STREAM,
        error_frame='data: {"error":{"message":"slow","code":"rate_limit_exceeded"}}\n\n',
        error_class=ProviderErrorClass.RATE_LIMITED,
        malformed=("data: {oops\n\n",),
    ),
    Case(
        name="openai-responses",
        codec=OpenAiResponsesCodec(OpenAiResponsesConfig(model="m", api_key="k")),
        stream=RESPONSES_STREAM,
        error_frame=(
            "event: error\n"
            'data: {"type":"error","sequence_number":2,"error":{"type":"tokens",'
            '"code":"rate_limit_exceeded","message":"slow","param":null}}\n\n'
        ),
        error_class=ProviderErrorClass.RATE_LIMITED,
        malformed=(
            "event: response.output_text.delta\ndata: {oops\n\n",
            "data: [1, 2]\n\n",
            'data: {"type":"response.output_text.delta","output_index":0,"delta":5}\n\n',
            'data: {"type":"response.function_call_arguments.delta","output_index":9,'
            '"delta":"{"}\n\n',
            'data: {"type":"response.output_item.added","output_index":0,"item":"x"}\n\n',
            'data: {"type":"response.output_item.done","output_index":0,'
            '"item":{"type":"message","content":[{"type":"output_text","text":7}]}}\n\n',
        ),
    ),
    Case(
        name="openai-responses-text",
        codec=OpenAiResponsesCodec(OpenAiResponsesConfig(model="m", api_key="k")),
        stream=RESPONSES_TEXT_STREAM,
        error_frame='data: {"type":"error","code":"server_error","message":"busy"}\n\n',
        error_class=ProviderErrorClass.OVERLOADED,
        malformed=("data: {oops\n\n",),
    ),
    Case(
        name="anthropic",
        codec=AnthropicCodec(AnthropicConfig(model="m", api_key="k")),
        stream=ANTHROPIC_STREAM,
        error_frame=(
            "event: error\n"
            'data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
        ),
        error_class=ProviderErrorClass.OVERLOADED,
        malformed=(
            "event: content_block_delta\ndata: {not json\n\n",
            'event: content_block_start\ndata: {"type":"content_block_start","index":"x"}\n\n',
            'event: content_block_delta\ndata: {"type":"content_block_delta","index":9,'
            '"delta":{"type":"text_delta","text":"x"}}\n\n',
            'event: message_start\ndata: ["not", "an", "object"]\n\n',
        ),
    ),
    Case(
        name="gemini",
        codec=GeminiCodec(GeminiConfig(model="m", api_key="k")),
        stream=GEMINI_STREAM,
        error_frame=_gemini(
            {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}
        ),
        error_class=ProviderErrorClass.RATE_LIMITED,
        malformed=(
            "data: {oops\n\n",
            "data: [1]\n\n",
            _gemini({"candidates": [{"content": {"parts": [{"text": 5}]}}]}),
            _gemini({"candidates": "x"}),
        ),
    ),
    Case(
        name="gemini-crlf",
        codec=GeminiCodec(GeminiConfig(model="m", api_key="k")),
        stream=GEMINI_CRLF_STREAM,
        error_frame=_gemini(
            {"error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}}
        ).replace("\n", "\r\n"),
        error_class=ProviderErrorClass.OVERLOADED,
        malformed=tuple(
            frame.replace("\n", "\r\n")
            for frame in (
                "data: {oops\n\n",
                _gemini({"candidates": [{"content": {"parts": "ab"}}]}),
                _gemini({"candidates": [{"content": {"parts": ["ab"]}}]}),
                _gemini({"candidates": [{"content": "ab"}]}),
                _gemini({"candidates": [{"content": {"parts": [{"text": ["a"]}]}}]}),
            )
        ),
        separator="\r\n\r\n",
    ),
    Case(
        name="ollama",
        codec=OllamaCodec(OllamaConfig(model="m", base_url="http://x")),
        stream=OLLAMA_STREAM,
        error_frame=_ollama({"error": "model is overloaded"}),
        error_class=ProviderErrorClass.OTHER,
        malformed=(
            "{oops\n",
            "[1, 2]\n",
            _ollama({"message": {"role": "assistant", "content": 5}, "done": False}),
            _ollama({"message": "text", "done": False}),
        ),
        separator="\n",
    ),
]


def run(case: Case, pieces: list[bytes]) -> tuple[list[StreamEvent], BaseException | None]:
    return run_stream(case.codec, pieces)


def frames_of(case: Case) -> list[str]:
    return [frame + case.separator for frame in case.stream.split(case.separator) if frame.strip()]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=25))
def test_any_split_gives_the_same_events(case: Case, cuts: list[int]) -> None:
    whole, failure = run(case, [case.stream.encode()])
    assert failure is None
    split_events, split_failure = run(case, split(case.stream.encode(), cuts))
    assert split_failure is None
    assert split_events == whole
    check_types(whole)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_an_error_frame_at_any_position_is_classified_after_the_events_before_it(
    case: Case,
) -> None:
    frames = frames_of(case)
    for position in range(len(frames)):
        before = "".join(frames[:position])
        expected, _ = run(case, [before.encode()]) if before else ([], None)
        body = before + case.error_frame + "".join(frames[position:])
        events, failure = run(case, [body.encode()])
        assert isinstance(failure, ProviderError), (position, failure)
        assert failure.error_class is case.error_class
        assert failure.mid_stream
        assert events == expected
        check_types(events)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_malformed_and_mistyped_frames_are_invalid_responses(case: Case) -> None:
    frames = frames_of(case)
    for bad in case.malformed:
        for position in (0, len(frames) // 2):
            body = "".join(frames[:position]) + bad + "".join(frames[position:])
            events, failure = run(case, [body.encode()])
            assert isinstance(failure, InvalidResponse), (bad, position, failure)
            assert failure.provider == case.codec.name, (bad, failure.provider)
            check_types(events)


@pytest.mark.parametrize(
    ("decoder", "frame", "provider"),
    [
        (OpenAiStreamDecoder(), SseEvent(data="[1]"), "openai"),
        (ResponsesStreamDecoder(endpoint="responses"), SseEvent(data="[1]"), "openai-responses"),
        (GeminiStreamDecoder(), SseEvent(data="[1]"), "gemini"),
        (OllamaStreamDecoder(), "[1]", "ollama"),
    ],
)
def test_a_decoder_names_its_provider_and_the_mistyped_part(
    decoder: Any, frame: object, provider: str
) -> None:
    assert decoder.feed([frame]) == []
    assert isinstance(decoder.error, InvalidResponse)
    assert decoder.error.provider == provider
    assert "of an unexpected type (list)" in str(decoder.error)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_a_stream_cut_before_its_end_is_never_a_short_answer(case: Case) -> None:
    frames = frames_of(case)
    body = "".join(frames[: len(frames) // 2])
    _events, failure = run(case, [body.encode()])
    assert failure is not None


def test_a_token_count_that_is_not_an_integer_counts_as_zero() -> None:
    from kova.providers.bedrock._convert import decode_usage as bedrock_usage
    from kova.providers.gemini._convert import decode_usage as gemini_usage
    from kova.providers.ollama._convert import decode_usage as ollama_usage

    gemini = gemini_usage({"promptTokenCount": True, "candidatesTokenCount": 3})
    assert gemini is not None
    assert (gemini.input_tokens, gemini.output_tokens) == (0, 3)
    ollama = ollama_usage({"prompt_eval_count": "7", "eval_count": 2})
    assert (ollama.input_tokens, ollama.output_tokens) == (0, 2)
    bedrock = bedrock_usage({"inputTokens": False, "outputTokens": 4, "cacheReadInputTokens": 1.5})
    assert (bedrock.input_tokens, bedrock.output_tokens) == (0, 4)
