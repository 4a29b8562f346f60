"""Protocol conversation ids as kova sessions: the Responses API's ``conversation`` and A2A's
``contextId`` map to sessions of the store given to ``kova.serve.app(sessions=...)``, kept
across app instances (a restart)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx2

import kova.serve
from kova.sessions import SqliteSessionStore

from ._agents import TOKEN, open_agent
from ._serving import serving

if TYPE_CHECKING:
    from pathlib import Path

HEADERS = {"authorization": f"Bearer {TOKEN}"}


def _a2a(text: str, context: str) -> dict[str, object]:
    message = {
        "messageId": text,
        "contextId": context,
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


async def test_conversations_are_sessions_kept_across_restarts(tmp_path: Path) -> None:
    async with open_agent() as (agent, fake), SqliteSessionStore(tmp_path / "s.db") as store:
        for prompt in ("first", "second"):  # a new app each time: only the store remembers
            app = kova.serve.app(agent, token=TOKEN, sessions=store)
            async with serving(app) as url, httpx2.AsyncClient(headers=HEADERS) as client:
                streamed = prompt == "second"
                reply = await client.post(
                    url + "/v1/responses",
                    json={
                        "model": "helper",
                        "input": prompt,
                        "conversation": "c1",
                        "stream": streamed,
                    },
                )
                assert reply.status_code == 200, reply.text
                task = await client.post(url + "/a2a", json=_a2a(prompt, "ctx-9"))
                assert "result" in task.json(), task.text
        sessions = {info.id for info in await store.list()}
        history = await store.session("responses/helper/c1").load()
    requests = [r.json()["messages"] for r in fake.chat_requests()]
    # The second turn of each conversation saw the first.
    texts = [[m.get("content") for m in request] for request in requests]
    assert texts[2] == ["first", "You said: first", "second"]
    assert texts[3] == ["first", "You said: first", "second"]
    assert sessions == {"responses/helper/c1", "a2a/helper/ctx-9"}
    assert [m.text for m in history] == ["first", "You said: first", "second", "You said: second"]
    assert reply.status_code == 200


async def test_a_conversation_without_a_store_is_refused() -> None:
    async with open_agent() as (agent, fake), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with httpx2.AsyncClient(headers=HEADERS) as client:
            reply = await client.post(
                url + "/v1/responses", json={"model": "helper", "input": "x", "conversation": "c"}
            )
    assert reply.status_code == 400
    assert "sessions=" in reply.json()["error"]["message"]
    assert fake.chat_requests() == []
