"""The fake Responses server keeps OpenAI's pairing rule: a reasoning item goes back with the
item that followed it in its answer, and that item with its reasoning item."""

from __future__ import annotations

import httpx2

from kova.testing import Script, open_responses_server, reply_text, with_thinking


async def test_a_reasoning_item_and_its_follower_go_back_together() -> None:
    script = Script([with_thinking(reply_text("hi"), "hmm")] + [reply_text("ok")] * 3)
    async with open_responses_server(script) as server:
        async with httpx2.AsyncClient(base_url=server.base_url) as client:
            first = await client.post("/v1/responses", json={"model": "gpt-fake", "input": "q"})
            reasoning, message = first.json()["output"]
            asked = {"role": "user", "content": "q"}

            async def send(*items: object) -> httpx2.Response:
                body = {"model": "gpt-fake", "input": [asked, *items, asked]}
                return await client.post("/v1/responses", json=body)

            alone = await send(reasoning)
            orphan = await send(message)
            both = await send(reasoning, message)
    assert (reasoning["type"], message["type"]) == ("reasoning", "message")
    assert alone.status_code == 400
    assert "without its required following item" in alone.json()["error"]["message"]
    assert orphan.status_code == 400
    assert f"required 'reasoning' item: '{reasoning['id']}'" in orphan.json()["error"]["message"]
    assert both.status_code == 200
