"""A complete provider in one file: a config, a pure codec and an auth flow on kova's seam.

"Tiny Chat" is a made-up API: ``POST /v1/chat`` takes ``{"model", "prompt"}`` and answers
``{"text", "stop"}``; with ``"stream": true`` it answers NDJSON lines ``{"text": "..."}`` and a
last ``{"done": true, "stop": "..."}``. An ``httpx2.MockTransport`` plays the server here, so
the example runs anywhere; point ``base_url`` at a real server and nothing else changes.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, ClassVar

import attrs
import httpx2
import trio

from kova import InvalidResponse, KovaError, RateLimited, Secret, StopReason, Text, TextDelta
from kova.providers import (
    ChatRequest,
    CodecBase,
    HttpProvider,
    ModelResponse,
    NdjsonFramer,
    StopEvent,
    StreamDecoder,
    StreamEvent,
    WireRequest,
    bearer_auth,
    expect_object,
    expect_str,
    provider_error,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

STOPS = {"end_turn": StopReason.END_TURN, "max_tokens": StopReason.MAX_TOKENS}


class TinyStreamDecoder(StreamDecoder[str]):
    """NDJSON lines in, kova events out. Never raises for what the server said: errors go in
    ``self.error`` and decoding stops (the seam's contract)."""

    def __init__(self) -> None:
        self.error: KovaError | None = None
        self._done = False

    def feed(self, frames: Sequence[str]) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for line in frames:
            if self.error is not None or self._done:
                break
            try:
                item = expect_object(json.loads(line), "a stream line", provider="tiny")
                if "error" in item:  # an error inside a 200 stream: classified like a status
                    self.error = provider_error(
                        str(item["error"]), provider="tiny", error_type="rate_limited"
                    )
                elif item.get("done") is True:
                    self._done = True
                    stop = STOPS.get(
                        str(item.get("stop")), StopReason.unknown(str(item.get("stop")))
                    )
                    events.append(StopEvent(stop_reason=stop))
                else:
                    events.append(TextDelta(text=expect_str(item.get("text"), "text")))
            except (ValueError, InvalidResponse) as exc:
                self.error = (
                    exc
                    if isinstance(exc, InvalidResponse)
                    else InvalidResponse(f"not JSON: {line[:80]!r}", provider="tiny")
                )
        return events

    def finish(self) -> list[StreamEvent]:
        if self.error is None and not self._done:
            self.error = InvalidResponse("the stream ended before done", provider="tiny")
        return []


@attrs.frozen
class TinyCodec(CodecBase[str]):
    """The whole wire format: pure, no I/O, no clock."""

    model: str
    name: ClassVar[str] = "tiny"
    framer: ClassVar[type[NdjsonFramer]] = NdjsonFramer
    stream_content_types: ClassVar[tuple[str, ...]] = ("application/x-ndjson",)

    def encode(self, request: ChatRequest, *, stream: bool) -> WireRequest:
        prompt = "\n".join(message.text for message in request.messages)
        body: dict[str, object] = {"model": request.config.model or self.model, "prompt": prompt}
        if stream:
            body["stream"] = True
        return WireRequest(path="/v1/chat", body=body)  # type: ignore[arg-type]

    def decode(self, body: object) -> ModelResponse:
        answer = expect_object(body, "the response", provider="tiny")
        text = expect_str(answer.get("text"), "text", provider="tiny")
        return ModelResponse(
            content=(Text(text=text),),
            stop_reason=STOPS.get(str(answer.get("stop")), StopReason.END_TURN),
        )

    def stream_decoder(self) -> TinyStreamDecoder:
        return TinyStreamDecoder()


class TinyProvider(HttpProvider[str]):
    """Config + codec + auth: no I/O code of its own."""

    def __init__(self, *, model: str, api_key: str, base_url: str, **options: object) -> None:
        super().__init__(
            TinyCodec(model=model),
            base_url=base_url,
            auth=bearer_auth(Secret(api_key)),
            **options,  # type: ignore[arg-type]
        )


def tiny_server(request: httpx2.Request) -> httpx2.Response:
    """The made-up API, for the example."""
    assert request.headers["authorization"] == "Bearer tiny-key"
    body = json.loads(request.content)
    if body["prompt"] == "busy":
        return httpx2.Response(429, json={"error": "slow down"}, headers={"retry-after": "2"})
    if body.get("stream"):
        lines = [{"text": "Hello"}, {"text": ", world"}, {"done": True, "stop": "end_turn"}]
        content = "".join(json.dumps(line) + "\n" for line in lines)
        return httpx2.Response(
            200, content=content.encode(), headers={"content-type": "application/x-ndjson"}
        )
    return httpx2.Response(200, json={"text": "Hello, world", "stop": "end_turn"})


async def main() -> None:
    provider = TinyProvider(
        model="tiny-1",
        api_key="tiny-key",
        base_url="https://tiny.invalid",
        transport=httpx2.MockTransport(tiny_server),
    )
    print(repr(provider))  # no key in sight
    async with provider.open():
        response = await provider.chat_completion(ChatRequest.of("hi"))
        print("non-streaming:", response.text, response.stop_reason.kind.value)
        async with provider.chat_completion_stream(ChatRequest.of("hi")) as batches:
            async for batch in batches:
                print("batch:", batch)
        try:
            await provider.chat_completion(ChatRequest.of("busy"))
        except RateLimited as error:  # the one classifier: HTTP 429 -> RateLimited
            print("classified:", type(error).__name__, "retry after", error.retry_after)


if __name__ == "__main__":
    trio.run(main)
