"""The fake OpenAI server's wire shapes, read with a plain HTTP client."""

from __future__ import annotations

import base64
import json
import struct

import httpx2
import trio

from kova import TextDelta, Usage
from kova.providers import ErrorEvent
from kova.testing import (
    ErrorReply,
    FakeOpenAiServer,
    Script,
    StreamReply,
    open_openai_server,
    reply_text,
    reply_tool_calls,
)


def sse_payloads(body: str) -> list[str]:
    assert body.endswith("\n\n")
    events = body[:-2].split("\n\n")
    assert all(event.startswith("data: ") for event in events)
    return [event[len("data: ") :] for event in events]


async def post(server: FakeOpenAiServer, path: str, body: object) -> httpx2.Response:
    async with httpx2.AsyncClient() as client:
        return await client.post(server.base_url + path, json=body)


async def test_a_tool_call_stream_has_the_recorded_shape() -> None:
    reply = StreamReply(
        response=reply_tool_calls(
            ("get_weather", {"city": "Paris"}), usage=Usage(input_tokens=44, output_tokens=16)
        ),
        chunk_chars=9,
    )
    async with open_openai_server(Script([reply])) as server:
        response = await post(
            server,
            "/v1/chat/completions",
            {
                "model": "gpt-4o",
                "messages": [{"role": "user", "content": "hi"}],
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    payloads = sse_payloads(response.text)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "gpt-4o" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    first_call = chunks[1]["choices"][0]["delta"]["tool_calls"][0]
    assert first_call == {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    fragments = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks[2:-2]]
    assert all(set(f) == {"index", "function"} for f in fragments)
    assert "".join(f["function"]["arguments"] for f in fragments) == '{"city":"Paris"}'
    finish = chunks[-2]
    assert finish["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "tool_calls",
    }
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["prompt_tokens"] == 44
    assert usage_chunk["usage"]["total_tokens"] == 60
    assert all(c["usage"] is None for c in chunks[:-1])


async def test_without_include_usage_no_usage_is_streamed() -> None:
    async with open_openai_server(Script([reply_text("hi")])) as server:
        response = await post(
            server, "/v1/chat/completions", {"model": "m", "messages": [], "stream": True}
        )
    chunks = [json.loads(p) for p in sse_payloads(response.text)[:-1]]
    assert all("usage" not in chunk for chunk in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


async def test_a_non_streaming_completion() -> None:
    reply = reply_text("Hello", usage=Usage(input_tokens=5, output_tokens=1, cache_read_tokens=2))
    async with open_openai_server(Script([reply])) as server:
        response = await post(server, "/v1/chat/completions", {"model": "m", "messages": []})
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {
        "role": "assistant",
        "content": "Hello",
        "refusal": None,
    }
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["prompt_tokens_details"] == {"cached_tokens": 2}


async def test_error_replies_have_openai_bodies_and_retry_headers() -> None:
    script = Script(
        [
            ErrorReply(status_code=429, message="slow", retry_after=1.5),
            ErrorReply(status_code=400, message="bad", error_type="invalid_request_error"),
        ]
    )
    async with open_openai_server(script) as server:
        limited = await post(server, "/v1/chat/completions", {"messages": []})
        bad = await post(server, "/v1/chat/completions", {"messages": []})
        exhausted = await post(server, "/v1/chat/completions", {"messages": []})
        missing = await post(server, "/v1/nothing", {})
    assert limited.status_code == 429
    assert limited.headers["retry-after-ms"] == "1500"
    assert limited.headers["retry-after"] == "2"
    assert limited.json() == {
        "error": {
            "message": "slow",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    assert bad.json()["error"]["type"] == "invalid_request_error"
    assert exhausted.status_code == 500
    assert exhausted.json()["error"]["type"] == "script_exhausted"
    assert missing.status_code == 404


async def test_cut_after_drops_the_connection_mid_body() -> None:
    reply = StreamReply(response=reply_text("abcdefgh"), chunk_chars=2, cut_after=1)
    async with open_openai_server(Script([reply])) as server:
        received = b""
        async with httpx2.AsyncClient() as client:
            try:
                async with client.stream(
                    "POST",
                    server.base_url + "/v1/chat/completions",
                    json={"messages": [], "stream": True},
                ) as response:
                    async for part in response.aiter_bytes():
                        received += part
            except httpx2.RemoteProtocolError:
                pass
            else:
                raise AssertionError("the body must end abruptly")
    assert b'"content":"ab"' in received
    assert b"[DONE]" not in received
    assert b'"content":"cd"' not in received


async def test_an_error_event_ends_the_stream_with_an_error_chunk() -> None:
    events = (TextDelta(text="x"), ErrorEvent(message="boom", error_type="server_error"))
    reply = StreamReply(response=reply_text("unused"), events=events)
    async with open_openai_server(Script([reply])) as server:
        response = await post(server, "/v1/chat/completions", {"messages": [], "stream": True})
    payloads = sse_payloads(response.text)
    assert json.loads(payloads[-1]) == {"error": {"message": "boom", "type": "server_error"}}
    assert "[DONE]" not in payloads


async def test_models_and_embeddings_in_both_encodings() -> None:
    async with open_openai_server(Script([]), models=["a", "b"], embedding_dimensions=4) as server:
        async with httpx2.AsyncClient() as client:
            models = (await client.get(server.base_url + "/v1/models")).json()
        floats = (await post(server, "/v1/embeddings", {"model": "e", "input": ["x", "y"]})).json()
        packed = (
            await post(server, "/v1/embeddings", {"input": "x", "encoding_format": "base64"})
        ).json()
    assert [m["id"] for m in models["data"]] == ["a", "b"]
    assert [d["index"] for d in floats["data"]] == [0, 1]
    assert floats["model"] == "e"
    decoded = struct.unpack("<4f", base64.b64decode(packed["data"][0]["embedding"]))
    assert decoded == tuple(
        struct.unpack("<4f", struct.pack("<4f", *floats["data"][0]["embedding"]))
    )


async def test_requests_are_recorded_and_suffix_routes_serve_azure_paths() -> None:
    async with open_openai_server(Script([reply_text("hi")])) as server:
        async with httpx2.AsyncClient() as client:
            await client.post(
                server.base_url + "/openai/deployments/d1/chat/completions?api-version=2024-10-21",
                json={"messages": [{"role": "user", "content": "hi"}]},
                headers={"api-key": "secret"},
            )
    (request,) = server.requests
    assert request.method == "POST"
    assert request.path == "/openai/deployments/d1/chat/completions"
    assert request.query == {"api-version": "2024-10-21"}
    assert request.headers["api-key"] == "secret"
    assert request.json() == {"messages": [{"role": "user", "content": "hi"}]}
    assert server.script.requests[0].messages[0].text == "hi"


async def test_it_starts_in_a_nursery_and_reports_its_url() -> None:
    server = FakeOpenAiServer(script=Script([reply_text("ok")]))
    async with trio.open_nursery() as nursery:
        url = await nursery.start(server.serve)
        assert url == server.base_url
        assert url.startswith("http://127.0.0.1:")
        response = await post(server, "/v1/chat/completions", {"messages": []})
        assert response.json()["choices"][0]["message"]["content"] == "ok"
        nursery.cancel_scope.cancel()


async def test_the_fake_reads_a_calls_arguments_back_as_the_client_reads_them() -> None:
    def call(call_id: str, arguments: str) -> dict[str, object]:
        function = {"name": "f", "arguments": arguments}
        return {"id": call_id, "type": "function", "function": function}

    spaced, broken = '{"city": "Z\\u00fcrich"}', '{"city": '
    assistant = {"role": "assistant", "content": None, "tool_calls": [call("a", spaced)]}
    assistant["tool_calls"].append(call("b", broken))  # type: ignore[attr-defined]
    async with open_openai_server([reply_text("ok")]) as server:
        await post(server, "/v1/chat/completions", {"model": "m", "messages": [assistant]})
    first, second = server.chat_requests()[0].messages[0].tool_uses
    # Arguments not in kova's compact form are kept to go back byte for byte; text that
    # is not a JSON object is kept as raw_arguments (the agent answers it with an error).
    assert (first.input, first.provider_metadata) == (
        {"city": "Zürich"},
        {"openai_arguments": spaced},
    )
    assert (second.input, second.raw_arguments) == ({}, broken)
