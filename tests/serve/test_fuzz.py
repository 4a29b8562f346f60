"""Fuzzed bodies to every POST route (OpenAI-compatible, AG-UI, MCP, A2A): each answer is the
route's own error shape or a normal answer, never a server error, counted; the server serves
a good request afterwards."""

from __future__ import annotations

import json
import random

import httpx2
import pytest

import kova.serve

from ._agents import TOKEN, open_agent
from ._serving import serving

GOOD = {
    "/v1/chat/completions": {"model": "helper", "messages": [{"role": "user", "content": "f"}]},
    "/v1/responses": {"model": "helper", "input": "f"},
    "/agui": {
        "threadId": "t",
        "runId": "r",
        "messages": [{"id": "1", "role": "user", "content": "f"}],
    },
    "/a2a": {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "f"}]}},
    },
    "/mcp": {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "fuzz", "version": "1"},
        },
    },
}


@pytest.mark.parametrize("path", list(GOOD))
async def test_fuzzed_bodies_get_the_routes_own_errors(path: str) -> None:
    rng = random.Random(path)
    good = json.dumps(GOOD[path]).encode()
    statuses: dict[int, int] = {}
    headers = {
        "authorization": f"Bearer {TOKEN}",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
    }
    async with open_agent() as (agent, _), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with httpx2.AsyncClient(headers=headers, timeout=30) as client:
            for _ in range(150):
                body = bytearray(good)
                for _ in range(rng.randint(1, 6)):
                    body[rng.randrange(len(body))] = rng.choice(b'{}[]":,0 \\tnx\xff')
                reply = await client.post(url + path, content=bytes(body))
                statuses[reply.status_code] = statuses.get(reply.status_code, 0) + 1
                assert reply.status_code < 500, body
                if reply.headers.get("content-type", "").startswith("application/json"):
                    answer = reply.json()
                    assert isinstance(answer, dict)
                    assert (
                        "error" in answer
                        or "result" in answer
                        or "choices" in answer
                        or ("output" in answer)
                    )
            ok = await client.post(url + path, content=good)
    assert ok.status_code == 200, ok.text
    assert sum(statuses.values()) == 150
    print(path, dict(sorted(statuses.items())))


A2A_FIELDS = {
    "SendMessage": ["message", "configuration", "metadata"],
    "GetTask": ["id", "historyLength"],
    "ListTasks": [
        "contextId",
        "status",
        "pageSize",
        "pageToken",
        "historyLength",
        "statusTimestampAfter",
        "includeArtifacts",
    ],
    "CancelTask": ["id", "metadata"],
    "SubscribeToTask": ["id"],
}
ODD_VALUES = [
    None,
    -1,
    0,
    2**63,
    1.5,
    "",
    "x" * 300,
    "TASK_STATE_WORKING",
    "\ud800",
    [],
    [1, "a"],
    {},
    {"returnImmediately": "yes"},
    {"historyLength": -3},
    {"seconds": "never"},
    True,
]


async def test_a2a_methods_with_wrongly_typed_params_get_json_rpc_errors() -> None:
    """Every A2A method with params of the wrong types and out-of-range values: a JSON-RPC
    answer each time (an error naming the problem, or a result), never a server error."""
    rng = random.Random("a2a-params")
    codes: dict[int | str, int] = {}
    async with open_agent() as (agent, _), serving(kova.serve.app(agent, token=TOKEN)) as url:
        headers = {"authorization": f"Bearer {TOKEN}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as client:
            for number in range(300):
                method = rng.choice(list(A2A_FIELDS))
                fields = A2A_FIELDS[method]
                params = {
                    name: rng.choice(ODD_VALUES)
                    for name in rng.sample(fields, rng.randint(1, len(fields)))
                }
                body = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
                reply = await client.post(url + "/a2a", content=json.dumps(body).encode())
                assert reply.status_code < 500, body
                if reply.headers["content-type"].startswith("text/event-stream"):
                    codes["stream"] = codes.get("stream", 0) + 1
                    continue
                answer = reply.json()
                assert answer["id"] == number
                key = answer["error"]["code"] if "error" in answer else "result"
                codes[key] = codes.get(key, 0) + 1
            listed = await client.post(
                url + "/a2a",
                json={"jsonrpc": "2.0", "id": "ok", "method": "ListTasks", "params": {}},
            )
    assert listed.json()["result"]["pageSize"] == 50
    assert sum(codes.values()) == 300
    assert codes.get(-32602, 0) > 50  # most were refused as invalid params
    print("a2a params", dict(sorted(codes.items(), key=str)))


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"model": "\ud800", "messages": []}),
        ("/v1/responses", {"model": "\ud800", "input": "hi"}),
        ("/agui", {**GOOD["/agui"], "forwardedProps": {"agent": "\ud800"}}),
        (
            "/a2a",
            {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "\ud800"}},
        ),
        ("/a2a", {"jsonrpc": "2.0", "id": 1, "method": "\ud800", "params": {}}),
    ],
)
async def test_a_lone_surrogate_quoted_back_in_an_error_is_escaped(path: str, body: object) -> None:
    """Names a client sent come back in error messages: one with a lone surrogate (which
    UTF-8 cannot carry) is escaped in the JSON, not a server error."""
    headers = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    async with open_agent() as (agent, _), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with httpx2.AsyncClient(headers=headers, timeout=30) as client:
            reply = await client.post(url + path, content=json.dumps(body).encode())
    assert 400 <= reply.status_code < 500 or "error" in reply.json(), reply.text
    assert "error" in reply.json()
