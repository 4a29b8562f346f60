"""Scenario (f): kova's stream codecs alone, body bytes to kova events, no I/O.

The input is the body of the mock server's stream of ``chunks`` content chunks, fed one SSE
event per call (one HTTP chunk each, which is how the transport hands it over), through the
same incremental UTF-8 decoding kova's transport does, the SSE framing and the provider's
decoder. The floor reference is
the floor client's own parse loop (split on blank lines, ``json.loads`` each ``data:``) over
the same pieces as bytes.
"""

from __future__ import annotations

import gc
import json
import time
from typing import Any

import payloads

_SEPARATOR = {"gemini": b"\r\n\r\n", "ollama": b"\n"}
"""How a format ends one event (SSE: a blank line; Gemini writes CRLFs; Ollama: a line)."""


def _pieces(api: str, n: int) -> list[bytes]:
    body = payloads.sse_body(api, n)
    separator = _SEPARATOR.get(api, b"\n\n")
    return [p + separator for p in body.split(separator) if p]


def _floor_text(api: str, obj: Any) -> str | None:
    """The answer text of one parsed event, for the formats beyond OpenAI and Anthropic."""
    if api == "gemini":
        parts = obj["candidates"][0]["content"]["parts"]
        return "".join(p.get("text", "") for p in parts if not p.get("thought")) or None
    text: str | None = obj["message"].get("content")
    return text or None


def _measure(fn: Any, n: int, repeats: int) -> dict[str, Any]:
    fn()  # warm-up
    rates = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.process_time()
        fn()
        rates.append(n / (time.process_time() - t0))
    return {"events_per_s": rates, "chunks": n}


def floor_codec(size: dict[str, Any]) -> dict[str, Any]:
    api, n = size["api"], size["chunks"]
    pieces = _pieces(api, n)
    openai = api == "openai"
    responses = api == "responses"
    if api in _SEPARATOR:
        return _measure(_floor_other(api, pieces, n), n, size["repeats"])

    def run() -> None:
        loads = json.loads
        buffer = b""
        chars = 0
        for chunk in pieces:
            buffer += chunk
            *events, buffer = buffer.split(b"\n\n")
            for event in events:
                start = event.find(b"data: ")
                if start < 0:
                    continue
                data = event[start + 6 :]
                if data == b"[DONE]":
                    continue
                obj = loads(data)
                if openai:
                    choices = obj["choices"]
                    if choices:
                        text = choices[0]["delta"].get("content")
                        if text:
                            chars += len(text)
                elif responses:
                    if obj["type"] == "response.output_text.delta":
                        chars += len(obj["delta"])
                elif obj["type"] == "content_block_delta":
                    chars += len(obj["delta"]["text"])
        assert chars == len(payloads.answer_text(n))

    return _measure(run, n, size["repeats"])


def _floor_other(api: str, pieces: list[bytes], n: int) -> Any:
    separator = _SEPARATOR[api]
    prefix = 6 if api == "gemini" else 0  # "data: "

    def run() -> None:
        loads = json.loads
        buffer = b""
        chars = 0
        for chunk in pieces:
            buffer += chunk
            *events, buffer = buffer.split(separator)
            for event in events:
                if event:
                    text = _floor_text(api, loads(event[prefix:]))
                    if text:
                        chars += len(text)
        assert chars == len(payloads.answer_text(n))

    return run


def kova_codec(size: dict[str, Any]) -> dict[str, Any]:
    from kova._models import TextDelta

    api, n = size["api"], size["chunks"]
    pieces = _pieces(api, n)
    expect = len(payloads.answer_text(n))

    from kova.providers import NdjsonFramer, SseFramer

    Framer: Any = SseFramer
    Decoder: Any
    if api == "openai":
        from kova.providers.openai._stream import OpenAiStreamDecoder as Decoder
    elif api == "gemini":
        from kova.providers.gemini._stream import GeminiStreamDecoder as Decoder
    elif api == "ollama":
        from kova.providers.ollama._stream import OllamaStreamDecoder as Decoder

        Framer = NdjsonFramer
    elif api == "responses":
        from functools import partial

        from kova.providers.openai._responses_stream import ResponsesStreamDecoder

        Decoder = partial(ResponsesStreamDecoder, endpoint="http://bench")
    else:
        from kova.providers.anthropic._stream import AnthropicStreamDecoder as Decoder

    def run() -> None:
        # Exactly what the HTTP provider does per network read: frame, then decode.
        framer = Framer()
        decoder = Decoder()
        chars = 0
        for chunk in pieces:
            frames = framer.feed(chunk)
            for event in decoder.feed(frames) if frames else ():
                if type(event) is TextDelta:
                    chars += len(event.text)
        for event in [*decoder.feed(framer.finish()), *decoder.finish()]:
            if type(event) is TextDelta:
                chars += len(event.text)
        assert decoder.error is None, decoder.error
        assert chars == expect, (chars, expect)

    return _measure(run, n, size["repeats"])
