"""The OpenAI-compatible routes, driven by the official ``openai`` client against
``kova.serve.app`` served by Hypercorn's trio worker on loopback; the agent's model is kova's
fake OpenAI server, so the provider's connection is seen on the wire."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import httpx2
import openai
import pytest
import trio

import kova.serve

from ._agents import TOKEN, open_agent, open_connections, released_within
from ._serving import serving

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

# The openai client (on httpx2) leaves its SSE decoders and its response's byte iterators to the
# garbage collector once a stream is read to its end, and trio's finalizer warns about them;
# only those client-side vendor iterators are let through.
pytestmark = [
    pytest.mark.filterwarnings("ignore:Async generator 'openai.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore2.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpx2.:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object "
        "(SSEDecoder|AsyncStream|HTTP11ConnectionByteStream|Response|PoolByteStream)\\.:"
        "pytest.PytestUnraisableExceptionWarning"
    ),
]


_CLIENTS: list[openai.AsyncOpenAI] = []


def _client(url: str, token: str = TOKEN, **options: object) -> openai.AsyncOpenAI:
    client = openai.AsyncOpenAI(
        base_url=url + "/v1",
        api_key=token,
        max_retries=0,
        **options,  # type: ignore[arg-type]
    )
    _CLIENTS.append(client)
    return client


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    yield
    while _CLIENTS:
        await _CLIENTS.pop().close()


async def test_chat_completion_runs_the_agents_tools_and_answers_with_usage() -> None:
    async with open_agent() as (agent, fake), serving(kova.serve.app(agent, token=TOKEN)) as url:
        answer = await _client(url).chat.completions.create(
            model="helper", messages=[{"role": "user", "content": "weather"}]
        )
    assert answer.choices[0].message.content == "It is -3°C, snow in Oslo."
    assert answer.choices[0].finish_reason == "stop"
    assert answer.model == "helper"
    assert answer.usage is not None
    assert answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens
    assert answer.usage.total_tokens > 0
    # The tool ran on the server: the model's second request carries its result.
    second = fake.chat_requests()[1].json()
    assert any(m["role"] == "tool" and "snow" in m["content"] for m in second["messages"])


async def test_chat_completion_streamed_with_usage() -> None:
    async with open_agent() as (agent, _), serving(kova.serve.app(agent, token=TOKEN)) as url:
        stream = await _client(url).chat.completions.create(
            model="helper",
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "hello there"}]},
            ],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: hello there"
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 2  # streamed
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens > 0


async def test_responses_lists_the_tool_calls_and_answers_with_usage() -> None:
    async with open_agent() as (agent, _), serving(kova.serve.app(agent, token=TOKEN)) as url:
        response = await _client(url).responses.create(model="helper", input="weather")
    call, message = response.output
    assert call.type == "mcp_call"
    assert (call.name, json.loads(call.arguments), call.output) == (
        "get_weather",
        {"city": "Oslo"},
        "-3°C, snow",
    )
    assert call.server_label == "helper"
    assert message.type == "message"
    assert response.output_text == "It is -3°C, snow in Oslo."
    assert response.status == "completed"
    assert response.usage is not None
    assert response.usage.total_tokens > 0


async def test_responses_streamed_tool_call_events_then_the_text() -> None:
    async with open_agent() as (agent, _), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with _client(url).responses.stream(model="helper", input="weather") as stream:
            kinds = [event.type async for event in stream]
            final = await stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert kinds.index("response.mcp_call.completed") < kinds.index("response.output_text.delta")
    assert [item.type for item in final.output] == ["mcp_call", "message"]
    assert final.output[0].output == "-3°C, snow"  # type: ignore[union-attr]
    assert final.output_text == "It is -3°C, snow in Oslo."
    assert final.usage is not None


async def test_models_are_the_agents_by_name() -> None:
    async with open_agent("first") as (first, _), open_agent("second") as (second, _):
        async with serving(kova.serve.app(first, second, token=TOKEN)) as url:
            models = await _client(url).models.list()
            answer = await _client(url).chat.completions.create(
                model="second", messages=[{"role": "user", "content": "hi"}]
            )
    assert [m.id for m in models.data] == ["first", "second"]
    assert answer.choices[0].message.content == "You said: hi"


async def test_a_bad_token_and_an_unknown_model_get_openais_errors() -> None:
    async with open_agent() as (agent, fake), serving(kova.serve.app(agent, token=TOKEN)) as url:
        with pytest.raises(openai.AuthenticationError) as refused:
            await _client(url, "wrong-token-wrong-token").chat.completions.create(
                model="helper", messages=[{"role": "user", "content": "hi"}]
            )
        with pytest.raises(openai.AuthenticationError):
            await _client(url, "wrong-token-wrong-token").models.list()
        with pytest.raises(openai.NotFoundError) as unknown:
            await _client(url).responses.create(model="nobody", input="hi")
    assert refused.value.code == "invalid_api_key"
    assert unknown.value.code == "model_not_found"
    assert "helper" in unknown.value.message
    assert fake.chat_requests() == []


async def test_authorize_is_asked_for_every_request() -> None:
    seen: list[str] = []

    async def authorize(connection: object) -> bool:
        headers = connection.headers  # type: ignore[attr-defined]
        seen.append(connection.url.path)  # type: ignore[attr-defined]
        return headers.get("x-team") == "blue"

    async with open_agent() as (agent, _):
        async with serving(kova.serve.app(agent, authorize=authorize)) as url:
            blue = _client(url, "x", default_headers={"x-team": "blue"})
            assert [m.id for m in (await blue.models.list()).data] == ["helper"]
            with pytest.raises(openai.PermissionDeniedError):
                await _client(url).models.list()
    assert seen == ["/v1/models", "/v1/models"]


BAD_BODIES: list[tuple[bytes, int, str]] = [
    (b"{not json", 400, "not valid JSON"),
    (b"", 400, "no body"),
    (b"[1, 2]", 400, "must be a JSON object"),
    (b'{"model": 7, "messages": []}', 400, "model must be"),
    (b'{"model": "helper", "messages": "hi"}', 400, "messages must be"),
    (b'{"model": "helper", "messages": [{"role": "wizard", "content": "x"}]}', 400, "role"),
    (b'{"model": "helper", "messages": [{"role": "user", "content": 5}]}', 400, "content"),
    (
        b'{"model": "helper", "messages": [{"role": "tool", "content": "x", "tool_call_id": "a"}]}',
        400,
        "run their own tools",
    ),
    (b'{"model": "helper", "messages": [{"role": "user", "content": "x"}], "stream": 1}', 400, ""),
    (b'{"model": "helper", "messages": [{"role": "user", "content": "x"}], "n": 3}', 400, "n "),
    (
        b'{"model": "helper", "messages": [{"role": "user", "content": "x"}], "max_tokens": -1}',
        400,
        "max_tokens",
    ),
    (b'{"model": "ghost", "messages": [{"role": "user", "content": "x"}]}', 404, "ghost"),
    (b"[" * 100_000 + b"]" * 100_000, 413, "limit"),
]


@pytest.mark.parametrize(("body", "status", "words"), BAD_BODIES)
async def test_bad_input_gets_openais_error_shape(body: bytes, status: int, words: str) -> None:
    async with (
        open_agent() as (agent, fake),
        serving(kova.serve.app(agent, token=TOKEN, max_body_bytes=64 * 1024)) as url,
        httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}) as client,
    ):
        for path in ("/v1/chat/completions", "/v1/responses"):
            reply = await client.post(url + path, content=body)
            if path.endswith("responses") and status == 400 and b"messages" in body:
                assert reply.status_code in (400, 404)  # no input: refused for that
            else:
                assert reply.status_code == status, reply.text
            error = reply.json()["error"]
            assert set(error) == {"message", "type", "param", "code"}
            assert error["type"] == "invalid_request_error"
            if not path.endswith("responses"):
                assert words in error["message"]
        # The server serves on.
        ok = await client.post(
            url + "/v1/chat/completions",
            json={"model": "helper", "messages": [{"role": "user", "content": "ok"}]},
        )
    assert ok.json()["choices"][0]["message"]["content"] == "You said: ok"
    assert len(fake.chat_requests()) == 1


async def test_fuzzed_bodies_never_stop_the_server() -> None:
    """Random mutations of a good body: every answer is a JSON error or an answer; counted."""
    import random

    rng = random.Random(46)
    good = json.dumps(
        {"model": "helper", "messages": [{"role": "user", "content": "fuzz"}], "stream": False}
    ).encode()
    statuses: dict[int, int] = {}
    async with open_agent() as (agent, _), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}) as client:
            for _ in range(300):
                body = bytearray(good)
                for _ in range(rng.randint(1, 6)):
                    position = rng.randrange(len(body))
                    body[position] = rng.choice(b'{}[]":,0 \\tnx\xff')
                path = rng.choice(("/v1/chat/completions", "/v1/responses"))
                reply = await client.post(url + path, content=bytes(body))
                statuses[reply.status_code] = statuses.get(reply.status_code, 0) + 1
                assert reply.status_code < 500, reply.text
                body_json = reply.json()
                assert "error" in body_json or "choices" in body_json or "output" in body_json
            ok = await client.post(url + "/v1/chat/completions", content=good)
    assert ok.status_code == 200
    assert sum(statuses.values()) == 300
    assert statuses.get(400, 0) > 100


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/agui", "/a2a"])
async def test_a_client_leaving_mid_stream_frees_the_turn_and_its_provider_connection(
    path: str,
) -> None:
    """200 trials: each client reads the first streamed text and goes away while the model
    stalls; the fake model server's connection is closed every time, typically within
    100 ms (the test's own polling of the socket table included)."""
    body = {
        "/v1/chat/completions": {
            "model": "helper",
            "messages": [{"role": "user", "content": "hold"}],
            "stream": True,
        },
        "/v1/responses": {"model": "helper", "input": "hold", "stream": True},
        "/agui": {
            "threadId": "t",
            "runId": "r",
            "messages": [{"id": "1", "role": "user", "content": "hold"}],
        },
        "/a2a": {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": {
                "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hold"}]}
            },
        },
    }[path]
    leaks = over = 0
    times: list[float] = []
    async with open_agent() as (agent, fake), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}) as client:
            for _ in range(200):
                async with client.stream("POST", url + path, json=body) as reply:
                    async for chunk in reply.aiter_bytes():
                        if b"partial" in chunk or b"a pa" in chunk:
                            break
                    assert open_connections(fake.base_url) == 1
                # Leaving the block closed the connection mid-body.
                took = await released_within(fake.base_url, 0.1)
                if took is None:
                    over += 1
                    took = await released_within(fake.base_url, 1.0)
                if took is None:
                    leaks += 1
                else:
                    times.append(took)
    times.sort()
    print(f"released: median {times[100]:.4f}s, p99 {times[198]:.4f}s, over 100 ms: {over}")
    assert leaks == 0  # every provider connection closed (within 1 s on a loaded machine)
    # Typically within 100 ms (bench/serve.py measures the spread); the bound here is loose
    # because it is real time on a shared machine: a turn that is not freed at once but at
    # some timeout (a second or more) still fails it.
    assert times[100] < 0.5
    assert len(fake.chat_requests()) == 200


async def test_a_client_leaving_a_non_streamed_request_frees_the_turn() -> None:
    """A client that sends a request and hangs up while the turn runs (a raw socket: the
    disconnect is exactly that) cancels the turn: the model's connection closes."""
    body = json.dumps(
        {"model": "helper", "messages": [{"role": "user", "content": "slow"}]}
    ).encode()
    async with open_agent() as (agent, fake), serving(kova.serve.app(agent, token=TOKEN)) as url:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        for trial in range(20):
            stream = await trio.open_tcp_stream(host, int(port))
            await stream.send_all(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
                + f"authorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\n".encode()
                + f"content-length: {len(body)}\r\n\r\n".encode()
                + body
            )
            with trio.fail_after(5):
                while len(fake.chat_requests()) <= trial:  # noqa: ASYNC110 (polls the fake)
                    await trio.sleep(0.002)
            assert open_connections(fake.base_url) == 1
            await stream.aclose()
            assert await released_within(fake.base_url, 1.0) is not None
    assert len(fake.chat_requests()) == 20


async def test_a_chunked_body_over_the_limit_is_counted_and_refused() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"model": "helper", "messages": [{"role": "user", "content": "'
        for _ in range(100):
            yield b"x" * 1024

    async with (
        open_agent() as (agent, fake),
        serving(kova.serve.app(agent, token=TOKEN, max_body_bytes=16 * 1024)) as url,
        httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}) as client,
    ):
        reply = await client.post(url + "/v1/chat/completions", content=chunks())
    assert reply.status_code == 413
    assert reply.json()["error"]["code"] == "body_too_large"
    assert fake.chat_requests() == []


async def test_a_call_left_to_a_person_is_not_run_and_the_client_is_told() -> None:
    """An agent whose calls wait for approval (defer_approvals): the OpenAI routes cannot ask
    for one, so the turn ends with approval_required and the tool never runs."""
    async with open_agent(defer=True) as (agent, fake):
        async with serving(kova.serve.app(agent, token=TOKEN)) as url:
            with pytest.raises(openai.APIStatusError) as refused:
                await _client(url).chat.completions.create(
                    model="helper", messages=[{"role": "user", "content": "weather"}]
                )
            stream = await _client(url).chat.completions.create(
                model="helper", messages=[{"role": "user", "content": "weather"}], stream=True
            )
            with pytest.raises(openai.APIError) as failed:
                async for _ in stream:
                    pass
    assert refused.value.status_code == 409
    assert "approval" in refused.value.message
    assert "approval" in str(failed.value)
    for request in fake.chat_requests():  # no tool result ever reached the model
        assert all(m["role"] != "tool" for m in request.json()["messages"])
