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
                assert reply.status_code < 500, reply.text
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
