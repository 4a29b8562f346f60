"""kova.asyncio.asgi_app: a trio ASGI app called from asyncio (in-process, through httpx's
ASGI transport; tests/serve/test_uvicorn_mount.py serves one on a real uvicorn): its
requests run on kova's trio guest run, its lifespan runs from asyncio code, and a failed
startup is an error naming why."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import trio

import kova.asyncio
import kova.serve
from kova.agent import AgentBuilder
from kova.testing import TestProvider

if TYPE_CHECKING:
    from collections.abc import MutableMapping


def test_kova_serve_app_answers_from_asyncio_with_its_lifespan() -> None:
    agent = AgentBuilder().provider(TestProvider()).name("helper").build()
    bridge = kova.asyncio.asgi_app(kova.serve.app(agent))

    async def main() -> tuple[Any, Any, bool]:
        async with bridge.lifespan():
            opened = agent.is_open  # the app's lifespan opened it, on the trio side
            transport = httpx.ASGITransport(app=bridge)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                answer = await client.post(
                    "/v1/chat/completions",
                    json={"model": "helper", "messages": [{"role": "user", "content": "hi"}]},
                )
                models = await client.get("/v1/models")
        assert not agent.is_open  # and closed it at the end
        return answer.json(), models.json(), opened

    answer, models, opened = asyncio.run(main())
    assert opened
    assert answer["choices"][0]["message"]["content"]
    assert [model["id"] for model in models["data"]] == ["helper"]


def test_the_trio_app_runs_on_trio_and_its_failed_startup_is_an_error() -> None:
    seen: list[bool] = []

    async def app(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        seen.append(trio.lowlevel.in_trio_run())
        if scope["type"] == "lifespan":
            await receive()
            await send({"type": "lifespan.startup.failed", "message": "no database"})
            return
        await trio.lowlevel.checkpoint()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"from trio"})

    bridge = kova.asyncio.asgi_app(app)

    async def main() -> str:
        with pytest.raises(RuntimeError, match="no database"):
            async with bridge.lifespan():
                pass
        transport = httpx.ASGITransport(app=bridge)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return (await client.get("/")).text

    assert asyncio.run(main()) == "from trio"
    assert seen == [True, True]


def test_only_an_asgi_app_is_taken() -> None:
    with pytest.raises(TypeError, match="takes an ASGI application, not int"):
        kova.asyncio.asgi_app(5)  # type: ignore[arg-type]
